"""An agent whose tools come from a real MCP server (a stdio child process).

The server's tool annotations decide the policies (``readOnlyHint`` → read,
``idempotentHint`` → idempotent write, none → the default effect), the toolset
is entered in every model and tool Step like in any run, and each call runs
once on the server in its own tool Step.
"""

import sys
from pathlib import Path

import pytest
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset

from dex_agents import ToolEffect, ToolPolicy
from dex_agents.adapters.pydantic_ai import PydanticAIRunner
from tests.unit.adapters.pydantic_ai.scripted_model import ScriptedModel, call, script
from tests.unit.adapters.pydantic_ai.support import SessionDriver

pytestmark = pytest.mark.integration

SERVER = Path(__file__).with_name("mcp_server.py")


def mcp_agent() -> Agent[None, str]:
    # The server is a Python child: on a loaded machine it takes longer than the default 5 s to answer `initialize`.
    toolset = MCPToolset(StdioTransport(sys.executable, [str(SERVER)]), id="orders", init_timeout=60)
    return Agent(ScriptedModel().model(), toolsets=[toolset.prefixed("orders")])


async def test_mcp_tool_annotations_set_the_policies_and_each_call_runs_once_on_the_server() -> None:
    driver = SessionDriver(PydanticAIRunner(mcp_agent()))
    turn = await driver.turn(
        script(
            [
                call("c1", "orders_lookup", order_id="7"),
                call("c2", "orders_set_status", order_id="7", status="refunded"),
                call("c3", "orders_send", text="hi"),
            ]
        )
    )
    policies = {r.tool_name: r.policy for r in turn.records}
    assert policies == {
        "orders_lookup": ToolPolicy(ToolEffect.READ),
        "orders_set_status": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
        "orders_send": ToolPolicy(ToolEffect.UNCLASSIFIED),
    }
    outputs = {r.tool_name: (r.status.value, r.output) for r in turn.records}
    assert outputs == {
        "orders_lookup": ("succeeded", "order 7 delivered"),
        "orders_set_status": ("succeeded", "order 7 -> refunded"),
        "orders_send": ("succeeded", "sent hi"),
    }
    assert turn.completed.new_messages[-1].text is not None
