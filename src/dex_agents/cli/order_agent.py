"""The demo's order agent: a real Pydantic AI agent on a scripted model, run through the Pydantic AI adapter.

It is the spec's order agent (``find_order``, ``refund_order`` with approval,
``email_customer``) with three differences that make it a demo:

- The model is a `pydantic_ai.models.function.FunctionModel` that streams its
  text word by word and follows a fixed plan, so no API key is needed: look
  the order up, refund it, email the customer, then answer. A rejected or
  failed refund ends the plan early.
- The shop (`dex_agents.cli.shop`) lives in files, because the Worker that
  runs the tools is another process than the command that shows them: a
  refund ledger keyed by the call's idempotency key, an outbox, and an
  `InvocationLog` of every tool run.
- With ``$DEX_AGENTS_DEMO_CRASH`` set, ``refund_order`` parks at a `FileGate`
  after the refund is in the ledger and before it returns, the first time
  only, so the demo can kill the Worker in the middle of the refund Step.

Policies: ``find_order`` is a read; ``refund_order`` an idempotent write that
needs approval (a retry reuses the ledger entry of its key);
``email_customer`` a non-idempotent write, run once, without approval, with
a reconcile probe (`email_sent`, declared in its metadata): when its outcome is
unknown (its Worker died mid-call), the probe looks in the outbox for the
call's idempotency key and the call is recorded ``succeeded`` with the email it
found, or ``not_applied`` when there is none.

``dex-agents chat dex_agents.cli.order_agent:build_order_flow`` talks to it.
"""

import asyncio
import json
from collections.abc import AsyncIterator

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from dex_agents.adapters.pydantic_ai import (
    ReconcileCall,
    deferred_tool_idempotency_key,
    pydantic_ai_session_flow,
    reconcile_probe,
)
from dex_agents.application.runner import ReconcileResult
from dex_agents.cli import shop
from dex_agents.cli.order_plan import Reply, ToolSeen, chunk_delay, plan
from dex_agents.cli.shop import find_email, invocations
from dex_agents.domain.tools import ToolEffect, ToolPolicy
from dex_agents.infrastructure.dex.flow import AgentSessionFlow

FLOW_TYPE = "OrderAgent"
"""The order agent's Flow type."""

TOOL_POLICIES = {
    "find_order": ToolPolicy(ToolEffect.READ),
    "refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
    "email_customer": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
}
"""How the session treats each tool."""


# -- the scripted model --------------------------------------------------------------------------------------------


def _seen(part: ToolReturnPart) -> ToolSeen:
    return ToolSeen(ok=part.outcome == "success", denied=part.outcome == "denied", text=part.model_response_str())


def plan_reply(messages: list[ModelMessage]) -> Reply:
    """Decide the scripted model's next response from the conversation so far (`dex_agents.cli.order_plan`)."""
    prompt = ""
    results: dict[str, ToolSeen] = {}
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                prompt, results = part.content, {}
            elif isinstance(part, ToolReturnPart):
                results[part.tool_name] = _seen(part)
    return plan(prompt, results)


async def scripted_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    """The scripted model: stream the reply's text word by word, then its tool call."""
    reply = plan_reply(messages)
    delay = chunk_delay()
    words = reply.text.split(" ")
    for index, word in enumerate(words):
        yield word if index == len(words) - 1 else word + " "
        await asyncio.sleep(delay)
    if reply.tool is not None:
        yield {0: DeltaToolCall(name=reply.tool, json_args=json.dumps(reply.args), tool_call_id=reply.call_id)}


# -- the agent ------------------------------------------------------------------------------------------------------


def build_order_agent() -> Agent[None, str]:
    """Return the order agent on the scripted model."""
    agent: Agent[None, str] = Agent(
        FunctionModel(stream_function=scripted_stream, model_name="scripted-order-model"),
        instructions="You help customers with their orders.",
    )

    @agent.tool_plain
    def find_order(order_id: str) -> str:
        """Return the status of an order."""
        return shop.find_order(order_id)

    @agent.tool
    async def refund_order(ctx: RunContext[None], order_id: str) -> str:
        """Refund an order."""
        return await shop.refund_order(order_id, key=deferred_tool_idempotency_key(ctx))

    @agent.tool(metadata=reconcile_probe(email_sent))
    def email_customer(ctx: RunContext[None], order_id: str, text: str) -> str:
        """Email the customer who placed an order."""
        return shop.email_customer(order_id, text, key=deferred_tool_idempotency_key(ctx))

    del find_order, refund_order, email_customer
    return agent


async def email_sent(call: ReconcileCall) -> ReconcileResult:
    """The reconcile probe of ``email_customer``: is there an email under the call's idempotency key?"""
    invocations().record("probe", "email_customer", key=call.idempotency_key)
    mail = find_email(call.idempotency_key)
    return ReconcileResult.not_applied() if mail is None else ReconcileResult.applied(f"emailed {mail['to']}")


def build_order_flow() -> AgentSessionFlow:
    """Return the order agent's session Flow (the demo's ``MODULE:FLOW_FACTORY``)."""
    return pydantic_ai_session_flow(build_order_agent(), flow_type=FLOW_TYPE, tool_policies=TOOL_POLICIES)
