"""No input a client sends and no runner bug kills a session or stalls a Worker, through the public client.

Each case asserts the clear error (or ``False``) and that nothing accepted
was lost: the session keeps answering the next message.
"""

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import dex
import pytest

from dex_agents import (
    AgentEventType,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSnapshot,
    AgentUserMessage,
    InputProblem,
    InvalidInputError,
    SessionUnavailableError,
    ToolCallStatus,
)
from dex_agents.domain.events import TextDeltaPayload
from dex_agents.domain.tools import call_digest
from dex_agents.infrastructure.dex.codec import to_json_data
from dex_agents.testing import AgentTestStack, session_is_idle, wait_for_agent_snapshot, wait_until
from tests.integration.agent.scripted_agent import (
    BREAK_BUILD,
    DEADLINE_ENV,
    WORKER_SLOTS_ENV,
    WRONG_ROLE,
    invocations,
)
from tests.integration.agent.test_sessions import fake_stack_with, tool, turn
from tests.integration.stacks import started_session

pytestmark = pytest.mark.integration

MIB = 1024 * 1024


async def turns_done(sessions: AgentSessionClient, session_id: str, count: int) -> AgentSnapshot:
    """Wait until ``count`` turns have ended (completed or failed)."""

    def done(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        state = snapshot.state
        if state is not None and state.turn_count >= count and state.active_turn_id is None:
            return snapshot
        return None

    return await wait_for_agent_snapshot(sessions, session_id, done, description=f"{count} turns to end")


async def started(sessions: AgentSessionClient, session_id: str) -> AgentSnapshot:
    """Wait until the start Step committed."""
    return await wait_for_agent_snapshot(
        sessions, session_id, lambda s: s if s.state is not None else None, description="the session to start"
    )


async def answers_next_message(sessions: AgentSessionClient, session_id: str) -> AgentSnapshot:
    """Send a plain turn and check that the session completes it."""
    before = await sessions.get_agent_snapshot(session_id)
    assert before.state is not None
    assert await sessions.send_user_message(session_id, turn()) is True
    after = await turns_done(sessions, session_id, before.state.turn_count + 1)
    assert after.state is not None
    assert after.state.last_turn_error is None
    assert after.messages[-1].text == "{}"
    return after


async def test_a_5_mb_message_is_refused_with_a_clear_error_and_the_session_answers_the_next_message(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn())
    await turns_done(sessions, "s", 1)

    with pytest.raises(InvalidInputError, match="the user message has 5,242,880 bytes of UTF-8; the limit is 262,144"):
        await sessions.send_user_message("s", "x" * (5 * MIB))

    snapshot = await answers_next_message(sessions, "s")
    assert snapshot.state is not None
    assert snapshot.state.turn_count == 2
    assert snapshot.queued_message_count == 0


@pytest.mark.parametrize(
    ("text", "problem"),
    [("lone \ud800 surrogate", InputProblem.LONE_SURROGATE), ("nul \x00 byte", InputProblem.NUL_CHARACTER)],
    ids=["lone-surrogate", "nul"],
)
async def test_a_text_that_is_not_storable_unicode_is_refused_and_changes_nothing(
    stack: AgentTestStack, flow: AgentSessionFlow, text: str, problem: InputProblem
) -> None:
    sessions = await started_session(stack, flow, turn())
    await turns_done(sessions, "s", 1)

    with pytest.raises(InvalidInputError) as refused:
        await sessions.send_user_message("s", text)
    assert refused.value.problem is problem
    # The RPC itself refuses it too, for a caller that bypasses the client's checks.
    raw = await stack.client.invoke_rpc(cast(Any, flow.send_user_message), "s", AgentUserMessage(text=text))
    assert raw is False

    await answers_next_message(sessions, "s")


@pytest.mark.parametrize("text", ["", "   \n\t "], ids=["empty", "whitespace"])
async def test_a_blank_message_answers_false_and_queues_nothing(
    stack: AgentTestStack, flow: AgentSessionFlow, text: str
) -> None:
    sessions = await started_session(stack, flow)

    assert await sessions.send_user_message("s", text) is False

    snapshot = await started(sessions, "s")
    assert snapshot.queued_message_count == 0
    assert snapshot.state is not None
    assert snapshot.state.turn_count == 0
    await answers_next_message(sessions, "s")


async def test_a_message_over_the_limit_sent_straight_to_the_rpc_is_refused_and_not_queued(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow)
    await started(sessions, "s")

    raw = await stack.client.invoke_rpc(
        cast(Any, flow.send_user_message), "s", AgentUserMessage(text="y" * (flow.options.max_input_text_bytes + 1))
    )

    assert raw is False
    assert (await sessions.get_agent_snapshot("s")).queued_message_count == 0
    await answers_next_message(sessions, "s")


async def test_an_unknown_session_id_gets_a_clear_error(stack: AgentTestStack, flow: AgentSessionFlow) -> None:
    await stack.start_worker()
    sessions = stack.sessions(flow)

    with pytest.raises(SessionUnavailableError, match="session 'no-such-session' does not exist") as missing:
        await sessions.send_user_message("no-such-session", turn())
    assert isinstance(missing.value, dex.FlowNotActiveOrNotFoundError)  # code catching the SDK's error still works
    with pytest.raises(SessionUnavailableError, match="no-such-session"):
        await sessions.resolve_interrupt("no-such-session", "turn-1.c1", approved=True)
    with pytest.raises(SessionUnavailableError, match="no-such-session"):
        await sessions.get_agent_snapshot("no-such-session")
    with pytest.raises(InvalidInputError, match="the session ID"):
        await sessions.send_user_message("", turn())


async def test_unknown_expired_and_already_resolved_interrupts_answer_false(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, {DEADLINE_ENV: "3"}) as (stack, flow):
        sessions = await started_session(stack, flow, turn(tool("a", "approved_write"), tool("b", "approved_write")))
        await wait_for_agent_snapshot(
            sessions, "s", lambda s: len(s.pending_interrupts) == 2 or None, description="two approvals"
        )

        assert await sessions.resolve_interrupt("s", "turn-1.nope", approved=True) is False
        assert await sessions.resolve_interrupt("s", "turn-1.a", approved=True) is True
        assert await sessions.resolve_interrupt("s", "turn-1.a", approved=False) is False  # already resolved
        snapshot = await wait_for_agent_snapshot(sessions, "s", session_is_idle, description="the turn to end")
        assert await sessions.resolve_interrupt("s", "turn-1.b", approved=True) is False  # expired

        outcomes = json.loads(snapshot.messages[-1].text or "{}")
        assert outcomes["a"].startswith("succeeded")
        assert outcomes["b"].startswith("expired")


async def test_ten_concurrent_resolves_of_one_interrupt_have_exactly_one_winner(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("a", "approved_write")))
    await wait_for_agent_snapshot(sessions, "s", lambda s: s.pending_interrupts or None, description="an approval")

    answers = await asyncio.gather(
        *(sessions.resolve_interrupt("s", "turn-1.a", approved=n % 2 == 0) for n in range(10))
    )

    assert sorted(answers) == [False] * 9 + [True]
    snapshot = await wait_for_agent_snapshot(sessions, "s", session_is_idle, description="the turn to end")
    assert snapshot.pending_interrupts == ()
    assert invocations().count("tool") in (0, 1)


