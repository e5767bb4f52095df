"""The CLI's order agent keeps every turn's history whole after a cancelled turn (fake Dex, the public client)."""

import json

import pytest

from dex_agents import AgentMessage, AgentSessionClient
from dex_agents.domain.snapshot import TurnStatus
from dex_agents.testing import wait_for_agent_snapshot
from tests.integration.cli.support import OrderStack

pytestmark = pytest.mark.integration

WHOLE_TURN = [["user-prompt"], ["user-prompt"], ["text", "tool-call"], ["tool-return"], ["text"]]
"""Part kinds of a turn that looks an order up and answers: the user message, the opening request as the run sent
it (the agent has instructions), the call, its return, the answer."""


def part_kinds(messages: tuple[AgentMessage, ...]) -> list[list[str]]:
    return [
        [part["part_kind"] for item in json.loads(message.framework_item) for part in item["parts"]]
        for message in messages
    ]


async def ask(sessions: AgentSessionClient, text: str) -> list[list[str]]:
    receipt = await sessions.submit_user_message("s", text)
    result = await sessions.wait_for_turn("s", receipt, timeout=60)
    assert result.status is TurnStatus.COMPLETED
    return part_kinds(result.messages)


async def test_turns_after_a_turn_cancelled_at_its_approval_are_stored_whole(stack: OrderStack) -> None:
    sessions = stack.sessions
    await sessions.start_session("s")
    assert await ask(sessions, "What about order 8?") == WHOLE_TURN
    refund = await sessions.submit_user_message("s", "Refund order 7 again")
    await wait_for_agent_snapshot(
        sessions, "s", lambda s: next(iter(s.pending_interrupts), None), description="the refund's approval", timeout=60
    )
    assert await sessions.cancel_turn("s", reason="x")
    assert (await sessions.wait_for_turn("s", refund, timeout=60)).status is TurnStatus.CANCELLED

    later = [await ask(sessions, "What about order 8?") for _ in range(3)]

    assert later == [WHOLE_TURN] * 3
    history = await sessions.list_agent_messages("s", limit=200)
    snapshot = await sessions.get_agent_snapshot("s")
    assert history.messages == snapshot.messages, "the stored messages are the ones a UI shows"
