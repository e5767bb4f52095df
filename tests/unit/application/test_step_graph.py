"""The Step graph: one use case per Step name, the policies as the spec numbers them."""

import importlib
import inspect
import pkgutil
from datetime import timedelta

import pytest

import dex_agents.application.steps
from dex_agents.application.next import End, GoTo, GoToMany, StepName, WaitAgain
from dex_agents.application.policies import HEARTBEAT_INTERVAL, STEP_POLICIES, StepPolicy


def _step_classes() -> dict[str, type]:
    classes: dict[str, type] = {}
    package = dex_agents.application.steps
    for info in pkgutil.iter_modules(package.__path__, prefix=f"{package.__name__}."):
        module = importlib.import_module(info.name)
        classes.update(
            (name, cls)
            for name, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and not name.startswith("_") and hasattr(cls, "execute")
        )
    return classes


def test_every_step_name_has_a_use_case_class_of_that_exact_name_and_nothing_else_does() -> None:
    assert set(_step_classes()) == {step.value for step in StepName}


def test_the_step_names_are_the_specified_ones() -> None:
    assert [step.value for step in StepName] == [
        "StartAgentSession",
        "AwaitUserMessage",
        "RunModel",
        "AwaitToolApproval",
        "CallTool",
        "CallSingleAttemptTool",
        "RecordToolFailure",
        "RecordToolOutcomeUnknown",
        "ReconcileToolCall",
        "ResumeTurn",
        "RecordTurnFailure",
        "RecordResumeFailure",
        "RecordStartFailure",
        "CompactHistory",
        "RecordCompactionFailure",
    ]


@pytest.mark.parametrize("step", list(StepName))
def test_every_step_use_case_executes_asynchronously(step: StepName) -> None:
    assert inspect.iscoroutinefunction(inspect.getattr_static(_step_classes()[step.value], "execute"))


SPEC_POLICIES = {
    StepName.RUN_MODEL: (
        3,
        timedelta(minutes=30),
        timedelta(minutes=15),
        timedelta(minutes=2),
        StepName.RECORD_TURN_FAILURE,
    ),
    StepName.CALL_TOOL: (3, None, None, None, StepName.RECORD_TOOL_FAILURE),
    StepName.CALL_SINGLE_ATTEMPT_TOOL: (1, None, None, None, StepName.RECORD_TOOL_OUTCOME_UNKNOWN),
    StepName.RECONCILE_TOOL_CALL: (3, None, None, timedelta(minutes=2), StepName.RECORD_TOOL_OUTCOME_UNKNOWN),
    StepName.COMPACT_HISTORY: (
        3,
        timedelta(minutes=30),
        timedelta(minutes=15),
        timedelta(minutes=2),
        StepName.RECORD_COMPACTION_FAILURE,
    ),
}
"""(attempts, total retry duration, method timeout, heartbeat timeout, failure route) from the Step table.
``None`` means the spec does not give a number for that Step. ``ReconcileToolCall`` (issue 13):
its probe is a read, retried as ``CallTool`` retries one, and its failure leaves ``outcome_unknown``."""


def test_every_step_has_a_policy() -> None:
    assert set(STEP_POLICIES) == set(StepName)


@pytest.mark.parametrize("step", list(SPEC_POLICIES))
def test_the_policies_of_model_and_tool_steps_match_the_spec(step: StepName) -> None:
    attempts, total, timeout, heartbeat, route = SPEC_POLICIES[step]
    policy = STEP_POLICIES[step]
    assert policy.maximum_attempts == attempts
    assert policy.failure_route is route
    if total is not None:
        assert policy.total_retry_duration == total
    if timeout is not None:
        assert policy.method_timeout == timeout
    if heartbeat is not None:
        assert policy.heartbeat_timeout == heartbeat


HARDENED_POLICIES = {
    StepName.START_AGENT_SESSION: (3, StepName.RECORD_START_FAILURE),
    StepName.AWAIT_USER_MESSAGE: (3, StepName.RECORD_TURN_FAILURE),
    StepName.RESUME_TURN: (3, StepName.RECORD_RESUME_FAILURE),
    StepName.AWAIT_TOOL_APPROVAL: (5, None),
    StepName.RECORD_TOOL_FAILURE: (5, None),
    StepName.RECORD_TOOL_OUTCOME_UNKNOWN: (5, None),
    StepName.RECORD_TURN_FAILURE: (5, None),
    StepName.RECORD_RESUME_FAILURE: (5, None),
    StepName.RECORD_START_FAILURE: (5, None),
    StepName.RECORD_COMPACTION_FAILURE: (5, None),
}
"""(attempts, failure route) of the Steps the spec leaves on the engine's defaults."""


def test_every_step_is_in_exactly_one_policy_table() -> None:
    assert set(SPEC_POLICIES) | set(HARDENED_POLICIES) == set(StepName)
    assert not set(SPEC_POLICIES) & set(HARDENED_POLICIES)


@pytest.mark.parametrize("step", list(HARDENED_POLICIES))
def test_no_other_step_is_left_on_the_engines_four_hours_of_retries(step: StepName) -> None:
    attempts, route = HARDENED_POLICIES[step]
    assert STEP_POLICIES[step] == StepPolicy(maximum_attempts=attempts, failure_route=route)


def test_every_step_of_a_turn_has_a_failure_route_that_keeps_the_session() -> None:
    turn_steps = (StepName.START_AGENT_SESSION, StepName.AWAIT_USER_MESSAGE, StepName.RUN_MODEL, StepName.RESUME_TURN)
    routes = {STEP_POLICIES[step].failure_route for step in turn_steps}
    assert routes == {StepName.RECORD_START_FAILURE, StepName.RECORD_TURN_FAILURE, StepName.RECORD_RESUME_FAILURE}


def test_tool_steps_beat_well_within_their_heartbeat_timeout() -> None:
    assert timedelta(seconds=20) == HEARTBEAT_INTERVAL
    for step in (StepName.RUN_MODEL, StepName.CALL_TOOL, StepName.CALL_SINGLE_ATTEMPT_TOOL):
        heartbeat_timeout = STEP_POLICIES[step].heartbeat_timeout
        assert heartbeat_timeout is not None
        assert heartbeat_timeout > 2 * HEARTBEAT_INTERVAL


def test_failure_routes_lead_to_steps_that_have_no_failure_route_themselves() -> None:
    for policy in STEP_POLICIES.values():
        if policy.failure_route is not None:
            assert STEP_POLICIES[policy.failure_route].failure_route is None


def test_what_next_values_are_plain_engine_neutral_values() -> None:
    many = GoToMany(movements=iter([GoTo(step=StepName.CALL_TOOL, input="c1")]))
    assert many.movements == (GoTo(step=StepName.CALL_TOOL, input="c1"),)
    assert GoTo(step=StepName.RUN_MODEL).input is None
    assert WaitAgain().input is None
    assert End() == End()
    with pytest.raises(ValueError, match="at least one movement"):
        GoToMany(movements=[])