async def test_a_runner_whose_build_user_message_raises_fails_only_that_turn(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, f"{BREAK_BUILD} first")

    failed = await turns_done(sessions, "s", 1)

    assert failed.state is not None
    assert failed.state.last_turn_error == (
        "the runner could not build the user message: ValueError: this runner cannot build that message"
    )
    assert failed.messages == ()
    await answers_next_message(sessions, "s")
    assert await stack.read_step_history("s")  # the Flow is alive, not failed


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (turn(contract="empty_run_state"), "ToolCallsRequested needs a non-empty run state"),
        (turn(contract="slash_id"), "tool call ID 'c/1' must not contain '/'"),
        (turn(contract="duplicate_ids"), "tool call ID 'c1' is used twice in one turn"),
        (f"{WRONG_ROLE} {turn()}", "build_user_message must return a user message, got role 'assistant'"),
    ],
    ids=["empty-run-state", "slash-in-id", "duplicate-ids", "wrong-role"],
)
async def test_a_runner_breaking_the_contract_fails_that_turn_with_the_reason_and_the_session_goes_on(
    stack: AgentTestStack, flow: AgentSessionFlow, script: str, error: str
) -> None:
    sessions = await started_session(stack, flow, script)

    failed = await turns_done(sessions, "s", 1)

    assert failed.state is not None
    assert failed.state.last_turn_error is not None
    assert "RunnerContractError" in failed.state.last_turn_error
    assert error in failed.state.last_turn_error
    await answers_next_message(sessions, "s")


