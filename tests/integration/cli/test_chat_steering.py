"""`dex-agents chat` at a terminal: typing while a turn runs steers or queues it, and Ctrl-C cancels it."""

import asyncio
import io

import pytest
from rich.console import Console

from dex_agents.cli.chat import CANCEL_REASON, AfterQuit, ChatSession
from dex_agents.cli.follow import ApprovalDecision, ApprovalRequest
from dex_agents.cli.shop import read_outbox, read_refunds
from dex_agents.cli.terminal import TypedLines
from dex_agents.cli.views import MARK
from dex_agents.testing import wait_until
from tests.integration.cli.support import PROMPT, OrderStack

pytestmark = pytest.mark.integration


class HeldApprover:
    """Approves once the test lets it, so lines typed meanwhile are not taken as the answer."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.set()
        await self.release.wait()
        return ApprovalDecision(approved=True)


def chat_on(stack: OrderStack, session_id: str, **kwargs: object) -> tuple[ChatSession, TypedLines, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False)
    lines = TypedLines(console)
    chat = ChatSession(stack.sessions, session_id, console, lines, after_quit=AfterQuit.KEEPS_RUNNING, **kwargs)  # type: ignore[arg-type]
    return chat, lines, out


async def running_chat(
    stack: OrderStack, session_id: str, **kwargs: object
) -> tuple[ChatSession, TypedLines, io.StringIO, asyncio.Task[None]]:
    """`chat_on`, started, its loop running as a task (the fourth item)."""
    chat, lines, out = chat_on(stack, session_id, **kwargs)
    assert await chat.start()
    return chat, lines, out, asyncio.create_task(chat.run())


async def held_at_approval(
    stack: OrderStack, session_id: str
) -> tuple[HeldApprover, TypedLines, io.StringIO, asyncio.Task[None]]:
    """A running chat whose first turn (the refund `PROMPT`) waits at the approval its `HeldApprover` holds."""
    approver = HeldApprover()
    _, lines, out, running = await running_chat(stack, session_id, approver=approver)
    lines.type(PROMPT)
    await asyncio.wait_for(approver.asked.wait(), timeout=30)
    return approver, lines, out, running


async def quit_chat(lines: TypedLines, running: asyncio.Task[None]) -> None:
    lines.type("/quit")
    await asyncio.wait_for(running, timeout=30)


async def shown(out: io.StringIO, text: str) -> None:
    await wait_until(f"{text!r} on screen", lambda: text in out.getvalue())


async def test_a_line_typed_while_the_turn_waits_for_approval_steers_it(stack: OrderStack) -> None:
    approver, lines, out, running = await held_at_approval(stack, "steer-1")

    lines.type("Please sign the email as Ada.")
    await shown(out, "↪ steering the running turn")
    approver.release.set()
    await shown(out, "turn-1 completed")
    await quit_chat(lines, running)

    printed = out.getvalue()
    assert "typing now steers this turn (/steer, /queue) · Ctrl-C cancels it" in printed
    assert f"you (steer) {MARK} Please sign the email as Ada." in printed, "the prompt shows the mode"
    assert "↪ steered joins the running turn (turn-1): Please sign the email as Ada." in printed
    snapshot = await stack.sessions.get_agent_snapshot("steer-1")
    assert snapshot.state is not None
    assert snapshot.state.turn_count == 1, "the steered line started no turn of its own"
    # The scripted model reads the latest user prompt: after the refund's result it answers the steered line.
    assert [r.order_id for r in read_refunds(stack.shop)] == ["7"]
    assert read_outbox(stack.shop) == []


async def test_a_line_queued_while_a_turn_runs_can_be_withdrawn(stack: OrderStack) -> None:
    approver, lines, out, running = await held_at_approval(stack, "queue-1")

    lines.type("/queue")
    lines.type("Refund order 8")
    await shown(out, "queued for the next turn (/withdraw takes it back)")
    listed = await stack.sessions.get_agent_snapshot("queue-1")
    assert [m.text for m in listed.queued_messages] == ["Refund order 8"]
    lines.type("/withdraw")
    await shown(out, "withdrew the last queued message")
    approver.release.set()
    await shown(out, "turn-1 completed")
    await quit_chat(lines, running)

    snapshot = await stack.sessions.get_agent_snapshot("queue-1")
    assert snapshot.state is not None
    assert snapshot.state.turn_count == 1
    assert snapshot.queued_messages == ()
    assert f"you (queue) {MARK} Refund order 8" in out.getvalue()


async def test_ctrl_c_while_a_turn_waits_for_approval_cancels_the_turn_and_keeps_the_chat(stack: OrderStack) -> None:
    chat, lines, out, running = await running_chat(stack, "cancel-1")
    lines.type(PROMPT)
    await shown(out, 'Approve refund_order {"order_id": "7"}? [y/N]')

    chat.interrupt()  # what Ctrl-C does
    await shown(out, "⊘ turn-1 cancelled")
    lines.type("/snapshot")
    await shown(out, "last turn was cancelled")
    await quit_chat(lines, running)

    printed = out.getvalue()
    assert "⊘ cancelling the running turn (Ctrl-C again leaves the chat)" in printed
    assert f"⊘ turn-1 cancelled: {CANCEL_REASON} · 2 tool calls finished" in printed
    assert "left session cancel-1; it keeps running on the server" in printed
    assert read_refunds(stack.shop) == []
    result = await stack.sessions.wait_for_turn("cancel-1", "turn-1", timeout=10)
    assert result.status.value == "cancelled"


async def test_ctrl_c_while_no_turn_runs_leaves_the_chat(stack: OrderStack) -> None:
    chat, lines, out, running = await running_chat(stack, "leave-1")
    await asyncio.sleep(0)
    chat.interrupt()
    await asyncio.wait_for(running, timeout=10)
    assert "left session leave-1; it keeps running on the server" in out.getvalue()
    lines.type("never read")
