"""No input, output or runner bug kills a session: refused inputs, bounded outputs, turns failed in place."""

import pytest

from dex_agents import AgentSessionOptions, AgentStatus, AgentTurnContext, AgentUserMessage, InputProblem
from dex_agents.application.next import GoTo, StepName
from dex_agents.domain import events as ev
from dex_agents.domain.events import AgentEventType, TextDeltaPayload
from dex_agents.domain.limits import utf8_size
from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.tools import ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.domain.turns import TurnCompleted
from dex_agents.testing import (
    ScriptedRunner,
    assistant_message,
    deferred_tool_call,
    framework_message,
    tool_calls_requested,
)
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.application.policies import READ

KIB = 1024
SMALL = AgentSessionOptions(max_input_text_bytes=4 * KIB, max_tool_output_bytes=4 * KIB, max_event_bytes=2 * KIB)


def breaking_runner(error: Exception) -> ScriptedRunner:
    def build(text: str) -> FrameworkMessage:
        if "break" in text:
            raise error
        return framework_message(MessageRole.USER, text)

    return ScriptedRunner(build_user_message=build)


@pytest.mark.parametrize("text", ["x" * (4 * KIB + 1), "bad \ud800 surrogate", "nul \x00 inside", "", "   "], ids=repr)
async def test_send_user_message_refuses_a_bad_text_and_queues_nothing(text: str) -> None:
    session = InMemorySessionHost(options=SMALL)
    assert await session.send_user_message(text) is False
    assert session.queue.size() == 0


async def test_send_user_message_accepts_a_text_at_the_limit() -> None:
    session = InMemorySessionHost(options=SMALL)
    assert await session.send_user_message("é" * (2 * KIB)) is True
    assert session.queue.size() == 1


@pytest.mark.parametrize(
    ("interrupt_id", "message"),
    [("", None), ("a/b", None), ("turn-1.c1", "x" * (4 * KIB + 1)), ("turn-1.c1", "\x00")],
)
async def test_resolve_interrupt_answers_false_to_a_malformed_request_and_leaves_the_interrupt_pending(
    interrupt_id: str, message: str | None
) -> None:
    refund = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)
    runner = ScriptedRunner([tool_calls_requested(deferred_tool_call("c1", "refund", "{}", policy=refund))])
    session = InMemorySessionHost(runner, options=SMALL)
    await session.start("go")
    await session.run_model()

    assert await session.resolve_interrupt(interrupt_id, approved=False, rejection_message=message) is False

    assert session.interrupts.ids == ("turn-1.c1",)
    assert session.resolutions.take_one("turn-1.c1") is None


async def test_a_runner_whose_build_user_message_raises_fails_that_turn_and_the_session_waits_again() -> None:
    session = InMemorySessionHost(breaking_runner(UnicodeEncodeError("utf-8", "x", 0, 1, "surrogates not allowed")))
    await session.start(None)

    decision = await session.await_user_message([AgentUserMessage(text="please break")])

    assert decision == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    state = session.state.current
    assert (state.status, state.turn_count, state.active_turn_id) == (AgentStatus.WAITING_FOR_USER_MESSAGE, 1, None)
    assert state.last_turn_error is not None
    assert state.last_turn_error.startswith("the runner could not build the user message: UnicodeEncodeError: ")
    (failed,) = session.sink.events
    assert failed.type is AgentEventType.TURN_FAILED
    assert failed.turn_id == "turn-1"
    assert failed.payload == ev.turn_failed(state.last_turn_error or "")
    assert session.messages.all == ()


async def test_after_a_failed_build_the_next_message_starts_a_turn_normally() -> None:
    runner = breaking_runner(RuntimeError("boom"))
    runner.script_model(TurnCompleted(new_messages=[assistant_message("hello")]))
    session = InMemorySessionHost(runner)
    await session.start(None)
    assert await session.send_user_message("break it") is True
    assert await session.send_user_message("hi") is True

    await session.drive(GoTo(step=StepName.AWAIT_USER_MESSAGE))

    state = session.state.current
    assert (state.turn_count, state.last_turn_error) == (2, None)
    assert session.messages.texts == ("hi", "hello")


async def test_a_first_message_the_client_did_not_check_fails_turn_one_with_the_same_reason() -> None:
    session = InMemorySessionHost(options=SMALL)

    decision = await session.start("x" * (5 * KIB))

    assert decision == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    state = session.state.current
    assert state.turn_count == 1
    assert state.last_turn_error == "refused: the user message has 5,120 bytes of UTF-8; the limit is 4,096"
    assert session.messages.all == ()
    assert session.usage.value is not None


async def test_a_queued_message_that_bypassed_the_checks_fails_its_turn_instead_of_reaching_the_runner() -> None:
    runner = ScriptedRunner()
    session = InMemorySessionHost(runner)
    await session.start(None)

    await session.await_user_message([AgentUserMessage(text="lone \udc00")])

    assert runner.user_message_texts == ()
    error = session.state.current.last_turn_error
    assert error == "refused: the user message holds a lone UTF-16 surrogate, which is not Unicode text"


