"""Each Step's static Dex options are built once and shared, and stay exactly what a fresh build gives."""

import dex
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.application.next import StepName
from dex_agents.infrastructure.dex.options import PER_CALL_STEPS, StepOptionsTable
from dex_agents.testing import ScriptedRunner


@pytest.fixture
def flow() -> AgentSessionFlow:
    return AgentSessionFlow(ScriptedRunner(), flow_type="Cached")


def steps_by_name(flow: AgentSessionFlow) -> dict[str, dex.Step[object]]:
    return {s.step.get_step_type(): s.step for s in flow.get_steps()}


@pytest.mark.parametrize("name", list(StepName))
def test_the_sdk_gets_the_same_options_object_every_time(flow: AgentSessionFlow, name: StepName) -> None:
    step = steps_by_name(flow)[name.value]
    assert step.get_step_options() is step.get_step_options()


@pytest.mark.parametrize("name", list(StepName))
def test_shared_options_equal_a_fresh_build(flow: AgentSessionFlow, name: StepName) -> None:
    shared = flow._deps.step_options.static(name)
    fresh = StepOptionsTable(dict(flow._deps.classes))._build_static(name)
    assert shared == fresh
    assert shared._execute_failure_target is fresh._execute_failure_target
    assert shared._execute_failure_options == fresh._execute_failure_options


@pytest.mark.parametrize("name", sorted(PER_CALL_STEPS))
def test_per_call_options_are_still_built_for_each_call(flow: AgentSessionFlow, name: StepName) -> None:
    table = flow._deps.step_options
    first, second = table.for_call(name, "c1"), table.for_call(name, "c2")
    assert first.execute_load_attribute_map_instances != second.execute_load_attribute_map_instances
    assert table.for_call(name, "c1") == first
