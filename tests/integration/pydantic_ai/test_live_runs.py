"""Live runs on a real Worker: one agent run serves a turn's model Steps, and a new Worker resumes from the run state.

The plain agent's turns qualify for live runs (``dex_agents.adapters.pydantic_ai._live_runs``). The messages
of a turn show how many agent runs served its model Steps: each run stamps its ``run_id`` on its responses.
"""

import json

import pytest

from dex_agents import AgentSessionFlow, AgentSnapshot, MessageRole
from dex_agents.testing import AgentTestStack
from tests.integration.pydantic_ai.order_agent import PLAIN_FLOW_TYPE, gate, invocations
from tests.integration.runner_conformance import executed, idle
from tests.integration.stacks import session_on_a_worker
from tests.unit.adapters.pydantic_ai.scripted_model import call, script

pytestmark = pytest.mark.integration


@pytest.fixture
def plain(flows: list[AgentSessionFlow]) -> AgentSessionFlow:
    return next(flow for flow in flows if flow.get_flow_type() == PLAIN_FLOW_TYPE)


def response_run_ids(snapshot: AgentSnapshot) -> list[str]:
    """The ``run_id`` of each model response of the session, in order."""
    return [
        item["run_id"]
        for message in snapshot.messages
        if message.role is MessageRole.ASSISTANT
        for item in json.loads(message.framework_item)
        if item.get("kind") == "response"
    ]


TURN = script(
    [call("a1", "lookup", order_id="1"), call("a2", "lookup", order_id="2")],
    [call("b1", "lookup", order_id="3", hold="b1")],
    [call("c1", "lookup", order_id="4")],
    "Orders 1 to 4 are delivered.",
    name="live",
)


async def test_a_turn_of_three_tool_batches_is_served_by_one_agent_run_with_every_step_recorded(
    stack: AgentTestStack, plain: AgentSessionFlow
) -> None:
    await stack.start_worker()
    await stack.sessions(plain).start_session("s", TURN)
    gate("b1").release()
    snapshot = await idle(stack, plain, "s")

    assert snapshot.messages[-1].text == "Orders 1 to 4 are delivered."
    assert len(set(response_run_ids(snapshot))) == 1
    assert [invocations().count("model", "live", step=n) for n in range(4)] == [1, 1, 1, 1]
    assert invocations().count("tool", "lookup") == 4
    assert (await executed(stack, "s")).count("RunModel") == 4
    assert snapshot.usage.model_calls == 4


async def test_a_worker_killed_between_model_steps_leaves_the_turn_to_a_new_run_from_the_run_state(
    stack: AgentTestStack, plain: AgentSessionFlow
) -> None:
    worker, _ = await session_on_a_worker(stack, plain, TURN)
    await gate("b1").wait_until_reached()
    worker.kill()
    await stack.start_worker()
    gate("b1").release()
    snapshot = await idle(stack, plain, "s")

    assert snapshot.messages[-1].text == "Orders 1 to 4 are delivered."
    run_ids = response_run_ids(snapshot)
    # The first Worker's run served the first two model calls; the second Worker's run the last two.
    assert run_ids[0] == run_ids[1]
    assert run_ids[2] == run_ids[3]
    assert run_ids[1] != run_ids[2]
    assert [invocations().count("model", "live", step=n) for n in range(4)] == [1, 1, 1, 1]
    assert snapshot.usage.model_calls == 4
