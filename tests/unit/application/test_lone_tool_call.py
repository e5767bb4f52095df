"""A model response of one call: its tool Step resumes the turn, with no ``ResumeTurn`` joining its result."""

import pytest

from dex_agents.application.next import GoTo, GoToMany, StepName
from dex_agents.application.runner import ReconcileResult, ToolApprovalRequestedError, ToolExecutionResult
from dex_agents.domain import events as ev
from dex_agents.domain.errors import InvalidTransitionError
from dex_agents.domain.messages import MessageDelivery
from dex_agents.domain.session import AgentStatus
from dex_agents.domain.tools import ToolCallStatus, ToolPolicy
from dex_agents.domain.turns import TurnCompleted
from dex_agents.domain.usage import AgentUsage
from dex_agents.testing import (
    ScriptedRunner,
    ToolReplies,
    assistant_message,
    deferred_tool_call,
    tool_calls_requested,
)
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.application.policies import NEEDS_APPROVAL, NON_IDEMPOTENT_NO_APPROVAL, READ
from tests.unit.application.test_reconcile_tool_call import RECONCILABLE, ProbingRunner

S = ToolCallStatus
IDLE = (GoTo(step=StepName.AWAIT_USER_MESSAGE),)


def one_call_turn(replies: ToolReplies = "found it", *, policy: ToolPolicy = READ) -> InMemorySessionHost:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "lookup", policy=policy)),
            TurnCompleted(new_messages=[assistant_message("done")]),
        ],
        tool_replies={"c1": replies},
    )
    return InMemorySessionHost(runner)


def model_next(host: InMemorySessionHost) -> GoTo:
    return GoTo(step=StepName.RUN_MODEL, window=host.state.current.model_window())


async def test_a_response_of_one_call_goes_to_its_tool_step_alone() -> None:
    host = one_call_turn()
    await host.start("look it up")

    assert await host.run_model() == GoTo(step=StepName.CALL_TOOL, input="c1")

    assert host.tool_calls["c1"].resumes_turn
    assert host.state.current.status is AgentStatus.RUNNING_TOOLS


async def test_the_lone_calls_step_resumes_the_turn_and_counts_its_usage_without_publishing() -> None:
    used = AgentUsage(model_calls=1, input_tokens=7)
    host = one_call_turn(ToolExecutionResult("found it", usage=used))
    await host.start("look it up")
    await host.run_model()
    host.sink.clear()
    before = host.usage.get()

    assert await host.call_tool("c1") == model_next(host)

    assert host.state.current.status is AgentStatus.RUNNING_MODEL
    assert host.tool_calls["c1"].status is S.SUCCEEDED
    assert host.results.published == [], "no ResumeTurn waits for it"
    assert host.usage.get() == before + used
    assert host.sink.events[-1].payload == ev.usage_recorded(used, before + used)
    assert await host.drive(model_next(host)) == IDLE
    assert host.messages.texts[-1] == "done"
    assert StepName.RESUME_TURN not in [step for step, *_ in host.executed]


async def test_the_lone_calls_own_count_reaches_the_next_model_calls_usage_event() -> None:
    host = one_call_turn(ToolExecutionResult("found it", usage=AgentUsage(tool_calls=1)))
    await host.start("look it up")
    await host.run_model()
    host.sink.clear()

    await host.call_tool("c1")
    assert host.sink.payloads(ev.UsageRecordedPayload) == [], "no model usage: no event of its own"
    assert host.usage.get().tool_calls == 1
    await host.run_model()

    (recorded,) = host.sink.payloads(ev.UsageRecordedPayload)
    assert (recorded.recorded.tool_calls, recorded.session.tool_calls) == (0, 1)


async def test_a_message_steered_while_the_lone_call_runs_reaches_the_next_model_call_through_resume_turn() -> None:
    host = one_call_turn()
    await host.start("look it up")
    await host.run_model()
    resumed = await host.call_tool("c1")
    assert await host.send_user_message("also the date", delivery=MessageDelivery.STEER)  # it ran meanwhile

    assert await host.run_model() == GoTo(step=StepName.RESUME_TURN, input=0), "taken before the model is called"
    assert [t.steered_messages for t in host.scripted.model_turns] == [()], "the model was not called again"
    assert await host.drive(GoTo(step=StepName.RESUME_TURN, input=0)) == IDLE

    first, second = host.scripted.model_turns
    assert first.steered_messages == ()
    assert [m.text for m in second.steered_messages] == ["also the date"]
    assert [r.status for r in second.tool_calls.values()] == [S.SUCCEEDED]
    assert host.state.current.turn_count == 1, "it joined the running turn"
    del resumed


