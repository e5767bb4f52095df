"""Steering, the editable queue and cancelling a running turn, end to end on an engine.

Each test parks a tool (or an approval) at a known point, acts, and checks
what the model saw (the `InvocationLog`'s ``model`` lines carry the steered
texts each model call got), what was stored, and what ran.
"""

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents import AgentInterrupt, AgentSessionClient, AgentSessionFlow, AgentSnapshot, MessageRole, ToolCallStatus
from dex_agents.domain.events import AgentEvent, AgentEventType, SteeredLanding, UserMessageSteeredPayload
from dex_agents.domain.messages import MessageDelivery
from dex_agents.domain.snapshot import TurnStatus
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER
from dex_agents.testing import AgentTestStack
from tests.integration.agent.scripted_agent import CLOCK_SKEW_ENV, DEADLINE_ENV, gate, invocations
from tests.integration.agent.test_sessions import fake_stack_with, idle, pending_approval, tool, turn
from tests.integration.runner_conformance import assert_cancelled_at_its_approval
from tests.integration.stacks import session_on_a_worker, started_session

pytestmark = pytest.mark.integration

STEER = MessageDelivery.STEER


async def events_of(stack: AgentTestStack, flow: AgentSessionFlow, session_id: str) -> list[AgentEvent]:
    """Every event of the session up to its first ``turn_committed``."""
    sessions = stack.sessions(flow)
    events: list[AgentEvent] = []
    token = ""
    while True:
        message = await sessions.read_agent_event(session_id, token)
        events.append(message.event)
        token = message.resume_token
        if message.event.type is AgentEventType.TURN_COMMITTED:
            return events


def model_lines() -> list[dict[str, object]]:
    return [entry for entry in invocations().entries() if entry["kind"] == "model"]


def roles_and_texts(snapshot: AgentSnapshot) -> list[tuple[MessageRole, str | None]]:
    return [(m.role, m.text) for m in snapshot.messages]


async def test_a_message_steered_while_a_tool_step_runs_reaches_the_next_model_call_after_the_tool_result(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await stack.start_worker()
    sessions = stack.sessions(flow)
    script = turn(tool("c1", "read_tool", gate="g"), tool_results="each")
    await sessions.start_session("s", script)
    await gate("g").wait_until_reached()

    receipt = await sessions.submit_user_message("s", "also check the date", delivery=STEER)
    listed = await sessions.get_agent_snapshot("s")
    assert [(m.text, m.delivery) for m in listed.queued_messages] == [("also check the date", STEER)]
    gate("g").release()
    snapshot = await idle(stack, flow, "s")

    assert [line["steered"] for line in model_lines()] == [[], ["also check the date"]]
    assert roles_and_texts(snapshot)[1:3] == [(MessageRole.TOOL, None), (MessageRole.USER, "also check the date")]
    assert snapshot.messages[1].tool_call_id == "c1", "the call's result comes before the steered message"
    assert snapshot.state is not None
    assert snapshot.state.turn_count == 1, "it joined the running turn"
    steered = [
        (e.payload.client_message_id, e.payload.landed, e.turn_id)
        for e in await events_of(stack, flow, "s")
        if isinstance(e.payload, UserMessageSteeredPayload)
    ]
    assert steered == [(receipt.client_message_id, SteeredLanding.RUNNING_TURN, "turn-1")]


async def test_a_message_steered_during_an_approval_wait_reaches_the_model_call_after_the_answer(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("c1", "approved_write"), tool_results="each"))
    interrupt = await pending_approval(sessions, "s")

    assert await sessions.send_user_message("s", "and tell me when it is done", delivery="steer")
    assert await sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=True)
    snapshot = await idle(stack, flow, "s")

    assert [line["steered"] for line in model_lines()] == [[], ["and tell me when it is done"]]
    assert [m.role for m in snapshot.messages] == [
        MessageRole.USER,
        MessageRole.TOOL,
        MessageRole.USER,
        MessageRole.ASSISTANT,
    ]
    assert invocations().count("tool") == 1


async def test_a_queued_message_can_be_withdrawn_until_a_turn_takes_it(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("c1", "read_tool", gate="g")))
    await gate("g").wait_until_reached()
    kept = await sessions.submit_user_message("s", turn())
    dropped = await sessions.submit_user_message("s", turn(), client_message_id="drop-me")

    assert await sessions.withdraw_user_message("s", "drop-me") is True
    assert await sessions.withdraw_user_message("s", "drop-me") is False
    listed = await sessions.get_agent_snapshot("s")
    assert [m.client_message_id for m in listed.queued_messages] == [kept.client_message_id]
    gate("g").release()
    result = await sessions.wait_for_turn("s", kept, timeout=60)
    assert result.turn_id == "turn-2"
    snapshot = await idle(stack, flow, "s")

    assert snapshot.state is not None
    assert snapshot.state.turn_count == 2, "the withdrawn message started no turn"
    assert await sessions.withdraw_user_message("s", kept.client_message_id) is False, "a turn took it"
    assert dropped.client_message_id == "drop-me"


async def test_cancelling_while_no_turn_runs_returns_false(stack: AgentTestStack, flow: AgentSessionFlow) -> None:
    sessions = await started_session(stack, flow, turn())
    await idle(stack, flow, "s")
    assert await sessions.cancel_turn("s", "nothing runs") is False
    snapshot = await sessions.get_agent_snapshot("s")
    assert snapshot.state is not None
    assert snapshot.state.last_turn_cancelled is False


