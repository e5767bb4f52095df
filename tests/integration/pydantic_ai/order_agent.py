"""A real Pydantic AI agent for the adapter's integration tests, shared by the tests and their Worker children.

The model is `ScriptedModel`: it follows the JSON script in the turn's user
prompt (``scripted_model.script``). Every real model call and tool call is
counted in the `InvocationLog` under ``$PYDANTIC_AI_TEST_STATE``: model calls
as ``("model", <script name>, step=n)``, tool calls as ``("tool", <tool name>,
key=<idempotency key>)``. A script step with ``gate`` parks the model, and a
tool called with ``gate`` parks the tool, at a `FileGate` until the test
releases it.

Tools, by what they do (the ``ROW_TOOLS`` are the rows of the spec's "What the
tool does" table):

- ``find_order`` (read), ``refund_order`` (``requires_approval=True``, idempotent
  write, reads its idempotency key), ``email_customer`` (non-idempotent write):
  the spec's order example;
- ``read_tool``, ``idempotent_write``, ``write`` (non-idempotent, no approval),
  ``unclassified_write`` (default effect, needs approval): each parks at its
  ``gate`` argument, for kill tests;
- ``retry_me``, ``fail_me``, ``external_lookup``, ``ask_approval``, ``defer_me``,
  ``sub_agent``, ``crash``: one per table row, all read policies;
- ``orders_lookup``, ``orders_set_status``, ``orders_send``: a prefixed toolset
  whose metadata carries MCP annotations (readOnlyHint, idempotentHint, none);
- ``hidden_refund``: found only through tool search (``search_tools``);
- ``whoami``: returns the dependencies ``deps_factory`` built from the session ID.
"""

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic_ai import (
    Agent,
    ApprovalRequired,
    CallDeferred,
    ModelRetry,
    RunContext,
    Tool,
    ToolDefinition,
    ToolFailed,
)
from pydantic_ai.agent import WrapperAgent
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import ExternalToolset, FunctionToolset

from dex_agents import AgentSessionFlow, ToolEffect, ToolPolicy
from dex_agents.adapters.pydantic_ai import deferred_tool_idempotency_key, pydantic_ai_session_flow
from tests.integration.case_state import case_state
from tests.integration.scenario_tools import SCENARIO_TOOL_POLICIES
from tests.unit.adapters.pydantic_ai.scripted_model import ModelCall, ScriptedModel

STATE_ENV = "PYDANTIC_AI_TEST_STATE"
DEADLINE_ENV = "PYDANTIC_AI_TEST_INTERRUPT_DEADLINE_SECONDS"
FLOW_TYPE = "PydanticOrderAgent"
WRAPPED_FLOW_TYPE = "PydanticWrappedOrderAgent"
PLAIN_FLOW_TYPE = "PydanticPlainAgent"
"""A plain agent (no deps, no toolsets, static prompts): its turns run as live runs (one agent run per turn)."""

TOOL_POLICIES = {
    **SCENARIO_TOOL_POLICIES,
    "big_output": ToolPolicy(ToolEffect.READ),
    "whoami": ToolPolicy(ToolEffect.READ),
    "retry_me": ToolPolicy(ToolEffect.READ),
    "fail_me": ToolPolicy(ToolEffect.READ),
    "external_lookup": ToolPolicy(ToolEffect.READ),
    "ask_approval": ToolPolicy(ToolEffect.READ),
    "defer_me": ToolPolicy(ToolEffect.READ),
    "sub_agent": ToolPolicy(ToolEffect.READ),
    "crash": ToolPolicy(ToolEffect.READ),
    "hidden_refund": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=False),
}


state_dir, invocations, gate = case_state(STATE_ENV)


@dataclass(frozen=True)
class OrderDeps:
    session_id: str


def build_deps(session_id: str) -> OrderDeps:
    invocations().record("deps", session_id)
    return OrderDeps(session_id=session_id)


async def before_response(model_call: ModelCall) -> None:
    invocations().record("model", model_call.script, step=model_call.step)
    if model_call.gate is not None:
        await gate(model_call.gate).wait_for_release()


async def ran(ctx: RunContext[OrderDeps], name: str, gate_name: str | None = None) -> None:
    invocations().record("tool", name, key=deferred_tool_idempotency_key(ctx), session=ctx.deps.session_id)
    if gate_name:
        await gate(gate_name).wait_for_release()


def _misbehaving_model(messages: Any, info: Any) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("no_such_tool", {}, tool_call_id="x")])


