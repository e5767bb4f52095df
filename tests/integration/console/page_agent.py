"""A test agent whose tool returns hostile HTML: the console must show it as text, never run it.

The model fetches the page (a read), quotes it, then asks to publish it (a
write that needs approval), so the turn waits with the fetched output in its
tool-call records for the page to show.
"""

import json
from collections.abc import AsyncIterator

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from dex_agents.adapters.pydantic_ai import pydantic_ai_session_flow
from dex_agents.domain.tools import ToolEffect, ToolPolicy
from dex_agents.infrastructure.dex.flow import AgentSessionFlow

HOSTILE = '<script>window.__pwned = "script"</script><img src="x" onerror="window.__pwned = \'img\'">'
"""What ``fetch_page`` returns."""


def _tool_results(messages: list[ModelMessage]) -> dict[str, str]:
    results: dict[str, str] = {}
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    results[part.tool_name] = part.model_response_str()
    return results


async def _stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    results = _tool_results(messages)
    if "fetch_page" not in results:
        yield "Fetching the page."
        yield {0: DeltaToolCall(name="fetch_page", json_args=json.dumps({}), tool_call_id="call-1")}
    elif "publish" not in results:
        yield "The page says: "
        yield results["fetch_page"]
        yield {
            0: DeltaToolCall(
                name="publish", json_args=json.dumps({"text": results["fetch_page"]}), tool_call_id="call-2"
            )
        }
    else:
        yield "Published."


def build_page_flow() -> AgentSessionFlow:
    """The agent: a read tool returning `HOSTILE`, a reply quoting it, and a write (with approval) of it."""
    agent: Agent[None, str] = Agent(FunctionModel(stream_function=_stream, model_name="scripted-page-model"))

    @agent.tool_plain
    def fetch_page() -> str:
        """Fetch the page."""
        return HOSTILE

    @agent.tool_plain
    def publish(text: str) -> str:
        """Publish a text."""
        return f"published {len(text)} characters"

    del fetch_page, publish
    policies = {
        "fetch_page": ToolPolicy(ToolEffect.READ),
        "publish": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
    }
    return pydantic_ai_session_flow(agent, flow_type="PageAgent", tool_policies=policies)


SUPERSEDED = "A draft the retry replaces."
"""What the first attempt of the retried model call streams before it fails."""

FINAL = "The answer of the second attempt."
"""What the second attempt streams."""


def build_retried_flow() -> AgentSessionFlow:
    """An agent whose first model call streams `SUPERSEDED` and fails; its retry streams `FINAL` and asks to publish."""
    calls = {"model": 0}

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        if "publish" in _tool_results(messages):
            yield "Published."
            return
        calls["model"] += 1
        if calls["model"] == 1:
            yield SUPERSEDED
            raise RuntimeError("the model's connection dropped")
        yield FINAL
        yield {0: DeltaToolCall(name="publish", json_args=json.dumps({"text": FINAL}), tool_call_id="call-1")}

    agent: Agent[None, str] = Agent(FunctionModel(stream_function=stream, model_name="scripted-retry-model"))

    @agent.tool_plain
    def publish(text: str) -> str:
        """Publish a text."""
        return f"published {len(text)} characters"

    del publish
    policies = {"publish": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)}
    return pydantic_ai_session_flow(agent, flow_type="RetriedAgent", tool_policies=policies)
