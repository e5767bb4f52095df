"""Decisions: go_to/go_to_many, dead_end, graceful/force complete, force_fail, cancels."""

import pytest
from dex import FlowErrorType, FlowStatus

from dex_agents.testing.devserver import EXECUTE_COMPLETED_EVENT
from tests.integration.devserver.flows import Flows
from tests.integration.devserver.support import Stack, wait_until

pytestmark = pytest.mark.integration


async def test_force_complete(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.decide, "d-force", "force_complete")
    result = await stack.client.wait_for_flow("d-force")
    assert (result.status, result.single_output(str)) == (FlowStatus.COMPLETED, "forced")


async def test_force_fail(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.decide, "d-fail", "force_fail")
    result = await stack.client.wait_for_flow("d-fail")
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.STEP_DECISION_FAILED
    assert result.error_message == "broken on purpose"


async def test_dead_end_keeps_the_flow_open(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.decide, "d-dead", "dead_end")
    await wait_until(lambda: bool(stack.devserver.step_history("d-dead")), what="Decide-1 to complete")
    assert stack.devserver.active_executions("d-dead") == {}
    assert (await stack.client.describe_flow("d-dead")).status is FlowStatus.RUNNING


async def test_graceful_complete_waits_for_other_branches(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.decide, "d-graceful", "graceful")
    await stack.devserver.wait_until_waiting("d-graceful", "Branch-1")
    await wait_until(lambda: "Branch-2" not in stack.devserver.active_executions("d-graceful"))
    assert (await stack.client.describe_flow("d-graceful")).status is FlowStatus.RUNNING
    await stack.client.invoke_rpc(flows.decide.publish, "d-graceful", "go")
    result = await stack.client.wait_for_flow("d-graceful")
    assert result.status is FlowStatus.COMPLETED
    assert sorted((c.step_execution_id, c.decode(str)) for c in result.completions) == [
        ("Branch-1", "slow"),
        ("Branch-2", "fast"),
    ]


async def test_canceling_steps(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.decide, "d-cancel", "cancel")
    result = await stack.client.wait_for_flow("d-cancel")
    assert (result.status, result.single_output(str)) == (FlowStatus.COMPLETED, "cancelled parked")
    executed = [
        e.step_execution_id for e in stack.devserver.step_history("d-cancel") if e.event_type == EXECUTE_COMPLETED_EVENT
    ]
    assert executed == ["Decide-1", "Canceller-1"]
    assert stack.devserver.active_executions("d-cancel") == {}


async def test_force_complete_if_channels_empty_and_execution_numbers(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.decide, "d-empty", "if_empty")
    result = await stack.client.wait_for_flow("d-empty")
    assert result.single_output(str) == "drained 1"
    assert result.completions[0].step_execution_id == "Drain-1"
