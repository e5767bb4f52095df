"""Every Step's Dex options carry the spec's numbers, and per-call options repeat them all."""

from datetime import timedelta

import dex
import pytest

from dex_agents import AGENT_MESSAGES, AGENT_TOOL_CALLS, PENDING_INTERRUPTS, AgentSessionFlow
from dex_agents.application.next import StepName
from dex_agents.domain.history import ModelWindow
from dex_agents.infrastructure.dex.options import PER_CALL_STEPS, whole_seconds
from dex_agents.infrastructure.dex.persistence import AGENT_HISTORY_SUMMARIES, FRAMEWORK_RUN_STATES
from dex_agents.testing import ScriptedRunner

SYNC = dex.StepDurability.SYNC


@pytest.fixture
def flow() -> AgentSessionFlow:
    return AgentSessionFlow(ScriptedRunner(), flow_type="Options")


def options_of(flow: AgentSessionFlow, name: StepName) -> dex.StepOptions:
    step = next(s for s in flow.get_steps() if s.step.get_step_type() == name.value)
    options = step.step.get_step_options()
    assert isinstance(options, dex.StepOptions)
    return options


def test_registry_accepts_the_flow_with_the_dex_agents_codecs(flow: AgentSessionFlow) -> None:
    from dex_agents import codec_registry

    dex.Registry([flow], codec_registry(), allow_async_handlers=True)


def test_step_types_are_the_spec_names(flow: AgentSessionFlow) -> None:
    types = [s.step.get_step_type() for s in flow.get_steps()]
    assert types == [name.value for name in StepName]


@pytest.mark.parametrize("name", list(StepName))
def test_every_step_persists_both_methods_synchronously(flow: AgentSessionFlow, name: StepName) -> None:
    options = options_of(flow, name)
    assert (options.wait_for_durability, options.execute_durability) == (SYNC, SYNC)


def test_run_model_has_the_spec_timeouts_retries_loads_and_failure_route(flow: AgentSessionFlow) -> None:
    options = options_of(flow, StepName.RUN_MODEL)
    assert options.execute_method_timeout == timedelta(minutes=15)
    assert options.heartbeat_timeout == timedelta(minutes=2)
    assert options.execute_retry == dex.RetryPolicy(maximum_attempts=3, total_duration=timedelta(minutes=30))
    assert options.execute_load_attribute_maps == (
        AGENT_MESSAGES,
        FRAMEWORK_RUN_STATES,
        AGENT_HISTORY_SUMMARIES,
        AGENT_TOOL_CALLS,
    )
    assert options.execute_load_attribute_map_instances == ()
    assert options._execute_failure_target is not None
    assert options._execute_failure_target.__name__ == "RecordTurnFailureStep"


@pytest.mark.parametrize("name", [StepName.RUN_MODEL, StepName.COMPACT_HISTORY])
def test_a_window_movement_loads_exactly_the_window_and_repeats_every_option(
    flow: AgentSessionFlow, name: StepName
) -> None:
    table = flow._deps.step_options
    window = ModelWindow(first_sequence=41, last_sequence=43, summary_number=2)
    options = table.for_window(name, window)
    static = options_of(flow, name)
    keys = [(load.attribute_map.name, load.instance) for load in options.execute_load_attribute_map_instances]
    assert keys == [
        ("AGENT_MESSAGES", "000000000041"),
        ("AGENT_MESSAGES", "000000000042"),
        ("AGENT_MESSAGES", "000000000043"),
        ("AGENT_HISTORY_SUMMARIES", "000000000002"),
    ]
    # Both end a cancelled turn (which clears the turn's records and run state); RunModel also hands them to the
    # runner. The run state is a chain of parts: the whole map.
    assert options.execute_load_attribute_maps == (FRAMEWORK_RUN_STATES, AGENT_TOOL_CALLS)
    assert (options.execute_retry, options.execute_method_timeout, options.heartbeat_timeout) == (
        static.execute_retry,
        static.execute_method_timeout,
        static.heartbeat_timeout,
    )
    assert (options.wait_for_durability, options.execute_durability) == (SYNC, SYNC)
    assert options._execute_failure_target is static._execute_failure_target


def test_compact_history_has_the_model_policy_and_its_own_failure_route(flow: AgentSessionFlow) -> None:
    options = options_of(flow, StepName.COMPACT_HISTORY)
    assert options.execute_method_timeout == timedelta(minutes=15)
    assert options.heartbeat_timeout == timedelta(minutes=2)
    assert options.execute_retry == dex.RetryPolicy(maximum_attempts=3, total_duration=timedelta(minutes=30))
    assert options._execute_failure_target is not None
    assert options._execute_failure_target.__name__ == "RecordCompactionFailureStep"
    assert options.execute_load_attribute_maps == (
        AGENT_MESSAGES,
        FRAMEWORK_RUN_STATES,
        AGENT_HISTORY_SUMMARIES,
        AGENT_TOOL_CALLS,
    )


