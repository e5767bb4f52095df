"""``CallTool``, ``CallSingleAttemptTool`` and their failure routes."""

from datetime import timedelta

import attrs
import pytest

from dex_agents.application.next import End, GoTo, StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.runner import DeferredToolExecution, ToolExecutionResult
from dex_agents.domain import events as ev
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.events import AgentEventType, ToolCallFinishedPayload, ToolCallStartedPayload
from dex_agents.domain.tools import ToolCallCompleted, ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.domain.turns import TurnCompleted
from dex_agents.testing import (
    ScriptedRunner,
    ToolReplies,
    assistant_message,
    deferred_tool_call,
    tool_calls_requested,
)
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.application.policies import IDEMPOTENT, NON_IDEMPOTENT_NO_APPROVAL, READ

S = ToolCallStatus


async def with_pending_call(
    policy: ToolPolicy, replies: ToolReplies, *, tool_call_id: str = "c1", alone: bool = False
) -> InMemorySessionHost:
    """A session whose model asked for ``tool_call_id``; unless ``alone``, beside a read ``sibling`` it joins with."""
    calls = [deferred_tool_call(tool_call_id, "tool", '{"x": 1}', policy=policy)]
    if not alone:
        calls.append(deferred_tool_call("sibling", "tool", "{}", policy=READ))
    runner = ScriptedRunner([tool_calls_requested(*calls)], tool_replies={tool_call_id: replies, "sibling": "ok"})
    session = InMemorySessionHost(runner)
    await session.start("go")
    await session.run_model()
    session.sink.clear()
    return session


async def run_tool_step(session: InMemorySessionHost, step: StepName) -> object:
    """Run call ``c1``'s tool Step ``step`` (``CallTool`` or ``CallSingleAttemptTool``); return its decision."""
    if step is StepName.CALL_TOOL:
        return await session.call_tool("c1")
    return await session.call_single_attempt_tool("c1")


@pytest.mark.parametrize(
    ("policy", "step"),
    [(READ, StepName.CALL_TOOL), (NON_IDEMPOTENT_NO_APPROVAL, StepName.CALL_SINGLE_ATTEMPT_TOOL)],
)
async def test_a_tool_step_records_success_and_publishes_its_one_result(policy: ToolPolicy, step: StepName) -> None:
    session = await with_pending_call(policy, "42 rows")

    assert await run_tool_step(session, step) == End()
    record = session.tool_calls["c1"]
    assert (record.status, record.output) == (S.SUCCEEDED, "42 rows")
    assert session.results.published == [ToolCallCompleted(tool_call_id="c1", turn_id="turn-1", status=S.SUCCEEDED)]
    assert session.sink.types == (AgentEventType.TOOL_CALL_STARTED, AgentEventType.TOOL_CALL_FINISHED)
    started = session.sink.events[0].payload
    assert isinstance(started, ToolCallStartedPayload)
    assert (started.tool_call_id, started.tool_name) == ("c1", "tool")
    assert (started.delivery is None) == (step is StepName.CALL_TOOL)  # only single-attempt Steps mark deliveries
    assert session.sink.events[1].payload == ev.tool_call_finished("c1", "tool", S.SUCCEEDED, output="42 rows")


async def test_the_runner_gets_the_record_the_idempotency_key_and_the_attempt() -> None:
    session = await with_pending_call(IDEMPOTENT, "done")

    await session.call_tool("c1", attempt=2, step_execution_id="CallTool-5")

    (execution,) = session.scripted.tool_executions
    assert execution.flow_id == "session-1"
    assert execution.turn_id == "turn-1"
    assert execution.idempotency_key == "session-1/turn-1/c1"
    assert execution.attempt == 2
    assert (execution.tool_call.tool_call_id, execution.tool_call.arguments) == ("c1", '{"x": 1}')
    assert execution.heartbeat is session.heartbeat
    assert {(e.turn_id, e.step_execution_id, e.attempt) for e in session.sink.events} == {("turn-1", "CallTool-5", 2)}


