"""A Pydantic AI session survives what a client or a tool can throw at it (the adapter's side of the hardening)."""

from typing import Any, cast

import pytest

from dex_agents import AgentSessionFlow, AgentUserMessage, InputProblem, InvalidInputError
from dex_agents.testing import AgentTestStack
from tests.integration.pydantic_ai.order_agent import invocations
from tests.integration.runner_conformance import answer, idle
from tests.integration.stacks import started_session
from tests.unit.adapters.pydantic_ai.scripted_model import call, script

pytestmark = pytest.mark.integration

MIB = 1024 * 1024


async def test_a_lone_surrogate_is_refused_and_a_10_mb_tool_output_reaches_the_model_cut_with_a_notice(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(
        stack, flow, script([call("b1", "big_output", size=10 * MIB)], "@summary", name="big")
    )

    summary = answer(await idle(stack, flow, "s"))

    assert summary.startswith("big_output[success]=bbbb")
    assert "[dex-agents: the tool's output was 10,485,760 bytes; only its first " in summary
    assert len(summary.encode()) < flow.options.max_tool_output_bytes + 1024
    assert invocations().count("tool", "big_output") == 1

    with pytest.raises(InvalidInputError) as refused:
        await sessions.send_user_message("s", "lone \ud800 surrogate")
    assert refused.value.problem is InputProblem.LONE_SURROGATE
    raw = await stack.client.invoke_rpc(cast(Any, flow.send_user_message), "s", AgentUserMessage(text="\ud800"))
    assert raw is False

    assert await sessions.send_user_message("s", script("still here", name="next"))
    assert answer(await idle(stack, flow, "s", turns=2)) == "still here"