@pytest.mark.parametrize(
    ("name", "attempts", "route"),
    [
        (StepName.CALL_TOOL, 3, "RecordToolFailureStep"),
        (StepName.CALL_SINGLE_ATTEMPT_TOOL, 1, "RecordToolOutcomeUnknownStep"),
    ],
)
def test_per_call_tool_options_load_only_their_record_and_repeat_every_option(
    flow: AgentSessionFlow, name: StepName, attempts: int, route: str
) -> None:
    table = flow._deps.step_options
    options = table.for_call(name, "call-9")
    assert (options.wait_for_durability, options.execute_durability) == (SYNC, SYNC)
    assert options.execute_retry == dex.RetryPolicy(maximum_attempts=attempts)
    assert options.heartbeat_timeout == timedelta(minutes=2)
    assert options.execute_load_attribute_map_instances == (AGENT_TOOL_CALLS.load("call-9"),)
    assert options.execute_load_attribute_maps == ()
    assert options._execute_failure_target is not None
    assert options._execute_failure_target.__name__ == route
    route_options = options._execute_failure_options
    assert route_options is not None
    assert (route_options.wait_for_durability, route_options.execute_durability) == (SYNC, SYNC)
    assert route_options.execute_load_attribute_map_instances == (AGENT_TOOL_CALLS.load("call-9"),)


@pytest.mark.parametrize("name", [StepName.CALL_TOOL, StepName.CALL_SINGLE_ATTEMPT_TOOL])
def test_a_tool_step_whose_call_reads_the_history_also_loads_the_window_its_summary_and_the_run_state(
    flow: AgentSessionFlow, name: StepName
) -> None:
    table = flow._deps.step_options
    options = table.for_call(name, "call-9", ModelWindow(first_sequence=4, last_sequence=6, summary_number=2))
    assert options.execute_load_attribute_map_instances == (
        AGENT_TOOL_CALLS.load("call-9"),
        *(AGENT_MESSAGES.load(f"{sequence:012d}") for sequence in (4, 5, 6)),
        AGENT_HISTORY_SUMMARIES.load(f"{2:012d}"),
    )
    assert options.execute_load_attribute_maps == (FRAMEWORK_RUN_STATES,)
    route_options = options._execute_failure_options
    assert route_options is not None
    assert route_options.execute_load_attribute_map_instances == (AGENT_TOOL_CALLS.load("call-9"),)


def test_approval_options_load_the_record_in_both_methods_and_lock_pending_interrupts(
    flow: AgentSessionFlow,
) -> None:
    options = flow._deps.step_options.for_call(StepName.AWAIT_TOOL_APPROVAL, "c")
    own = (AGENT_TOOL_CALLS.load("c"),)
    assert options.wait_for_load_attribute_map_instances == own
    assert options.execute_load_attribute_map_instances == own
    assert options.execute_lock_attributes == (PENDING_INTERRUPTS.lock(),)


def test_per_call_steps_are_exactly_the_steps_that_take_a_tool_call_id() -> None:
    assert {
        StepName.AWAIT_TOOL_APPROVAL,
        StepName.CALL_TOOL,
        StepName.CALL_SINGLE_ATTEMPT_TOOL,
        StepName.RECORD_TOOL_FAILURE,
        StepName.RECORD_TOOL_OUTCOME_UNKNOWN,
        StepName.RECONCILE_TOOL_CALL,
    } == PER_CALL_STEPS


@pytest.mark.parametrize(
    ("duration", "expected"),
    [(timedelta(seconds=1.2), 2), (timedelta(seconds=3), 3), (timedelta(0), 0), (timedelta(milliseconds=1), 1)],
)
def test_durations_are_rounded_up_to_whole_seconds(duration: timedelta, expected: int) -> None:
    assert whole_seconds(duration) == timedelta(seconds=expected)


def test_event_stream_capacity_comes_from_the_options() -> None:
    from dex_agents import AgentSessionOptions

    flow = AgentSessionFlow(
        ScriptedRunner(), flow_type="Small", options=AgentSessionOptions(event_stream_capacity_bytes=4096)
    )
    assert flow.events_stream.stream_capacity_bytes == 4096
    assert flow.events_stream.name == "flow.agent_events"


def test_flow_type_must_be_a_plain_name() -> None:
    with pytest.raises(ValueError, match="flow_type"):
        AgentSessionFlow(ScriptedRunner(), flow_type="a/b")


@pytest.mark.parametrize("name", list(StepName))
def test_no_step_execute_relies_on_the_unlimited_default_attempts(flow: AgentSessionFlow, name: StepName) -> None:
    retry = options_of(flow, name).execute_retry
    assert retry is not None
    assert retry.maximum_attempts >= 1
