import pytest

from tests.integration.devserver.flows import Flows, Seen
from tests.integration.devserver.support import Stack

pytestmark = pytest.mark.integration


async def test_basic_flow_completes(stack: Stack, flows: Flows) -> None:
    run_id = await stack.client.start_flow(flows.basic, "basic-1", "hello")
    result = await stack.client.wait_for_flow("basic-1")
    seen = result.single_output(Seen)
    assert seen.state == "hello"
    assert seen.item_a == "A"
    assert not seen.item_b_loaded
    assert seen.inbox_size == 2
    assert seen.pending == ["m1", "m2"]
    assert seen.step_execution_id == "Inspect-1"
    assert seen.from_step_execution_id == "Begin-1"
    info = await stack.client.describe_flow("basic-1")
    assert info.run_id == run_id
