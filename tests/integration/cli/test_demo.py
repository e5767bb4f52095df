"""`dex-agents demo` end to end, as a person runs it: exit code and what it prints."""

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.cli.support import ASSISTANT, YOU, cli_env, command, process_gone, processes_started_under

pytestmark = pytest.mark.integration

APPROVAL = 'Approve refund_order {"order_id": "7"}? [y/N]'


def demo(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command("demo", *flags),
        env=cli_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,  # patience, not a measure: a loaded machine takes long to start the demo's Worker children
        check=False,
    )


def in_order(output: str, *lines: str) -> None:
    position = 0
    for line in lines:
        found = output.find(line, position)
        assert found >= 0, f"{line!r} not found after position {position} in:\n{output}"
        position = found + len(line)


def worker_pids(output: str) -> list[int]:
    return [
        int(pid) for pid in re.findall(r"child process pid (\d+)|Worker \(pid (\d+)\)", output) for pid in pid if pid
    ]


def test_demo_with_yes_refunds_once_emails_the_customer_and_prints_the_snapshot() -> None:
    result = demo("--yes")
    assert result.returncode == 0, result.stderr
    in_order(
        result.stdout,
        "dex-agents demo: an order agent as one durable Dex session",
        "engine   the dev server in this process on 127.0.0.1:",
        YOU + "Refund order 7 and tell the customer.",
        ASSISTANT + "Let me look up order 7.",
        '▸ find_order {"order_id": "7"}  read',
        "✓ find_order succeeded → order 7: trail running shoes, 42.00 EUR, delivered, customer ada@example.com",
        ASSISTANT + "Order 7 (trail running shoes, 42.00 EUR) was delivered. Refunding it needs your approval.",
        '▸ refund_order {"order_id": "7"}  idempotent_write · needs approval',
        "⏸ refund_order waits for approval (interrupt turn-1.call-2)",
        f"{APPROVAL} y  (--yes)",
        "✓ approved (turn-1.call-2)",
        "… refund_order running (CallTool-2)",
        "✓ refund_order succeeded → Refund R-1 of 42.00 EUR issued for order 7",
        "▸ email_customer",
        # The output shows only while the turn is active: the snapshot lists the active turn's tool calls, and the
        # last tool's turn may already have ended when the follower reads it (the crash case below checks the same).
        "✓ email_customer succeeded",
        ASSISTANT + "Done: order 7 is refunded (R-1, 42.00 EUR) and the customer has been emailed.",
        "✓ turn-1 completed · 8 messages stored",
        "Snapshot of session order-session-7 · waiting_for_user_message · 1 turn · 9 messages · 0 queued",
        "Tool calls",
        '✓ refund_order {"order_id": "7"} · turn-1 · idempotent_write · approved · 1 attempt → succeeded',
        "Usage: 4 model calls",
        "The refund ran once: the ledger holds 1 refund (R-1, 42.00 EUR for order 7).",
        "1 email was sent to the customer.",
    )
    assert "attempt 2" not in result.stdout
    assert result.stderr == ""


def test_demo_with_no_rejects_the_refund_and_the_model_says_so() -> None:
    result = demo("--no")
    assert result.returncode == 0, result.stderr
    in_order(
        result.stdout,
        f"{APPROVAL} n  (--no)",
        "✗ rejected (turn-1.call-2): Rejected with --no.",
        "✗ refund_order rejected → Rejected with --no.",
        ASSISTANT + "I did not refund order 7: the refund was not approved (Rejected with --no). "
        "I have not emailed the customer.",
        "✓ turn-1 completed · 6 messages stored",
        "· idempotent_write · rejected → rejected: Rejected with --no.",
        "Usage: 3 model calls",
        "No refund was issued: the ledger is empty (refund_order never ran).",
        "0 emails were sent to the customer.",
    )
    assert "refund_order running" not in result.stdout