@pytest.mark.parametrize(
    ("policy", "step", "beats"),
    [(READ, StepName.CALL_TOOL, 0), (NON_IDEMPOTENT_NO_APPROVAL, StepName.CALL_SINGLE_ATTEMPT_TOOL, 1)],
)
async def test_a_tool_step_writes_started_first_and_only_a_single_attempt_one_beats_before_the_tool_runs(
    policy: ToolPolicy, step: StepName, beats: int
) -> None:
    seen: list[tuple[tuple[AgentEventType, ...], int]] = []
    session = await with_pending_call(policy, "")

    def tool(call: DeferredToolExecution) -> str:
        seen.append((session.sink.types, session.heartbeat.count))
        return "ok"

    session.scripted.script_tool("c1", tool)
    await run_tool_step(session, step)

    assert seen == [((AgentEventType.TOOL_CALL_STARTED,), beats)]


async def test_a_tool_execution_error_records_failed_with_its_message_and_publishes_the_result() -> None:
    session = await with_pending_call(READ, ToolExecutionError("no such order"))

    decision = await session.call_tool("c1")

    assert decision == End()
    record = session.tool_calls["c1"]
    assert (record.status, record.error) == (S.FAILED, "no such order")
    assert [r.status for r in session.results.published] == [S.FAILED]
    assert session.sink.events[-1].payload == ev.tool_call_finished("c1", "tool", S.FAILED, error="no such order")


async def test_any_other_exception_fails_the_attempt_and_records_nothing() -> None:
    session = await with_pending_call(READ, ConnectionError("db down"))

    with pytest.raises(ConnectionError):
        await session.call_tool("c1")

    assert session.tool_calls["c1"].status is S.PENDING
    assert session.results.published == []
    assert session.sink.types == (AgentEventType.TOOL_CALL_STARTED,)


async def test_an_approved_call_runs() -> None:
    session = await with_pending_call(ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE), "refunded")
    record = session.tool_calls["c1"]
    session.tool_calls.put(record.approve(digest=record.digest))

    await session.call_single_attempt_tool("c1")

    assert session.tool_calls["c1"].status is S.SUCCEEDED


@pytest.mark.parametrize("final", [S.SUCCEEDED, S.FAILED, S.OUTCOME_UNKNOWN])
@pytest.mark.parametrize(
    "step",
    [
        StepName.CALL_TOOL,
        StepName.CALL_SINGLE_ATTEMPT_TOOL,
        StepName.RECORD_TOOL_FAILURE,
        StepName.RECORD_TOOL_OUTCOME_UNKNOWN,
    ],
)
async def test_a_tool_step_whose_record_is_already_final_ends_without_running_or_publishing(
    step: StepName, final: ToolCallStatus
) -> None:
    session = await with_pending_call(READ, "must not run")
    record = session.tool_calls["c1"]
    finished = {
        S.SUCCEEDED: record.succeed("first"),
        S.FAILED: record.fail("x"),
        S.OUTCOME_UNKNOWN: record.mark_outcome_unknown("x"),
    }
    session.tool_calls.put(finished[final])
    before = session.tool_calls["c1"]

    match step:
        case StepName.CALL_TOOL:
            decision = await session.call_tool("c1")
        case StepName.CALL_SINGLE_ATTEMPT_TOOL:
            decision = await session.call_single_attempt_tool("c1")
        case StepName.RECORD_TOOL_FAILURE:
            decision = await session.record_tool_failure("c1")
        case _:
            decision = await session.record_tool_outcome_unknown("c1")

    assert decision == End()
    assert session.scripted.tool_executions == ()
    assert session.tool_calls["c1"] == before
    assert session.results.published == []
    assert session.sink.events == ()