def build_agent() -> Agent[OrderDeps, str]:
    annotated: FunctionToolset[OrderDeps] = FunctionToolset(
        [
            Tool(lambda order_id: f"order {order_id} delivered", name="lookup", metadata=_hints(read_only=True)),
            Tool(
                lambda order_id, status: f"order {order_id} -> {status}",
                name="set_status",
                metadata=_hints(read_only=False, idempotent=True),
            ),
            Tool(lambda text: "sent", name="send", metadata={"annotations": None}),
        ]
    )
    external = ExternalToolset([ToolDefinition(name="external_lookup", parameters_json_schema={"type": "object"})])

    async def hidden_refund(ctx: RunContext[OrderDeps], order_id: str) -> str:
        """Refund an order that tool search finds."""
        await ran(ctx, "hidden_refund")
        return f"hidden refund of {order_id}"

    agent = Agent(
        ScriptedModel(before_response=before_response).model(),
        deps_type=OrderDeps,
        system_prompt="You help customers with their orders.",
        toolsets=[annotated.prefixed("orders"), external],
        tools=[Tool(hidden_refund, defer_loading=True)],
    )

    @agent.tool
    async def find_order(ctx: RunContext[OrderDeps], order_id: str) -> str:
        """Return the status of an order."""
        await ran(ctx, "find_order")
        return f"order {order_id} delivered"

    @agent.tool(requires_approval=True)
    async def refund_order(ctx: RunContext[OrderDeps], order_id: str) -> str:
        """Refund an order."""
        await ran(ctx, "refund_order")
        return f"refund of {order_id} with key {deferred_tool_idempotency_key(ctx)}"

    @agent.tool
    async def email_customer(ctx: RunContext[OrderDeps], order_id: str, text: str) -> str:
        """Email the customer who placed an order."""
        await ran(ctx, "email_customer")
        return f"emailed the customer of order {order_id}"

    @agent.tool
    async def read_tool(ctx: RunContext[OrderDeps], gate: str = "") -> str:
        await ran(ctx, "read_tool", gate)
        return "read done"

    @agent.tool
    async def big_output(ctx: RunContext[OrderDeps], size: int) -> str:
        await ran(ctx, "big_output")
        return "b" * size

    @agent.tool
    async def idempotent_write(ctx: RunContext[OrderDeps], gate: str = "") -> str:
        await ran(ctx, "idempotent_write", gate)
        return f"written with key {deferred_tool_idempotency_key(ctx)}"

    @agent.tool
    async def write(ctx: RunContext[OrderDeps], gate: str = "") -> str:
        await ran(ctx, "write", gate)
        return "written"

    @agent.tool
    async def unclassified_write(ctx: RunContext[OrderDeps], gate: str = "") -> str:
        await ran(ctx, "unclassified_write", gate)
        return "written"

    @agent.tool
    async def whoami(ctx: RunContext[OrderDeps]) -> str:
        await ran(ctx, "whoami")
        return f"session {ctx.deps.session_id}, conversation {ctx.conversation_id}"

    @agent.tool
    async def retry_me(ctx: RunContext[OrderDeps]) -> str:
        await ran(ctx, "retry_me")
        raise ModelRetry("give me an order ID")

    @agent.tool
    async def fail_me(ctx: RunContext[OrderDeps]) -> str:
        await ran(ctx, "fail_me")
        raise ToolFailed("the order is locked")

    @agent.tool
    async def ask_approval(ctx: RunContext[OrderDeps]) -> str:
        await ran(ctx, "ask_approval")
        raise ApprovalRequired()

    @agent.tool
    async def defer_me(ctx: RunContext[OrderDeps]) -> str:
        await ran(ctx, "defer_me")
        raise CallDeferred()

    @agent.tool
    async def sub_agent(ctx: RunContext[OrderDeps]) -> str:
        await ran(ctx, "sub_agent")
        inner: Agent[None, str] = Agent(FunctionModel(_misbehaving_model), retries=0)
        return (await inner.run("go")).output

    @agent.tool
    async def crash(ctx: RunContext[OrderDeps]) -> str:
        await ran(ctx, "crash")
        raise ValueError("disk full")

    return agent


def _hints(*, read_only: bool, idempotent: bool | None = None) -> dict[str, Any]:
    return {"annotations": {"readOnlyHint": read_only, "idempotentHint": idempotent}}


class AuditedAgent(WrapperAgent[OrderDeps, str]):
    """A user's wrapper agent: counts every run it forwards."""

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        invocations().record("wrapper_run", "run")
        return await super().run(*args, **kwargs)


AGENT = build_agent()


def build_plain_agent() -> Agent[None, str]:
    """An agent that qualifies for live runs: plain ``Agent``, one plain tool, a static system prompt."""
    agent: Agent[None, str] = Agent(
        ScriptedModel(before_response=before_response).model(), system_prompt="You look orders up."
    )

    @agent.tool_plain
    async def lookup(order_id: str, hold: str = "") -> str:
        """Return the status of an order."""
        invocations().record("tool", "lookup", key=order_id)
        if hold:
            await gate(hold).wait_for_release()
        return f"order {order_id} delivered"

    return agent


PLAIN_AGENT = build_plain_agent()


def build_flows() -> list[AgentSessionFlow]:
    deadline = os.environ.get(DEADLINE_ENV)
    return [
        pydantic_ai_session_flow(
            AGENT,
            flow_type=FLOW_TYPE,
            tool_policies=TOOL_POLICIES,
            interrupt_deadline=None if deadline is None else timedelta(seconds=float(deadline)),
            deps_factory=build_deps,
        ),
        pydantic_ai_session_flow(
            AuditedAgent(AGENT), flow_type=WRAPPED_FLOW_TYPE, tool_policies=TOOL_POLICIES, deps_factory=build_deps
        ),
        pydantic_ai_session_flow(
            PLAIN_AGENT, flow_type=PLAIN_FLOW_TYPE, tool_policies={"lookup": ToolPolicy(ToolEffect.READ)}
        ),
    ]
