"""The application API end to end on the dev server: follow a sent message to its turn's end, read past tool outcomes.

Nothing here waits with ``dex_agents.testing``'s polling helpers except where a
test needs a mid-turn state (a pending approval) that the client API does not
wait for.
"""

import asyncio
import json
from pathlib import Path

import pytest

from dex_agents import (
    EXPIRED_REJECTION_MESSAGE,
    TURN_FAILURE_NOTE_HEADER,
    AgentEventType,
    AgentSessionFlow,
    ApprovalStatus,
    MessageRole,
    ToolCallStatus,
    ToolEffect,
    ToolOutcome,
    TurnStatus,
)
from dex_agents.domain.events import TurnCommittedPayload, TurnOutcome
from dex_agents.testing import AgentTestStack
from tests.integration.agent.scripted_agent import DEADLINE_ENV, gate, invocations
from tests.integration.agent.test_sessions import fake_stack_with, pending_approval, tool, turn
from tests.integration.stacks import started_session

pytestmark = pytest.mark.integration

WAIT = 60


async def test_a_submitted_message_is_followed_to_its_completed_turn(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow)

    receipt = await sessions.submit_user_message("s", turn(tool("c1", "read_tool"), tool_results="each"))
    result = await sessions.wait_for_turn("s", receipt, timeout=WAIT)

    assert receipt.accepted
    assert (result.turn_id, result.status, result.error) == ("turn-1", TurnStatus.COMPLETED, None)
    assert result.messages[0].client_message_id == receipt.client_message_id
    assert result.reply is not None
    assert json.loads(result.reply)["c1"].startswith("succeeded: read_tool done")
    assert [(o.tool_call_id, o.status, o.attempts) for o in result.tool_outcomes] == [
        ("c1", ToolCallStatus.SUCCEEDED, 1)
    ]
    assert await sessions.find_turn(receipt) == "turn-1"


async def test_messages_sent_back_to_back_each_resolve_to_their_own_turn(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow)

    receipts = [await sessions.submit_user_message("s", turn(label=n)) for n in range(3)]
    results = [await sessions.wait_for_turn("s", r, timeout=WAIT) for r in reversed(receipts)]

    assert [r.turn_id for r in results] == ["turn-3", "turn-2", "turn-1"]
    assert all(r.status is TurnStatus.COMPLETED for r in results)
    idle = await sessions.wait_until_idle("s", timeout=WAIT)
    assert idle.state is not None
    assert (idle.state.turn_count, idle.queued_message_count) == (3, 0)


async def test_a_blank_message_is_refused_and_its_receipt_starts_no_turn(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow)
    receipt = await sessions.submit_user_message("s", "   ")
    assert not receipt.accepted
    with pytest.raises(ValueError, match="starts no turn"):
        await sessions.wait_for_turn("s", receipt, timeout=WAIT)


async def test_a_turn_whose_model_keeps_failing_is_reported_failed_with_its_error(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("c1", "idempotent_write"), fail_model="after_tools"))

    result = await sessions.wait_for_turn("s", "turn-1", timeout=WAIT)

    assert result.status is TurnStatus.FAILED
    assert result.error is not None
    assert "the model failed after the tools" in result.error
    note = result.messages[-1]
    assert note.role is MessageRole.USER
    assert note.text is not None
    assert note.text.startswith(TURN_FAILURE_NOTE_HEADER)
    assert [(o.tool_call_id, o.status, o.effect) for o in result.tool_outcomes] == [
        ("c1", ToolCallStatus.SUCCEEDED, ToolEffect.IDEMPOTENT_WRITE)
    ]


async def test_turn_committed_arrives_after_the_state_it_announces(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow)
    receipt = await sessions.submit_user_message("s", turn(tool("c1", "read_tool")))

    token = receipt.resume_token
    seen: list[AgentEventType] = []
    while True:
        message = await sessions.read_agent_event("s", token)
        token = message.resume_token
        seen.append(message.event.type)
        if message.event.type is AgentEventType.TURN_COMMITTED:
            break
    committed = message.event
    # No waiting: the snapshot read right after the event already shows the end.
    snapshot = await sessions.get_agent_snapshot("s")

    assert seen.index(AgentEventType.TURN_COMPLETED) < seen.index(AgentEventType.TURN_COMMITTED)
    assert committed.turn_id == "turn-1"
    assert committed.payload == TurnCommittedPayload(outcome=TurnOutcome.COMPLETED, error=None, message_count=2)
    assert snapshot.state is not None
    assert (snapshot.state.active_turn_id, snapshot.state.turn_count) == (None, 1)


