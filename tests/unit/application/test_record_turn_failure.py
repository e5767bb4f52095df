"""``RecordTurnFailure``: the failure route of ``RunModel``."""

from datetime import UTC, datetime

from dex_agents.application.next import GoTo, StepName
from dex_agents.domain import events as ev
from dex_agents.domain.events import AgentEventType
from dex_agents.domain.failure_note import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.session import AgentStatus
from dex_agents.domain.tools import ToolEffect, ToolPolicy
from dex_agents.domain.turns import TurnCompleted
from dex_agents.testing import (
    ScriptedRunner,
    assistant_message,
    deferred_tool_call,
    framework_message,
    tool_calls_requested,
)
from dex_agents.testing.memory import InMemorySessionHost
from tests.builders import make_interrupt

NOTE = (
    "[Dex] The previous turn failed after these tool calls ran:\n"
    '- search {"q": "open"} -> succeeded: 3 tickets\n'
    '- refund {"order": 7} -> outcome_unknown: ' + OUTCOME_UNKNOWN_TOOL_RESULT + "\n"
    "Do not repeat these tool calls unless the user asks again."
)


async def failed_after_tools(runner: ScriptedRunner | None = None) -> InMemorySessionHost:
    """A turn whose two tool calls finished, and whose next model call keeps failing."""
    if runner is None:
        runner = ScriptedRunner()
    runner.script_model(
        tool_calls_requested(
            deferred_tool_call("c1", "search", '{"q": "open"}'),
            deferred_tool_call("c2", "refund", '{"order": 7}', policy=ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)),
            run_state="resume-here",
        )
    )
    session = InMemorySessionHost(runner)
    await session.start("Refund my open order")
    await session.run_model()
    session.tool_calls.put(session.tool_calls["c2"].mark_outcome_unknown("worker lost"))
    session.tool_calls.put(session.tool_calls["c1"].succeed("3 tickets"))
    await session.resume_turn(session.results.take(2))
    session.sink.clear()
    return session


async def test_a_failed_turn_without_tool_calls_records_the_error_and_appends_nothing() -> None:
    runner = ScriptedRunner()
    session = InMemorySessionHost(runner)
    await session.start("hi")
    session.sink.clear()

    decision = await session.record_turn_failure(recovery_error="RunModel failed 3 attempts: timeout")

    assert decision == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    state = session.state.current
    assert (state.status, state.active_turn_id, state.message_count, state.last_turn_error) == (
        AgentStatus.WAITING_FOR_USER_MESSAGE,
        None,
        1,
        "RunModel failed 3 attempts: timeout",
    )
    assert session.messages.texts == ("hi",)
    assert runner.user_message_texts == ("hi",), "no note was built"
    (failed,) = session.sink.events
    assert (failed.type, failed.payload, failed.turn_id) == (
        AgentEventType.TURN_FAILED,
        ev.turn_failed("RunModel failed 3 attempts: timeout"),
        "turn-1",
    )


async def test_a_failed_turn_with_final_records_appends_one_note_then_clears_the_turn() -> None:
    session = await failed_after_tools()

    decision = await session.record_turn_failure(recovery_error="model down")

    assert decision == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    note = session.messages.all[-1]
    assert (note.sequence, note.turn_id, note.role, note.text) == (2, "turn-1", MessageRole.USER, NOTE)
    assert session.scripted.user_message_texts[-1] == NOTE
    state = session.state.current
    assert (state.message_count, state.last_turn_error, state.active_turn_id) == (2, "model down", None)
    assert session.tool_calls.all() == ()
    assert session.run_state.value is None


async def test_a_failed_turn_whose_records_are_unfinished_appends_no_note() -> None:
    runner = ScriptedRunner([tool_calls_requested(deferred_tool_call("c1", "search"))])
    session = InMemorySessionHost(runner)
    await session.start("go")
    await session.run_model()
    session.state.set(session.state.current.resume_model())

    await session.record_turn_failure(recovery_error="boom")

    assert session.messages.texts == ("go",)
    assert session.tool_calls.all() == ()
    assert session.run_state.value is None


async def test_a_failed_turn_clears_only_its_own_interrupts() -> None:
    session = await failed_after_tools()
    raised = datetime(2026, 1, 1, tzinfo=UTC)
    mine = make_interrupt("c9", "x", raised_at=raised)
    other = make_interrupt("c9", "x", turn_id="turn-0", raised_at=raised)
    session.interrupts.set([mine, other])

    await session.record_turn_failure(recovery_error="boom")

    assert session.interrupts.ids == ("turn-0.c9",)


async def test_a_note_the_runner_builds_with_another_role_goes_into_the_error_and_the_turn_still_ends() -> None:
    roles = iter([MessageRole.USER, MessageRole.ASSISTANT])
    runner = ScriptedRunner(build_user_message=lambda text: framework_message(next(roles), text))
    session = await failed_after_tools(runner)

    await session.record_turn_failure(recovery_error="boom")

    state = session.state.current
    assert state.active_turn_id is None
    assert state.last_turn_error is not None
    assert state.last_turn_error.startswith("boom\n(the runner could not store the turn-failure note: ")
    assert "RunnerContractError" in state.last_turn_error
    assert "[Dex] The previous turn failed after these tool calls ran:" in state.last_turn_error
    assert session.tool_calls.all() == ()
    assert session.run_state.value is None
    assert session.messages.texts == ("Refund my open order",)


async def test_a_note_whose_runner_raises_goes_into_the_error_and_the_turn_still_ends() -> None:
    def build(text: str) -> FrameworkMessage:
        if text.startswith("[Dex]"):
            raise UnicodeEncodeError("utf-8", text, 0, 1, "surrogates not allowed")
        return framework_message(MessageRole.USER, text)

    session = await failed_after_tools(ScriptedRunner(build_user_message=build))

    next_ = await session.record_turn_failure(recovery_error="boom")

    assert next_ == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    error = session.state.current.last_turn_error
    assert error is not None
    assert "UnicodeEncodeError" in error
    assert [e.type for e in session.sink.events][-1] is AgentEventType.TURN_FAILED


async def test_a_model_step_that_keeps_failing_ends_the_turn_through_record_turn_failure() -> None:
    runner = ScriptedRunner([TimeoutError("slow")] * 3)
    session = InMemorySessionHost(runner)

    waiting = await session.drive(await session.start("first"))

    assert waiting == (GoTo(step=StepName.AWAIT_USER_MESSAGE),)
    assert [(step, attempt) for step, _, attempt in session.executed[1:]] == [
        (StepName.RUN_MODEL, 1),
        (StepName.RUN_MODEL, 2),
        (StepName.RUN_MODEL, 3),
        (StepName.RECORD_TURN_FAILURE, 1),
    ]
    assert session.state.current.last_turn_error == "TimeoutError: slow"


async def test_last_turn_error_is_cleared_when_a_later_turn_completes() -> None:
    runner = ScriptedRunner([TimeoutError("slow")] * 3 + [TurnCompleted(new_messages=[assistant_message("hello")])])
    session = InMemorySessionHost(runner)
    waiting = await session.drive(await session.start("first"))
    assert session.state.current.last_turn_error == "TimeoutError: slow"

    await session.send_user_message("second")
    await session.drive(*waiting)

    later = session.state.current
    assert later.last_turn_error is None
    assert session.messages.texts == ("first", "second", "hello")
    assert [m.turn_id for m in session.messages.all] == ["turn-1", "turn-2", "turn-2"]
