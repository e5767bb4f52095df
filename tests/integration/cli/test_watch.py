"""`dex-agents watch`, `approve` and `reject` against a session this test started on the dev server."""

import asyncio
import re
import subprocess

import pytest

from dex_agents import AgentSnapshot
from dex_agents.cli import main
from dex_agents.cli.shop import read_refunds
from dex_agents.testing import session_is_idle, wait_for_agent_snapshot
from tests.integration.cli.support import (
    ASSISTANT,
    ORDER_FLOW,
    PROMPT,
    REFUND_APPROVAL,
    OrderStack,
    cli_env,
    command,
)

pytestmark = pytest.mark.integration


async def spawn_cli(*args: str) -> asyncio.subprocess.Process:
    """The CLI as a child process with its standard streams piped."""
    return await asyncio.create_subprocess_exec(
        *command(*args),
        env=cli_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def run_cli(*args: str, stdin: str = "") -> tuple[int, str, str]:
    process = await spawn_cli(*args)
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), timeout=45)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `main` in a thread (it has its own event loop); the engine keeps running in this one."""
    code = await asyncio.to_thread(main, list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def waiting_for_approval(stack: OrderStack, session_id: str) -> AgentSnapshot:
    await stack.sessions.start_session(session_id, PROMPT)
    return await wait_for_agent_snapshot(
        stack.sessions, session_id, lambda s: s if s.pending_interrupts else None, description="the refund approval"
    )


async def watching(
    stack: OrderStack, session_id: str
) -> tuple[asyncio.subprocess.Process, asyncio.StreamWriter, asyncio.StreamReader]:
    """``dex-agents watch --until-idle`` in a child on ``session_id`` once it waits for the refund approval.

    Returns the child, its standard input and its standard output.
    """
    await waiting_for_approval(stack, session_id)
    process = await spawn_cli("watch", session_id, "--server", stack.address, "--flow", ORDER_FLOW, "--until-idle")
    assert process.stdout is not None
    assert process.stdin is not None
    return process, process.stdin, process.stdout


async def test_watch_follows_the_session_and_its_approve_command_lets_the_refund_run(stack: OrderStack) -> None:
    process, stdin, stdout = await watching(stack, "watched")
    seen: list[str] = []
    async with asyncio.timeout(90):  # patience under load: watch and the Worker start in child processes
        while "waits for approval" not in (seen or [""])[-1]:
            seen.append((await stdout.readline()).decode())
    # A person reads the question, then answers it.
    stdin.write(f"approve {REFUND_APPROVAL}\n".encode())
    await stdin.drain()
    rest, err = await asyncio.wait_for(process.communicate(), timeout=30)
    out = "".join(seen) + rest.decode()
    assert process.returncode == 0, err
    assert "watching session watched · running_tools" in out
    assert f'pending approval {REFUND_APPROVAL}: refund_order {{"order_id": "7"}}' in out
    for line in (
        "✓ find_order succeeded",
        f"⏸ refund_order waits for approval (interrupt {REFUND_APPROVAL})",
        f"sent: approve {REFUND_APPROVAL}",
        f"✓ approved ({REFUND_APPROVAL})",
        # Results come from the snapshot while the turn runs; a fast turn may end first, so only the status.
        "✓ refund_order succeeded",
        "▸ email_customer",
        "✓ email_customer succeeded",
        ASSISTANT + "Done: order 7 is refunded (R-1, 42.00 EUR) and the customer has been emailed.",
        "✓ turn-1 completed · 8 messages stored",
    ):
        assert line in out, out
    assert [refund.order_id for refund in read_refunds(stack.shop)] == ["7"]

    # Resuming from the printed position shows nothing that was already shown.
    resume = re.findall(r"resume with --from (\S+)", out)[-1]
    code, again, problems = await run_cli(
        "watch", "watched", "--server", stack.address, "--flow", ORDER_FLOW, "--until-idle", "--from", resume
    )
    assert code == 0, problems
    assert "watching session watched · waiting_for_user_message" in again
    assert "turn-1" not in again


async def test_reject_with_a_reason_reaches_the_model_and_answering_again_is_refused(
    stack: OrderStack, capsys: pytest.CaptureFixture[str]
) -> None:
    await waiting_for_approval(stack, "rejected")
    code, out, err = await run_main(
        capsys, "reject", "rejected", REFUND_APPROVAL, "too expensive", "--server", stack.address, "--flow", ORDER_FLOW
    )
    assert (code, err) == (0, "")
    assert out.strip() == f"rejected {REFUND_APPROVAL} in session rejected"
    snapshot = await wait_for_agent_snapshot(stack.sessions, "rejected", session_is_idle, description="the turn")
    assert snapshot.messages[-1].text == (
        "I did not refund order 7: the refund was not approved (too expensive). I have not emailed the customer."
    )
    assert read_refunds(stack.shop) == []

    code, _, err = await run_main(
        capsys, "approve", "rejected", REFUND_APPROVAL, "--server", stack.address, "--flow", ORDER_FLOW
    )
    assert code == 1
    assert err.strip() == f"error: no pending approval '{REFUND_APPROVAL}' in session 'rejected' (pending: none)"


async def test_watch_of_an_unknown_session_is_one_line_and_exit_1(
    stack: OrderStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await run_main(capsys, "watch", "nobody", "--server", stack.address, "--flow", ORDER_FLOW)
    assert code == 1
    assert err.strip() == f"error: unknown session 'nobody' on Dex at {stack.address}"
    assert out == ""


async def test_a_malformed_command_from_a_script_ends_the_watch_with_exit_2(stack: OrderStack) -> None:
    await waiting_for_approval(stack, "typo")
    code, _, err = await run_cli(
        "watch", "typo", "--server", stack.address, "--flow", ORDER_FLOW, stdin=f"aprove {REFUND_APPROVAL}\n"
    )
    assert code == 2
    assert err.strip() == (
        f"error: malformed command 'aprove {REFUND_APPROVAL}' "
        '(commands: approve ID · reject ID "reason" · result CALL_ID JSON · result-error CALL_ID "message" · '
        'cancel "reason" · withdraw MESSAGE_ID · snapshot · quit)'
    )
    snapshot = await stack.sessions.get_agent_snapshot("typo")
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == [REFUND_APPROVAL]


async def test_watch_shows_the_queue_steering_and_a_cancel_it_sends(stack: OrderStack) -> None:
    process, stdin, stdout = await watching(stack, "steered")
    seen: list[str] = []

    async def until(text: str) -> None:
        async with asyncio.timeout(90):  # patience under load: watch and the Worker start in child processes
            while text not in "".join(seen):
                seen.append((await stdout.readline()).decode())

    await until("waits for approval")
    steer = await stack.sessions.submit_user_message("steered", "Please sign as Ada.", delivery="steer")
    queued = await stack.sessions.submit_user_message("steered", "Thanks!")
    stdin.write(b"snapshot\n")
    await stdin.drain()
    await until(f"queued ({queued.client_message_id}): Thanks!")
    stdin.write(b'cancel "wrong order"\n')
    await stdin.drain()
    rest, err = await asyncio.wait_for(process.communicate(), timeout=30)
    out = "".join(seen) + rest.decode()

    assert process.returncode == 0, err
    for line in (
        f"steered ({steer.client_message_id}): Please sign as Ada.",
        "sent: cancel the running turn",
        f"✗ rejected ({REFUND_APPROVAL}): The tool call did not run: the user cancelled the turn. Reason: wrong order",
        "⊘ turn-1 cancelled: wrong order · 2 tool calls finished",
        "↪ steered starts a turn (turn-2): Please sign as Ada.",
    ):
        assert line in out, out
    assert read_refunds(stack.shop) == []