async def test_a_rejected_call_keeps_its_rejection_and_approver_after_the_turn(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow)
    receipt = await sessions.submit_user_message(
        "s", turn(tool("c1", "approved_write"), tool("c2", "read_tool"), tool_results="together")
    )
    interrupt = await pending_approval(sessions, "s")
    assert await sessions.resolve_interrupt(
        "s", interrupt.interrupt_id, approved=False, rejection_message="not today", approver="ana"
    )

    result = await sessions.wait_for_turn("s", receipt, timeout=WAIT)

    (tool_message,) = [m for m in result.messages if m.role is MessageRole.TOOL]
    assert tool_message.tool_outcomes == (
        ToolOutcome(
            tool_call_id="c1",
            tool_name="approved_write",
            status=ToolCallStatus.REJECTED,
            effect=ToolEffect.IDEMPOTENT_WRITE,
            attempts=0,
            approval=ApprovalStatus.REJECTED,
            approver="ana",
            rejection_message="not today",
        ),
        tool_message.tool_outcomes[1],
    )
    assert tool_message.tool_outcomes[1].status is ToolCallStatus.SUCCEEDED
    assert tool_message.tool_outcomes[1].approval is None
    assert invocations().count("tool", "approved_write") == 0


async def test_an_approval_that_expires_is_reported_expired_and_the_model_is_told(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, {DEADLINE_ENV: "1"}) as (stack, flow):
        sessions = await started_session(stack, flow)
        receipt = await sessions.submit_user_message("s", turn(tool("c1", "approved_write"), tool_results="each"))

        result = await sessions.wait_for_turn("s", receipt, timeout=WAIT)

        (outcome,) = result.tool_outcomes
        assert (outcome.status, outcome.approval, outcome.attempts) == (
            ToolCallStatus.EXPIRED,
            ApprovalStatus.EXPIRED,
            0,
        )
        assert outcome.rejection_message == EXPIRED_REJECTION_MESSAGE
        assert result.reply is not None
        assert json.loads(result.reply) == {"c1": f"expired: {EXPIRED_REJECTION_MESSAGE}"}


async def test_tool_outcomes_of_a_turn_three_turns_back_are_read_from_the_snapshot_and_the_pages(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(
        stack, flow, turn(tool("c1", "read_tool"), tool("c2", "read_tool", error="no such order"), tool_results="each")
    )
    for n in range(3):
        receipt = await sessions.submit_user_message("s", turn(label=n))
        await sessions.wait_for_turn("s", receipt, timeout=WAIT)

    snapshot = await sessions.get_agent_snapshot("s")
    page = await sessions.list_agent_messages("s")

    assert snapshot.state is not None
    assert snapshot.state.turn_count == 4
    assert snapshot.tool_calls == ()  # the records are gone
    for messages in (snapshot.messages, page.messages):
        outcomes = [o for m in messages if m.turn_id == "turn-1" for o in m.tool_outcomes]
        assert [(o.tool_call_id, o.status, o.error) for o in outcomes] == [
            ("c1", ToolCallStatus.SUCCEEDED, None),
            ("c2", ToolCallStatus.FAILED, "no such order"),
        ]
    earlier = await sessions.wait_for_turn("s", "turn-1", timeout=WAIT)
    assert earlier.status is TurnStatus.COMPLETED
    assert [o.tool_call_id for o in earlier.tool_outcomes] == ["c1", "c2"]


async def test_wait_for_turn_end_returns_once_the_turn_end_is_committed_and_not_before(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("c1", "read_tool", gate="end")))
    await gate("end").wait_until_reached()
    waiting = asyncio.ensure_future(sessions.wait_for_turn_end("s", "turn-1", timeout=WAIT))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    gate("end").release()
    await waiting

    snapshot = await sessions.get_agent_snapshot("s")
    assert snapshot.state is not None
    assert (snapshot.state.turn_count, snapshot.state.active_turn_id) == (1, None)
    # An ended turn answers at once, and so does an earlier one.
    await sessions.wait_for_turn_end("s", "turn-1", timeout=WAIT)
    await sessions.send_user_message("s", turn())
    await sessions.wait_for_turn_end("s", "turn-2", timeout=WAIT)
    await sessions.wait_for_turn_end("s", "turn-1", timeout=WAIT)
    assert (await sessions.wait_for_turn("s", "turn-2", timeout=WAIT)).status is TurnStatus.COMPLETED


async def test_wait_for_turn_end_of_a_turn_that_never_starts_times_out(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow)  # no first message: no turn runs
    with pytest.raises(TimeoutError):
        await sessions.wait_for_turn_end("s", "turn-1", timeout=1.5)
    with pytest.raises(ValueError, match="not a turn ID"):
        await sessions.wait_for_turn_end("s", "not-a-turn", timeout=1)


async def test_wait_for_turn_end_reads_the_events_when_the_server_does_not_serve_attribute_waits(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("c1", "read_tool")))
    sessions._attribute_waits = False  # as after a server's UNIMPLEMENTED answer
    await sessions.wait_for_turn_end("s", "turn-1", timeout=WAIT)
    assert (await sessions.wait_for_turn("s", "turn-1", timeout=WAIT)).status is TurnStatus.COMPLETED


async def test_a_zero_timeout_still_reads_an_ended_turn_once(stack: AgentTestStack, flow: AgentSessionFlow) -> None:
    sessions = await started_session(stack, flow, turn())
    await sessions.wait_for_turn_end("s", "turn-1", timeout=WAIT)
    assert (await sessions.wait_for_turn("s", "turn-1", timeout=0)).status is TurnStatus.COMPLETED
    await sessions.wait_for_turn_end("s", "turn-1", timeout=0)
    with pytest.raises(TimeoutError):
        await sessions.wait_for_turn_end("s", "turn-2", timeout=0)
