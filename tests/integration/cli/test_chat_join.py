"""`dex-agents chat` joining a session that exists, answering its approvals by ID or with a reason, noticing an
approval answered elsewhere, and going on after a message the session refuses."""

import asyncio
import io

import pytest
from rich.console import Console

from dex_agents.cli.chat import AfterQuit, ChatSession
from dex_agents.cli.terminal import ScriptedLines, TypedLines
from dex_agents.testing import wait_for_agent_snapshot, wait_until
from tests.integration.cli.support import ASSISTANT, PROMPT, REFUND_APPROVAL, OrderStack

pytestmark = pytest.mark.integration


def console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=240, highlight=False), out


async def shown(out: io.StringIO, text: str) -> None:
    await wait_until(f"{text!r} on screen", lambda: text in out.getvalue(), timeout=60)


async def test_joining_a_session_shows_its_status_its_approval_and_the_running_turn_then_rejects_it_by_id(
    stack: OrderStack,
) -> None:
    await stack.sessions.start_session("s", PROMPT)
    await wait_for_agent_snapshot(stack.sessions, "s", lambda s: bool(s.pending_interrupts), description="approval")
    screen, out = console()
    lines = TypedLines(screen)
    chat = ChatSession(stack.sessions, "s", screen, lines, after_quit=AfterQuit.KEEPS_RUNNING, answered_by="ada")

    assert not await chat.start()
    await chat.join()
    running = asyncio.create_task(chat.run())
    await shown(out, 'Approve refund_order {"order_id": "7"}? [y/N]')
    lines.type(f"/reject {REFUND_APPROVAL} too expensive")
    await shown(out, "turn-1 completed")
    lines.type("/quit")
    await asyncio.wait_for(running, timeout=60)

    printed = out.getvalue()
    assert "session s is running tools · 1 turn · 1 message · turn-1 running" in printed
    assert (
        f'pending approval {REFUND_APPROVAL}: refund_order {{"order_id": "7"}}  '
        f"(/approve {REFUND_APPROVAL} · /reject {REFUND_APPROVAL} reason)"
    ) in printed
    assert ASSISTANT + "Let me look up order 7." in printed, "the running turn's text so far"
    assert f"sent: rejected {REFUND_APPROVAL}" in printed
    assert f"✗ rejected ({REFUND_APPROVAL}): too expensive · by ada" in printed
    assert printed.count("Approve refund_order") == 1


async def test_an_approval_prompt_stops_asking_once_the_approval_is_answered_elsewhere(stack: OrderStack) -> None:
    screen, out = console()
    lines = TypedLines(screen)
    chat = ChatSession(stack.sessions, "s", screen, lines, after_quit=AfterQuit.KEEPS_RUNNING)
    assert await chat.start()
    running = asyncio.create_task(chat.run())
    lines.type(PROMPT)
    await shown(out, "Approve refund_order")

    assert await stack.sessions.resolve_interrupt("s", REFUND_APPROVAL, approved=True, approver="grace")
    await shown(out, f"⤳ {REFUND_APPROVAL} was answered elsewhere")
    await shown(out, "turn-1 completed")
    lines.type("/quit")
    await asyncio.wait_for(running, timeout=60)

    printed = out.getvalue()
    assert f"✓ approved ({REFUND_APPROVAL}) · by grace" in printed
    assert printed.count("Approve refund_order") == 1
    assert "left session s;" in printed, "the /quit was read as a command, not as the approval's answer"


async def test_a_rejection_at_the_prompt_carries_the_words_as_its_reason_and_a_refused_message_does_not_end_chat(
    stack: OrderStack,
) -> None:
    screen, out = console()
    too_large = "x" * (stack.flow.options.max_input_text_bytes + 1)
    lines = ScriptedLines(screen, [PROMPT, "n the customer already got a voucher", too_large, "/snapshot", "/quit"])
    chat = ChatSession(stack.sessions, "s", screen, lines, after_quit=AfterQuit.KEEPS_RUNNING)
    assert await chat.start()

    await chat.run()

    printed = out.getvalue()
    assert f"✗ rejected ({REFUND_APPROVAL})" in printed
    assert "the customer already got a voucher" in printed
    assert "not sent: " in printed
    assert "Snapshot of session s" in printed, "the chat went on after the refused message"
