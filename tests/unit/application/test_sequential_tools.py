"""Sequential tool calls: waves in model order, started by ``RunModel`` and then by ``ResumeTurn``."""

import pytest

from dex_agents.application.next import GoTo, GoToMany, StepName, WaitAgain
from dex_agents.domain.errors import InvalidTransitionError
from dex_agents.domain.events import InterruptRaisedPayload, ToolCallDeferredPayload, ToolCallFinishedPayload
from dex_agents.domain.tool_order import first_wave_size, next_wave, release
from dex_agents.domain.tools import ToolCallStatus
from dex_agents.domain.turns import DeferredToolCall, TurnCompleted
from dex_agents.testing import (
    ScriptedRunner,
    assistant_message,
    deferred_tool_call,
    make_tool_call,
    tool_calls_requested,
)
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.application.policies import NON_IDEMPOTENT
from tests.unit.application.waits import at_the_wait

S = ToolCallStatus

IDLE = (GoTo(step=StepName.AWAIT_USER_MESSAGE),)
"""What a session waits for once its turn ended."""


@pytest.mark.parametrize(
    ("flags", "size"),
    [
        pytest.param([], 0, id="no-calls"),
        pytest.param([False, False, False], 3, id="no-sequential-call"),
        pytest.param([True, False], 1, id="sequential-first"),
        pytest.param([False, False, True, False], 2, id="calls-before-a-sequential-call"),
        pytest.param([True, True, True], 1, id="all-sequential"),
        pytest.param([False, True], 1, id="one-call-then-sequential"),
    ],
)
def test_the_first_wave_is_one_sequential_call_or_every_call_before_the_first_one(flags: list[bool], size: int) -> None:
    assert first_wave_size(flags) == size


def test_the_next_wave_is_taken_from_the_queued_records_in_model_order() -> None:
    records = [
        make_tool_call("done", status=S.SUCCEEDED, deferral_order=0),
        make_tool_call("c", status=S.QUEUED, deferral_order=3),
        make_tool_call("s", status=S.QUEUED, deferral_order=2, sequential=True),
        make_tool_call("d", status=S.QUEUED, deferral_order=4),
    ]
    assert [r.tool_call_id for r in next_wave(records)] == ["s"]
    assert [r.tool_call_id for r in next_wave(records[:2] + records[3:])] == ["c", "d"]
    assert next_wave(records[:1]) == ()


def test_a_released_record_is_pending_or_awaits_its_approval_with_its_interrupt() -> None:
    queued = make_tool_call("c1", status=S.QUEUED)
    assert release(queued).status is S.PENDING
    assert release(queued).interrupt_id is None
    waiting = release(make_tool_call("c1", status=S.QUEUED, policy=NON_IDEMPOTENT))
    assert (waiting.status, waiting.interrupt_id) == (S.AWAITING_APPROVAL, "turn-1.c1")
    with pytest.raises(InvalidTransitionError):
        release(make_tool_call("c1", status=S.PENDING))


def calls(*names: str) -> list[DeferredToolCall]:
    """One call per name; a name starting with ``s`` is sequential, one ending in ``!`` needs approval."""
    made = []
    for name in names:
        call_id = name.rstrip("!")
        policy = NON_IDEMPOTENT if name.endswith("!") else None
        made.append(deferred_tool_call(call_id, f"tool_{call_id}", policy=policy, sequential=call_id.startswith("s")))
    return made


def session_for(*names: str) -> InMemorySessionHost:
    requested = tool_calls_requested(*calls(*names))
    done = TurnCompleted(new_messages=[assistant_message("done")])
    tool_replies = {name.rstrip("!"): f"out-{name.rstrip('!')}" for name in names}
    return InMemorySessionHost(ScriptedRunner([requested, done], tool_replies=tool_replies))


def started(decision: object) -> list[tuple[StepName, object]]:
    assert isinstance(decision, GoToMany)
    return [(m.step, m.input) for m in decision.movements]


async def test_run_model_starts_only_the_calls_before_the_first_sequential_call() -> None:
    session = session_for("a", "b", "s1", "c")
    await session.start("go")
    decision = await session.run_model()
    assert started(decision) == [
        (StepName.CALL_TOOL, "a"),
        (StepName.CALL_TOOL, "b"),
        (StepName.RESUME_TURN, 2),
    ]
    statuses = {r.tool_call_id: r.status for r in session.tool_calls.all()}
    assert statuses == {"a": S.PENDING, "b": S.PENDING, "s1": S.QUEUED, "c": S.QUEUED}
    assert session.tool_calls["s1"].sequential
    deferred = session.sink.payloads(ToolCallDeferredPayload)
    assert [p.tool_call_id for p in deferred] == ["a", "b", "s1", "c"]