@pytest.mark.parametrize(
    ("policy", "status"),
    [
        (READ, S.FAILED),
        (IDEMPOTENT, S.OUTCOME_UNKNOWN),
        (ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE), S.OUTCOME_UNKNOWN),
        (ToolPolicy(ToolEffect.UNCLASSIFIED), S.OUTCOME_UNKNOWN),
    ],
)
async def test_record_tool_failure_records_failed_for_a_read_and_outcome_unknown_for_a_write(
    policy: ToolPolicy, status: ToolCallStatus
) -> None:
    session = await with_pending_call(policy, "")
    if session.tool_calls["c1"].status is S.AWAITING_APPROVAL:
        session.tool_calls.put(session.tool_calls["c1"].approve())

    decision = await session.record_tool_failure("c1", recovery_error="3 attempts timed out")

    assert decision == End()
    record = session.tool_calls["c1"]
    assert (record.status, record.error) == (status, "3 attempts timed out")
    assert session.results.published == [ToolCallCompleted(tool_call_id="c1", turn_id="turn-1", status=status)]
    assert session.sink.events[-1].payload == ev.tool_call_finished("c1", "tool", status, error="3 attempts timed out")


async def test_record_tool_outcome_unknown_records_outcome_unknown_with_the_detail() -> None:
    session = await with_pending_call(NON_IDEMPOTENT_NO_APPROVAL, "")

    decision = await session.record_tool_outcome_unknown("c1", recovery_error="worker lost")

    assert decision == End()
    record = session.tool_calls["c1"]
    assert (record.status, record.error) == (S.OUTCOME_UNKNOWN, "worker lost")
    assert [r.status for r in session.results.published] == [S.OUTCOME_UNKNOWN]


# -- every tool call publishes exactly one result, whatever its route -------------------


def fails(times: int, then: str | None = None) -> list[ToolExecutionResult | str | BaseException]:
    replies: list[ToolExecutionResult | str | BaseException] = [ConnectionError(f"try {n}") for n in range(times)]
    if then is not None:
        replies.append(then)
    return replies


ROUTES = [
    # id, policy, tool replies, answer (None: no approval; True/False; "expire"), final status, executions, last Step
    ("read-succeeds", READ, "rows", None, S.SUCCEEDED, 1, StepName.CALL_TOOL),
    ("read-tool-error", READ, ToolExecutionError("bad query"), None, S.FAILED, 1, StepName.CALL_TOOL),
    ("read-retried-then-succeeds", READ, fails(2, "rows"), None, S.SUCCEEDED, 3, StepName.CALL_TOOL),
    ("read-exhausts-retries", READ, fails(3), None, S.FAILED, 3, StepName.RECORD_TOOL_FAILURE),
    ("write-exhausts-retries", IDEMPOTENT, fails(3), None, S.OUTCOME_UNKNOWN, 3, StepName.RECORD_TOOL_FAILURE),
    (
        "single-attempt-fails",
        NON_IDEMPOTENT_NO_APPROVAL,
        fails(1, "never"),
        None,
        S.OUTCOME_UNKNOWN,
        1,
        StepName.RECORD_TOOL_OUTCOME_UNKNOWN,
    ),
    (
        "approved-succeeds",
        ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
        "refunded",
        True,
        S.SUCCEEDED,
        1,
        StepName.CALL_SINGLE_ATTEMPT_TOOL,
    ),
    (
        "approved-tool-error",
        ToolPolicy(ToolEffect.UNCLASSIFIED),
        ToolExecutionError("declined"),
        True,
        S.FAILED,
        1,
        StepName.CALL_SINGLE_ATTEMPT_TOOL,
    ),
    (
        "approved-crashes",
        ToolPolicy(ToolEffect.UNCLASSIFIED),
        fails(1),
        True,
        S.OUTCOME_UNKNOWN,
        1,
        StepName.RECORD_TOOL_OUTCOME_UNKNOWN,
    ),
    (
        "approved-read-exhausts-retries",
        ToolPolicy(ToolEffect.READ, requires_approval=True),
        fails(3),
        True,
        S.FAILED,
        3,
        StepName.RECORD_TOOL_FAILURE,
    ),
    ("rejected", ToolPolicy(ToolEffect.UNCLASSIFIED), "never", False, S.REJECTED, 0, StepName.AWAIT_TOOL_APPROVAL),
    (
        "expired",
        ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
        "never",
        "expire",
        S.EXPIRED,
        0,
        StepName.AWAIT_TOOL_APPROVAL,
    ),
]


