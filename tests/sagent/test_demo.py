"""`dex-agents demo --framework sagent` end to end: the order agent on sagent, as a person runs it."""

import subprocess

import pytest

from tests.integration.cli.support import ASSISTANT, cli_env, command
from tests.integration.cli.test_demo import APPROVAL, in_order, worker_pids

pytestmark = pytest.mark.integration


def demo(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command("demo", "--framework", "sagent", *flags),
        env=cli_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_the_sagent_order_agent_refunds_once_after_approval_and_emails_the_customer() -> None:
    result = demo("--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    in_order(
        result.stdout,
        "model    a scripted sagent provider model (MockModelCaps), run by the sagent adapter",
        "session  order-session-7 (Flow type SagentOrderAgent)",
        ASSISTANT + "Let me look up order 7.",
        "✓ find_order succeeded → order 7: trail running shoes, 42.00 EUR, delivered, customer ada@example.com",
        f"{APPROVAL} y  (--yes)",
        "✓ refund_order succeeded → Refund R-1 of 42.00 EUR issued for order 7",
        # Not "→ emailed ...": the CLI follower can find the record gone once the turn is over (a race of the CLI).
        "✓ email_customer succeeded",
        ASSISTANT + "Done: order 7 is refunded (R-1, 42.00 EUR) and the customer has been emailed.",
        "Usage: 4 model calls",
        "The refund ran once: the ledger holds 1 refund (R-1, 42.00 EUR for order 7).",
        "1 email was sent to the customer.",
    )


def test_the_sagent_order_agent_says_so_when_the_refund_is_rejected() -> None:
    result = demo("--no")
    assert result.returncode == 0, result.stdout + result.stderr
    in_order(
        result.stdout,
        ASSISTANT + "I did not refund order 7: the refund was not approved (Rejected with --no). "
        "I have not emailed the customer.",
        "No refund was issued",
    )


def test_a_worker_killed_inside_the_sagent_refund_step_still_refunds_once() -> None:
    result = demo("--yes", "--crash")
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = worker_pids(result.stdout)[:1] + worker_pids(result.stdout)[-1:]
    assert first != second
    in_order(
        result.stdout,
        f"💥 the refund is booked; SIGKILL the Worker (pid {first}) before its Step can report it",
        "… refund_order running (CallTool-2 · attempt 2, the same idempotency key)",
        "✓ refund_order succeeded → Refund R-1 of 42.00 EUR issued for order 7 (booked before under the same key)",
        "The refund ran once: the ledger holds 1 refund (R-1, 42.00 EUR for order 7).",
        "The session carried on",
    )
