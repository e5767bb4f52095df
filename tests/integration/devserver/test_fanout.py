"""go_to_many: the Steps of one fan-out run at the same time."""

import asyncio

import pytest

from tests.integration.devserver.flows import INSIDE, Flows, gate, reached
from tests.integration.devserver.support import Stack

pytestmark = pytest.mark.integration


async def test_two_steps_of_one_go_to_many_run_at_the_same_time(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.fan, "fan-1", 2)
    await asyncio.wait_for(asyncio.gather(reached("t0").wait(), reached("t1").wait()), 10)
    assert {"t0", "t1"} == INSIDE
    await stack.devserver.wait_until_waiting("fan-1", "Join-1")
    assert stack.devserver.active_executions("fan-1") == {"Tool-1": "execute", "Tool-2": "execute", "Join-1": "waiting"}
    gate("tools").set()
    result = await stack.client.wait_for_flow("fan-1")
    assert result.single_output(list[str]) == ["t0:Tool-1", "t1:Tool-2"]