async def test_a_response_without_sequential_calls_starts_every_call_at_once() -> None:
    session = session_for("a", "b")
    await session.start("go")
    assert started(await session.run_model()) == [
        (StepName.CALL_TOOL, "a"),
        (StepName.CALL_TOOL, "b"),
        (StepName.RESUME_TURN, 2),
    ]


async def test_the_waves_run_one_after_the_other_and_the_model_sees_every_result() -> None:
    session = session_for("s1", "a", "b", "s2", "c")
    waiting = await at_the_wait(session, "go")
    assert waiting == IDLE
    tool_steps = [
        (step, step_input)
        for step, step_input, _ in session.executed
        if step in (StepName.CALL_TOOL, StepName.RESUME_TURN, StepName.RUN_MODEL)
    ]
    assert tool_steps == [
        (StepName.RUN_MODEL, None),
        (StepName.CALL_TOOL, "s1"),
        (StepName.RESUME_TURN, 1),
        (StepName.CALL_TOOL, "a"),
        (StepName.CALL_TOOL, "b"),
        (StepName.RESUME_TURN, 2),
        (StepName.CALL_TOOL, "s2"),
        (StepName.RESUME_TURN, 1),
        (StepName.CALL_TOOL, "c"),
        (StepName.RESUME_TURN, 1),
        (StepName.RUN_MODEL, None),
    ]
    resumed = session.scripted.model_turns[1]
    assert {i: r.status for i, r in resumed.tool_calls.items()} == dict.fromkeys(
        ["s1", "a", "b", "s2", "c"], S.SUCCEEDED
    )
    assert session.state.current.active_turn_id is None


async def test_a_sequential_call_that_needs_approval_asks_only_when_its_turn_comes_and_holds_the_calls_after_it() -> (
    None
):
    session = session_for("a", "s1!", "b")
    waiting = await at_the_wait(session, "go")
    assert session.interrupts.get() != ()
    (interrupt,) = session.interrupts.get()
    assert interrupt.tool_call_id == "s1"
    assert [step for step, _, _ in session.executed].count(StepName.CALL_TOOL) == 1  # only a ran
    assert session.tool_calls["b"].status is S.QUEUED
    assert {m.step for m in waiting} == {StepName.AWAIT_TOOL_APPROVAL, StepName.RESUME_TURN}
    raised = session.sink.payloads(InterruptRaisedPayload)
    assert [p.tool_call_id for p in raised] == ["s1"]

    assert await session.resolve_interrupt(interrupt.interrupt_id, approved=False, rejection_message="no")
    assert await session.drive(*waiting) == IDLE
    assert session.scripted.executed_tool_call_ids == ("a", "b")
    resumed = session.scripted.model_turns[1]
    assert (resumed.tool_calls["s1"].status, resumed.tool_calls["b"].status) == (S.REJECTED, S.SUCCEEDED)


async def test_a_sequential_call_whose_step_fails_for_good_ends_and_the_calls_after_it_still_run() -> None:
    session = session_for("s1", "b")
    session.scripted.script_tool("s1", RuntimeError("the Worker lost the tool"))
    assert await at_the_wait(session, "go") == IDLE
    assert [step for step, _, _ in session.executed].count(StepName.RECORD_TOOL_FAILURE) == 1
    resumed = session.scripted.model_turns[1]
    assert (resumed.tool_calls["s1"].status, resumed.tool_calls["b"].status) == (S.FAILED, S.SUCCEEDED)


async def test_a_cancelled_turn_records_its_queued_calls_cancelled_and_ends_before_the_model() -> None:
    session = session_for("a", "s1", "b")
    await session.start("go")
    decision = await session.run_model()
    assert await session.cancel_turn("stop")
    assert await session.drive(decision) == IDLE
    assert session.scripted.executed_tool_call_ids == ()
    assert len(session.scripted.model_turns) == 1  # the cancelled turn never called the model again
    finished = {p.tool_call_id: p.status for p in session.sink.payloads(ToolCallFinishedPayload)}
    assert finished == {"a": S.CANCELLED, "s1": S.CANCELLED, "b": S.CANCELLED}
    assert session.state.current.last_turn_cancelled
    assert session.tool_calls.all() == ()


async def test_resume_turn_does_not_count_queued_calls_as_results_it_waits_for() -> None:
    session = session_for("a", "s1")
    await session.start("go")
    await session.run_model()
    session.tool_calls.put(session.tool_calls["a"].succeed("out-a"))
    decision = await session.resume_turn([])
    assert started(decision) == [(StepName.CALL_TOOL, "s1"), (StepName.RESUME_TURN, 1)]
    assert session.tool_calls["s1"].status is S.PENDING
    assert await session.resume_turn([]) == WaitAgain(input=1)