@pytest.mark.parametrize(
    ("policy", "replies", "answer", "status", "executions", "last_step"),
    [pytest.param(*row[1:], id=row[0]) for row in ROUTES],
)
async def test_every_tool_call_publishes_exactly_one_result_whatever_its_route(
    policy: ToolPolicy,
    replies: ToolReplies,
    answer: bool | str | None,
    status: ToolCallStatus,
    executions: int,
    last_step: StepName,
) -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "tool", policy=policy), deferred_tool_call("c2", "other")),
            TurnCompleted(new_messages=[assistant_message("done")]),
        ],
        tool_replies={"c1": replies, "other": "fine"},
    )
    session = InMemorySessionHost(runner, options=AgentSessionOptions(interrupt_deadline=timedelta(minutes=1)))
    waiting = await session.drive(await session.start("go"))

    if answer is not None:
        assert GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input="c1") in waiting
        if answer == "expire":
            session.clock.advance(timedelta(minutes=1))
        else:
            assert await session.resolve_interrupt("turn-1.c1", approved=answer is True, rejection_message="no")
        waiting = await session.drive(*waiting)

    assert waiting == (GoTo(step=StepName.AWAIT_USER_MESSAGE),), "the turn completed"
    assert [r.status for r in session.results.published if r.tool_call_id == "c1"] == [status]
    finished = [p for p in session.sink.payloads(ToolCallFinishedPayload) if p.tool_call_id == "c1"]
    assert [p.status for p in finished] == [status]
    assert session.scripted.executed_tool_call_ids.count("c1") == executions
    assert [step for step, step_input, _ in session.executed if step_input == "c1"][-1] is last_step
    assert len({e.idempotency_key for e in session.scripted.tool_executions if e.tool_call.tool_call_id == "c1"}) <= 1
    resumed = session.scripted.model_turns[1]
    assert resumed.recorded_tool_call("c1").status is status
    assert session.tool_calls.all() == (), "the completed turn cleared its records"


async def test_a_runner_owned_framework_state_reaches_the_tool_step_and_its_result_or_error_replaces_it() -> None:
    seen: list[str | None] = []

    def ends_with_state(call: DeferredToolExecution) -> ToolExecutionResult:
        seen.append(call.tool_call.framework_state)
        return ToolExecutionResult("ok", framework_state="after-a")

    requested = tool_calls_requested(
        attrs.evolve(deferred_tool_call("a", "tool", policy=READ), framework_state="before"),
        attrs.evolve(deferred_tool_call("b", "tool", policy=READ), framework_state="before"),
        deferred_tool_call("c", "tool", policy=READ),
    )
    runner = ScriptedRunner(
        [requested],
        tool_replies={
            "a": ends_with_state,
            "b": ToolExecutionError("refused", framework_state="after-b"),
            "c": "no state",
        },
    )
    session = InMemorySessionHost(runner)
    await session.start("go")
    await session.run_model()
    assert session.tool_calls["a"].framework_state == "before"
    for call_id in "abc":
        await session.call_tool(call_id)
    assert seen == ["before"]
    states = {call_id: session.tool_calls[call_id].framework_state for call_id in "abc"}
    assert states == {"a": "after-a", "b": "after-b", "c": None}
    assert session.tool_calls["b"].status is S.FAILED
    # Not part of what an approval binds to.
    assert session.tool_calls["a"].digest == attrs.evolve(session.tool_calls["a"], framework_state=None).digest