def test_demo_with_crash_kills_the_worker_inside_the_refund_and_the_refund_still_runs_once() -> None:
    result = demo("--yes", "--crash")
    assert result.returncode == 0, result.stderr
    first, second = worker_pids(result.stdout)[:1] + worker_pids(result.stdout)[-1:]
    assert first != second
    in_order(
        result.stdout,
        f"worker   child process pid {first}",
        "crash    the Worker will be SIGKILLed in the middle of the refund Step",
        f"{APPROVAL} y  (--yes)",
        "… refund_order running (CallTool-2)",
        f"💥 the refund is booked; SIGKILL the Worker (pid {first}) before its Step can report it",
        "the Worker is gone (SIGKILL); the session's state is safe in Dex",
        f"↻ a replacement Worker (pid {second}) starts; Dex runs the refund Step again on it",
        "… refund_order running (CallTool-2 · attempt 2, the same idempotency key)",
        "✓ refund_order succeeded → Refund R-1 of 42.00 EUR issued for order 7 (booked before under the same key)",
        "✓ email_customer succeeded",
        "✓ turn-1 completed · 8 messages stored",
        "· idempotent_write · approved · 2 attempts → succeeded",
        "The refund ran once: the ledger holds 1 refund (R-1, 42.00 EUR for order 7).",
        f"refund_order started 2 times (Worker pids {first}, {second}) with one idempotency key "
        "(order-session-7/turn-1/call-2)",
        "1 email was sent to the customer.",
        "The session carried on",
    )
    assert process_gone(first)
    assert process_gone(second)


def test_ctrl_c_during_the_demo_stops_the_worker_and_leaves_no_process_behind(tmp_path: Path) -> None:
    demo_process = subprocess.Popen(
        command("demo", "--yes", "--crash"),
        env=cli_env(TMPDIR=str(tmp_path)),  # every process the demo starts carries this in its environment
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert demo_process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 90  # patience under load, as in demo()
    while time.monotonic() < deadline:
        line = demo_process.stdout.readline()
        seen.append(line)
        if "refund_order running (CallTool-2)" in line:
            break
    else:
        demo_process.kill()
        pytest.fail("the demo never reached the refund Step:\n" + "".join(seen))
    # The Worker is parked inside the refund Step now.
    [pid] = worker_pids("".join(seen))
    demo_process.send_signal(signal.SIGINT)
    rest, errors = demo_process.communicate(timeout=30)
    assert demo_process.returncode == 130, errors
    assert "interrupted" in errors
    assert "Traceback" not in errors
    assert process_gone(pid)
    assert processes_started_under(tmp_path) == []
    assert "The refund ran once" not in rest


def test_demo_with_crash_engine_kills_the_dev_server_inside_the_refund_and_the_refund_still_runs_once() -> None:
    result = demo("--yes", "--crash-engine")
    assert result.returncode == 0, result.stderr
    in_order(
        result.stdout,
        "engine   the dev server, child process pid",
        "crash    the dev server will be SIGKILLed in the middle of the refund Step, then restarted",
        f"{APPROVAL} y  (--yes)",
        "… refund_order running (CallTool-2)",
        "💥 the refund is booked; SIGKILL the dev server (pid",
        "the dev server is gone (SIGKILL); the session is on disk in",
        "↻ the dev server (pid",
        "… refund_order running (CallTool-2 · attempt 2, the same idempotency key)",
        # The result is read from the snapshot, which a loaded machine may not show in time: the ledger tells.
        "✓ refund_order succeeded",
        "✓ email_customer succeeded",
        "✓ turn-1 completed · 8 messages stored",
        'refund_order {"order_id": "7"} · turn-1 · idempotent_write · approved · 2 attempts → succeeded',
        "The refund ran once: the ledger holds 1 refund (R-1, 42.00 EUR for order 7).",
        "one idempotency key (order-session-7/turn-1/call-2); the second run found the refund booked under that key.",
        "1 email was sent to the customer.",
        "The session carried on: the dev server died inside the refund Step, started again on its data dir",
    )