async def test_a_tool_returning_10_mb_is_stored_cut_with_a_notice_and_the_turn_completes(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("c1", "read_tool", big_output=10 * MIB)))

    snapshot = await turns_done(sessions, "s", 1)

    outcome = json.loads(snapshot.messages[-1].text or "{}")["c1"]
    assert outcome.startswith(f"{ToolCallStatus.SUCCEEDED.value}: yyyy")
    assert "\n[dex-agents: the tool's output was 10,485,760 bytes; only its first " in outcome
    assert len(outcome.encode()) < 300_000
    assert invocations().count("tool") == 1
    await answers_next_message(sessions, "s")


async def read_events(sessions: AgentSessionClient, session_id: str, until: AgentEventType) -> list[Any]:
    """Read the session's live events from the oldest retained until one of type ``until``."""
    events = []
    token = ""
    while True:
        message = await sessions.read_agent_event(session_id, token, long_poll=timedelta(seconds=30))
        token = message.resume_token
        events.append(message.event)
        if message.event.type is until:
            return events


async def test_a_model_streaming_1_mb_of_deltas_streams_all_of_it_in_bounded_events_and_stores_the_answer(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(stream=MIB, delta=256 * 1024))

    events = await read_events(sessions, "s", AgentEventType.TURN_COMPLETED)
    snapshot = await turns_done(sessions, "s", 1)

    answer = snapshot.messages[-1].text
    assert answer is not None
    assert len(answer) == MIB
    deltas = [event.payload for event in events if isinstance(event.payload, TextDeltaPayload)]
    streamed = "".join(delta.text for delta in deltas)
    assert streamed == "model call 1" + answer  # the agent's marker, joined with the text by delta coalescing
    assert (
        max(len(json.dumps(to_json_data(delta, TextDeltaPayload))) for delta in deltas) <= flow.options.max_event_bytes
    )
    assert len(deltas) > MIB // flow.options.max_event_bytes
    await answers_next_message(sessions, "s")


async def test_a_model_answer_too_large_for_one_frame_fails_its_turn_and_the_session_goes_on(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(stream=2 * MIB, delta=MIB))

    failed = await turns_done(sessions, "s", 1)

    assert failed.state is not None
    assert failed.state.last_turn_error is not None
    assert "StepResultTooLargeError" in failed.state.last_turn_error
    assert "over the 3,145,728-byte limit of one result" in failed.state.last_turn_error
    assert invocations().count("model", "turn-1") == 3  # RunModel's attempts, then RecordTurnFailure
    await answers_next_message(sessions, "s")