async def test_a_huge_tool_output_is_stored_cut_with_a_notice_and_the_turn_goes_on() -> None:
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "dump", "{}", policy=READ))],
        tool_replies={"c1": "y" * 10_000_000},
    )
    session = InMemorySessionHost(runner, options=SMALL)
    await session.start("go")
    await session.run_model()

    await session.call_tool("c1")

    record = session.tool_calls["c1"]
    assert record.status is ToolCallStatus.SUCCEEDED
    assert record.output is not None
    assert utf8_size(record.output) <= 4 * KIB
    assert record.output.startswith("yyyy")
    kept, notice = record.output.split("\n", 1)
    assert set(kept) == {"y"}
    assert (
        notice == f"[dex-agents: the tool's output was 10,000,000 bytes; only its first {len(kept):,} bytes are shown.]"
    )


async def test_a_tool_output_with_lone_surrogates_and_nul_is_stored_with_replacement_characters() -> None:
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "read", "{}", policy=READ))],
        tool_replies={"c1": "bytes \udcff and \x00"},
    )
    session = InMemorySessionHost(runner)
    await session.start("go")
    await session.run_model()

    await session.call_tool("c1")

    assert session.tool_calls["c1"].output == "bytes \ufffd and \ufffd"


async def test_a_model_streaming_a_long_delta_writes_several_bounded_events_holding_all_of_it() -> None:
    text = "z" * 50_000

    def stream(turn: AgentTurnContext) -> TurnCompleted:
        turn.events.write_text_delta(text)
        return TurnCompleted(new_messages=[assistant_message(text)])

    runner = ScriptedRunner([stream])
    session = InMemorySessionHost(runner, options=SMALL)
    await session.start("go")
    session.sink.clear()

    await session.run_model()

    deltas = session.sink.of_type(AgentEventType.TEXT_DELTA)
    assert len(deltas) > 20
    pieces = session.sink.payloads(TextDeltaPayload)
    assert len(pieces) == len(deltas)
    assert "".join(piece.text for piece in pieces) == text
    assert all(len(piece.text) <= 2 * KIB for piece in pieces)
    assert session.messages.texts[-1] == text


async def test_a_resume_turn_that_failed_for_good_ends_the_turn_waiting_for_tools() -> None:
    runner = ScriptedRunner([tool_calls_requested(deferred_tool_call("c1", "read", "{}", policy=READ))])
    session = InMemorySessionHost(runner)
    await session.start("go")
    await session.run_model()
    assert session.state.current.status is AgentStatus.RUNNING_TOOLS

    decision = await session.record_turn_failure(recovery_error="lost", step=StepName.RECORD_RESUME_FAILURE)

    assert decision == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    state = session.state.current
    assert (state.status, state.active_turn_id, state.last_turn_error) == (
        AgentStatus.WAITING_FOR_USER_MESSAGE,
        None,
        "lost",
    )
    assert session.tool_calls.all() == ()
    assert session.run_state.value is None


async def test_an_await_user_message_that_failed_for_good_records_the_turn_its_message_would_have_started() -> None:
    session = InMemorySessionHost()
    await session.start(None)

    await session.record_turn_failure(recovery_error="worker lost three times")

    state = session.state.current
    assert (state.turn_count, state.active_turn_id, state.last_turn_error) == (1, None, "worker lost three times")
    assert session.sink.types == (AgentEventType.TURN_FAILED,)


@pytest.mark.parametrize(("initial", "turns"), [("hello", 1), (None, 0), ("  ", 0)])
async def test_a_start_that_failed_for_good_initializes_the_session_and_fails_its_first_turn(
    initial: str | None, turns: int
) -> None:
    session = InMemorySessionHost()

    decision = await session.record_turn_failure(
        recovery_error="boom", start=AgentSessionStartInput(initial_message=initial), step=StepName.RECORD_START_FAILURE
    )

    assert decision == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    state = session.state.current
    assert state.turn_count == turns
    assert state.last_turn_error == ("boom" if turns else None)
    assert session.usage.value is not None
    assert session.interrupts.ids == ()


async def test_a_recovery_error_of_megabytes_is_stored_cut_to_8_kib() -> None:
    session = InMemorySessionHost()
    await session.start(None)

    await session.record_turn_failure(recovery_error="e" * 1_000_000)

    error = session.state.current.last_turn_error
    assert error is not None
    assert utf8_size(error) <= 8 * KIB
    assert "the error was 1,000,000 bytes" in error


async def test_the_turn_failure_note_cuts_each_huge_outcome() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "dump", '{"a": "' + "q" * 5000 + '"}', policy=READ)),
            RuntimeError("down"),
        ],
        tool_replies={"c1": "o" * 200_000},
    )
    session = InMemorySessionHost(runner)
    await session.start("go")
    await session.run_model()
    await session.call_tool("c1")

    await session.record_turn_failure(recovery_error="down")

    note = session.messages.texts[-1]
    assert note is not None
    assert note.startswith("[Dex] The previous turn failed after these tool calls ran:")
    assert utf8_size(note) < 4 * KIB
    assert "the outcome was 200,000 bytes" in note
    assert "the arguments was 5,009 bytes" in note


def test_the_refused_problem_values_are_stable_wire_strings() -> None:
    assert [problem.value for problem in InputProblem] == [
        "blank",
        "too_large",
        "lone_surrogate",
        "nul_character",
        "invalid_id",
        "not_text",
        "not_json",
    ]