async def test_cancelling_while_waiting_for_approval_rejects_it_and_runs_no_further_model_call(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("c1", "approved_write")))
    interrupt = await pending_approval(sessions, "s")

    assert await sessions.cancel_turn("s", "wrong order") is True
    result = await sessions.wait_for_turn("s", "turn-1", timeout=60)

    assert_cancelled_at_its_approval(result, "wrong order")
    assert len(model_lines()) == 1
    assert invocations().count("tool") == 0
    assert not await sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=True)
    events = await events_of(stack, flow, "s")
    assert [e.type for e in events].count(AgentEventType.TURN_CANCELLED) == 1


async def test_cancelling_while_a_read_runs_keeps_its_result_and_runs_no_further_model_call(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("c1", "read_tool", gate="g")))
    await gate("g").wait_until_reached()

    assert await sessions.cancel_turn("s") is True
    gate("g").release()
    result = await sessions.wait_for_turn("s", "turn-1", timeout=60)

    assert result.status is TurnStatus.CANCELLED
    assert [(o.tool_call_id, o.status) for o in result.tool_outcomes] == [("c1", ToolCallStatus.SUCCEEDED)]
    assert invocations().count("tool") == 1
    assert len(model_lines()) == 1
    note = result.messages[-1].text
    assert note is not None
    assert 'read_tool {"gate": "g"} -> succeeded: read_tool done with key s/turn-1/c1' in note


async def test_cancelling_while_two_parallel_tool_steps_wait_at_gates_keeps_both_results(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(
        stack, flow, turn(tool("c1", "read_tool", gate="g1"), tool("c2", "idempotent_write", gate="g2"))
    )
    await gate("g1").wait_until_reached()
    await gate("g2").wait_until_reached()

    assert await sessions.cancel_turn("s", "stop both") is True
    gate("g1").release()
    gate("g2").release()
    result = await sessions.wait_for_turn("s", "turn-1", timeout=60)

    assert result.status is TurnStatus.CANCELLED
    assert sorted((o.tool_call_id, o.status) for o in result.tool_outcomes) == [
        ("c1", ToolCallStatus.SUCCEEDED),
        ("c2", ToolCallStatus.SUCCEEDED),
    ]
    assert len(model_lines()) == 1
    assert invocations().count("tool") == 2


async def test_a_cancel_accepted_just_before_the_worker_is_killed_takes_effect_once(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    worker, sessions = await session_on_a_worker(stack, flow, turn(tool("c1", "read_tool", gate="g")))
    await gate("g").wait_until_reached()

    assert await sessions.cancel_turn("s", "stop") is True
    worker.kill()
    await stack.start_worker()
    gate("g").release()
    result = await sessions.wait_for_turn("s", "turn-1", timeout=120)

    assert result.status is TurnStatus.CANCELLED
    assert len(model_lines()) == 1, "no model call after the cancel, on either Worker"
    snapshot = await idle(stack, flow, "s")
    notes = [m for m in snapshot.messages if (m.text or "").startswith(TURN_CANCELLED_NOTE_HEADER)]
    assert len(notes) == 1
    events = await events_of(stack, flow, "s")
    assert [e.type for e in events].count(AgentEventType.TURN_CANCELLED) == 1
    assert json.loads(snapshot.messages[0].text or "{}")["tools"][0]["id"] == "c1"


@contextlib.asynccontextmanager
async def approval_raised_and_answered_on_skewed_workers(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch, *, deadline: str, raised: str, answered: str
) -> AsyncIterator[tuple[AgentSessionClient, AgentInterrupt]]:
    """Session ``s`` waits at an approval (deadline ``deadline`` s) raised on a Worker whose clock is ``raised`` s off.

    That Worker is killed and one ``answered`` s off takes over; yields the client and the pending approval.
    """
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, {CLOCK_SKEW_ENV: raised, DEADLINE_ENV: deadline}) as (
        stack,
        flow,
    ):
        first = await stack.start_worker()
        sessions = stack.sessions(flow)
        await sessions.start_session("s", turn(tool("c1", "approved_write"), tool_results="each"))
        interrupt = await pending_approval(sessions, "s")
        first.kill()
        monkeypatch.setenv(CLOCK_SKEW_ENV, answered)
        await stack.start_worker()
        yield sessions, interrupt


async def test_an_approval_expires_on_the_engine_clock_even_when_the_worker_clocks_disagree(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The interrupt is raised on a Worker an hour ahead and expired on one an hour behind: measured by either
    # Worker clock the deadline would be two hours away; the engine's Timer expires it after its 2 seconds.
    async with approval_raised_and_answered_on_skewed_workers(
        tmp_path, state_dir, monkeypatch, deadline="2", raised="3600", answered="-3600"
    ) as (sessions, _):
        result = await sessions.wait_for_turn("s", "turn-1", timeout=60)

        assert [o.status for o in result.tool_outcomes] == [ToolCallStatus.EXPIRED]
        assert invocations().count("tool") == 0


async def test_an_answer_before_the_engine_deadline_is_accepted_whatever_the_worker_clock_says(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second Worker, an hour ahead, thinks the deadline passed long ago.
    async with approval_raised_and_answered_on_skewed_workers(
        tmp_path, state_dir, monkeypatch, deadline="600", raised="0", answered="3600"
    ) as (sessions, interrupt):
        assert await sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=True)
        result = await sessions.wait_for_turn("s", "turn-1", timeout=60)

        assert [o.status for o in result.tool_outcomes] == [ToolCallStatus.SUCCEEDED]
        assert invocations().count("tool") == 1
