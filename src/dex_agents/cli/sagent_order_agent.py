"""The demo's order agent on sagent: a real sagent ``Agent`` on a scripted model, run through the sagent adapter.

``dex-agents demo --framework sagent`` runs it (Python 3.13+ with
``dex-agents[sagent]``). The same agent as `dex_agents.cli.order_agent`, the
same plan (`dex_agents.cli.order_plan`) and the same shop, with sagent's
pieces: the model is a sagent provider model (`ScriptedOrderModel`, built on
``sagent.testing.MockModelCaps``: no API key) that streams its text word by
word, and the tools are sagent ``@tool`` functions reading the call's
idempotency key with `deferred_tool_idempotency_key`.

Policies: as the Pydantic AI version. The sagent runner has no reconcile
probes, so an ``email_customer`` call whose Worker died mid-call stays
``outcome_unknown``.
"""

import asyncio
from collections.abc import Callable, Sequence
from typing import cast

from sagent.agent.agent import Agent
from sagent.testing import MockModelCaps
from sagent.tools import tool
from sagent.types.cost import TokenCount
from sagent.types.model import ModelRequest, ModelResponse
from sagent.types.runtime import (
    AssistantMessage,
    ModelResponsePartial,
    RuntimeEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)
from sagent.types.tools import Tool

from dex_agents.adapters.sagent import deferred_tool_idempotency_key, sagent_session_flow
from dex_agents.adapters.sagent.runner import NOT_APPROVED
from dex_agents.cli import shop
from dex_agents.cli.order_agent import TOOL_POLICIES
from dex_agents.cli.order_plan import Reply, ToolSeen, chunk_delay, plan
from dex_agents.infrastructure.dex.flow import AgentSessionFlow

FLOW_TYPE = "SagentOrderAgent"
"""The sagent order agent's Flow type."""


def plan_reply(messages: Sequence[object]) -> Reply:
    """Decide the next response from sagent history entries (`dex_agents.cli.order_plan`)."""
    prompt = ""
    results: dict[str, ToolSeen] = {}
    names: dict[str, str] = {}
    for message in messages:
        if isinstance(message, UserMessage):
            prompt, results = message.text.split("\n\n")[-1], {}
        elif isinstance(message, AssistantMessage):
            names.update((call.id, call.name) for call in message.tool_calls)
        elif isinstance(message, ToolResult) and message.call_id in names:
            denied = message.is_error and message.content.startswith(NOT_APPROVED)
            text = message.content.removeprefix(f"{NOT_APPROVED}: ") if denied else message.content
            results[names[message.call_id]] = ToolSeen(ok=not message.is_error, denied=denied, text=text)
    return plan(prompt, results)


class ScriptedOrderModel(MockModelCaps):
    """A sagent provider model that follows the order plan and streams its text word by word."""

    model_id = "scripted-order-model"

    async def buffer(self, request: ModelRequest) -> ModelResponse:
        """Answer without streaming."""
        return await self.stream(request)

    async def stream(
        self, request: ModelRequest, publish: Callable[[RuntimeEvent], None] | None = None
    ) -> ModelResponse:
        """Stream the reply's text, then return it with its tool call."""
        reply = plan_reply(request.messages)
        words = reply.text.split(" ")
        delay = chunk_delay()
        for index, word in enumerate(words):
            if publish is not None:
                publish(ModelResponsePartial(text=word if index == len(words) - 1 else word + " "))
            await asyncio.sleep(delay)
        calls = () if reply.tool is None else (ToolCall(id=reply.call_id, name=reply.tool, args=dict(reply.args)),)
        tokens = TokenCount(request=self.approx_request_tokens(request), response=len(reply.text) // 4)
        return ModelResponse(
            message=AssistantMessage(text=reply.text, tool_calls=calls),
            tokens=tokens,
            stop_reason="model_tool_use" if calls else "model_finished",
        )


@tool
def find_order(order_id: str) -> str:
    """Return the status of an order."""
    return shop.find_order(order_id)


@tool
async def refund_order(order_id: str) -> str:
    """Refund an order."""
    return await shop.refund_order(order_id, key=deferred_tool_idempotency_key())


@tool
def email_customer(order_id: str, text: str) -> str:
    """Email the customer who placed an order."""
    return shop.email_customer(order_id, text, key=deferred_tool_idempotency_key())


def build_order_agent() -> Agent:
    """Return a fresh order agent on the scripted model (the adapter builds one per Step)."""
    tools = [cast(Tool, function) for function in (find_order, refund_order, email_customer)]
    return Agent(model=ScriptedOrderModel(), system="You help customers with their orders.", tools=tools)


def build_order_flow() -> AgentSessionFlow:
    """Return the sagent order agent's session Flow."""
    return sagent_session_flow(build_order_agent, flow_type=FLOW_TYPE, tool_policies=TOOL_POLICIES)
