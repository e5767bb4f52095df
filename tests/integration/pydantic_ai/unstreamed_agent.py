"""An agent on a `FunctionModel` without ``stream_function`` (it cannot stream), for `test_unstreamed_model`.

The model looks order 7 up with a read tool, then answers with what the tool
returned. Its Worker is `tests.integration.pydantic_ai.unstreamed_worker`.
"""

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dex_agents import AgentSessionFlow, ToolEffect, ToolPolicy
from dex_agents.adapters.pydantic_ai import pydantic_ai_session_flow

FLOW_TYPE = "UnstreamedAgentSession"


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[TextPart("Looking it up."), ToolCallPart("lookup", {"order_id": "7"}, "l1")])
    return ModelResponse(parts=[TextPart(f"Order 7 is {returns[-1].content}.")])


AGENT: Agent[None, str] = Agent(FunctionModel(_respond))


@AGENT.tool_plain
def lookup(order_id: str) -> str:
    """Return an order's status."""
    return "delivered"


def build_flows() -> list[AgentSessionFlow]:
    return [pydantic_ai_session_flow(AGENT, flow_type=FLOW_TYPE, tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})]