async def test_a_bystander_session_on_the_same_worker_is_served_while_another_gets_oversized_inputs(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Four task slots: every oversized result frame that reached the server would cost the SDK's pull Worker
    # one task stream for 60-90 s, and the victim's two oversized turns try six of them.
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, {WORKER_SLOTS_ENV: "4"}) as (stack, flow):
        await stack.start_worker()
        sessions = stack.sessions(flow)
        await sessions.start_session("bystander")
        await sessions.start_session("victim")

        async def victim() -> None:
            with pytest.raises(InvalidInputError):
                await sessions.send_user_message("victim", "x" * (5 * MIB))
            assert await sessions.send_user_message("victim", turn(tool("c1", "read_tool", big_output=10 * MIB)))
            assert await sessions.send_user_message("victim", turn(stream=2 * MIB, delta=MIB))
            assert await sessions.send_user_message("victim", turn(stream=3 * MIB, delta=MIB))
            assert await sessions.send_user_message("victim", f"{BREAK_BUILD}")
            await turns_done(sessions, "victim", 4)

        async def bystander() -> None:
            for number in range(1, 6):
                assert await sessions.send_user_message("bystander", turn(tool(f"b{number}", "read_tool")))
                # Well under the SDK's 60-90 s back-off after a refused task stream: a stall times out here.
                await wait_until(
                    f"bystander turn {number}",
                    lambda n=number: _turns_ended(sessions, "bystander", n),  # type: ignore[misc]
                    timeout=20,
                )

        await asyncio.gather(victim(), bystander())

        snapshot = await sessions.get_agent_snapshot("bystander")
        assert snapshot.state is not None
        assert (snapshot.state.turn_count, snapshot.state.last_turn_error) == (5, None)
        victim_state = (await sessions.get_agent_snapshot("victim")).state
        assert victim_state is not None
        assert victim_state.turn_count == 4
        await answers_next_message(sessions, "victim")


async def _turns_ended(sessions: AgentSessionClient, session_id: str, count: int) -> bool:
    state = (await sessions.get_agent_snapshot(session_id)).state
    return state is not None and state.turn_count >= count and state.active_turn_id is None


async def test_a_session_of_messages_at_the_size_limit_stays_readable_page_by_page_and_keeps_answering(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await stack.start_worker()
    sessions = stack.sessions(flow)
    padding = flow.options.max_input_text_bytes - 100
    big_turn = json.dumps({"tools": [], "pad": "p" * padding})
    await sessions.start_session("s", big_turn)
    for number in range(2, 13):  # twelve user messages of ~256 KiB, each stored twice: about 6 MiB in all
        await turns_done(sessions, "s", number - 1)
        assert await sessions.send_user_message("s", big_turn)
    await turns_done(sessions, "s", 12)

    snapshot = await sessions.get_agent_snapshot("s")
    assert snapshot.state is not None
    assert snapshot.state.message_count == 24
    assert snapshot.messages  # the latest messages that fit in one load, newest last
    assert snapshot.messages[-1].sequence == 24
    assert len(snapshot.messages) < 24
    sequences: list[int] = []
    after = 0
    while True:
        page = await sessions.list_agent_messages("s", after_sequence=after, limit=200)
        sequences.extend(message.sequence for message in page.messages)
        if page.next_after_sequence is None:
            break
        after = page.next_after_sequence
    assert sequences == list(range(1, 25))
    await answers_next_message(sessions, "s")


async def test_an_approval_given_for_another_call_fails_that_call_on_the_dev_server_without_running_it(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("a", "approved_write")))
    snapshot = await wait_for_agent_snapshot(
        sessions, "s", lambda s: s if s.pending_interrupts else None, description="an approval"
    )
    (interrupt,) = snapshot.pending_interrupts
    other_call = call_digest("approved_write", '{"amount": 9999}')
    assert other_call != interrupt.call_digest

    assert await sessions.resolve_interrupt(
        "s", interrupt.interrupt_id, approved=True, approver="ada", call_digest=other_call
    )

    done = await turns_done(sessions, "s", 1)
    outcome = json.loads(done.messages[-1].text or "{}")["a"]
    assert outcome.startswith("failed: ")
    assert "approval was given for a different call" in outcome
    assert invocations().count("tool") == 0
    await answers_next_message(sessions, "s")