async def test_the_detour_through_resume_turn_is_taken_once_per_boundary() -> None:
    host = one_call_turn()
    await host.start("look it up")
    await host.run_model()
    await host.call_tool("c1")
    assert host.state.current.resumed_by_call
    assert await host.send_user_message("first", delivery=MessageDelivery.STEER)
    assert await host.run_model() == GoTo(step=StepName.RESUME_TURN, input=0)
    assert await host.resume_turn([], host.steering.take_all()) == model_next(host)
    taken = host.state.current
    assert not taken.resumed_by_call
    assert await host.send_user_message("second", delivery=MessageDelivery.STEER)  # lands in the gap

    assert await host.run_model() == GoTo(step=StepName.AWAIT_USER_MESSAGE), "the model is called: no second detour"

    assert [m.text for m in host.scripted.model_turns[-1].steered_messages] == ["first"]
    assert host.steering.size() == 1, "taken at the next boundary, here the next turn"


async def test_a_resume_turn_with_nothing_to_join_and_no_call_that_resumed_fails_loudly() -> None:
    host = one_call_turn()
    await host.start("look it up")

    with pytest.raises(InvalidTransitionError):
        await host.resume_turn([])


async def test_a_steered_message_waiting_as_a_turn_starts_is_left_for_a_boundary_after_tool_results() -> None:
    host = one_call_turn()
    await host.start("look it up")
    assert await host.send_user_message("meanwhile", delivery=MessageDelivery.STEER)

    assert await host.run_model() == GoTo(step=StepName.CALL_TOOL, input="c1"), "no tool ran yet: the model is called"


async def test_one_call_that_needs_approval_is_joined_by_resume_turn() -> None:
    host = one_call_turn(policy=NEEDS_APPROVAL)
    await host.start("change it")

    decision = await host.run_model()

    assert decision == GoToMany(
        movements=[
            GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input="c1"),
            GoTo(step=StepName.RESUME_TURN, input=1),
        ]
    )
    assert not host.tool_calls["c1"].resumes_turn


async def test_a_lone_call_whose_tool_asks_for_approval_is_joined_from_then_on() -> None:
    host = one_call_turn([ToolApprovalRequestedError(), "changed"])
    await host.start("change it")
    await host.run_model()

    decision = await host.call_tool("c1")

    assert decision == GoToMany(
        movements=[
            GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input="c1"),
            GoTo(step=StepName.RESUME_TURN, input=1),
        ]
    )
    record = host.tool_calls["c1"]
    assert (record.status, record.resumes_turn) == (S.AWAITING_APPROVAL, False)
    assert isinstance(decision, GoToMany)
    waiting = await host.drive(*decision.movements)
    assert record.interrupt_id is not None
    assert await host.resolve_interrupt(record.interrupt_id, approved=True)
    assert await host.drive(*waiting) == IDLE
    assert host.messages.texts[-1] == "done"


async def test_a_lone_call_that_sent_its_turn_to_its_failure_route_resumes_the_turn_from_there() -> None:
    host = one_call_turn()
    await host.start("look it up")
    await host.run_model()

    decision = await host.record_tool_failure("c1", recovery_error="3 attempts timed out")

    assert decision == model_next(host)
    assert host.tool_calls["c1"].status is S.FAILED
    assert host.results.published == []


async def test_a_lone_write_whose_outcome_is_unknown_resumes_the_turn_from_its_reconcile_step() -> None:
    runner = ProbingRunner(
        [tool_calls_requested(deferred_tool_call("c1", "email", policy=RECONCILABLE))],
        tool_replies={"c1": "sent"},
        probe=[ReconcileResult.applied("sent #7")],
    )
    host = InMemorySessionHost(runner)
    await host.start("send it")
    await host.run_model()

    assert await host.record_tool_outcome_unknown("c1", recovery_error="worker lost") == GoTo(
        step=StepName.RECONCILE_TOOL_CALL, input="c1"
    )
    assert await host.reconcile_tool_call("c1") == model_next(host)
    assert host.tool_calls["c1"].status is S.SUCCEEDED


async def test_a_single_attempt_lone_call_resumes_the_turn_like_any_other() -> None:
    host = one_call_turn("sent", policy=NON_IDEMPOTENT_NO_APPROVAL)
    await host.start("send it")

    assert await host.run_model() == GoTo(step=StepName.CALL_SINGLE_ATTEMPT_TOOL, input="c1")
    assert await host.call_single_attempt_tool("c1") == model_next(host)


async def test_a_sequential_call_with_calls_queued_after_it_is_joined() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(
                deferred_tool_call("s1", "step", policy=READ, sequential=True),
                deferred_tool_call("s2", "step", policy=READ, sequential=True),
            ),
            TurnCompleted(new_messages=[assistant_message("done")]),
        ],
        tool_replies={"step": "ok"},
    )
    host = InMemorySessionHost(runner)
    await host.start("go")

    assert await host.run_model() == GoToMany(
        movements=[GoTo(step=StepName.CALL_TOOL, input="s1"), GoTo(step=StepName.RESUME_TURN, input=1)]
    )
    assert not host.tool_calls["s1"].resumes_turn
