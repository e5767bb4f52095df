"""A real sagent agent for the adapter's tests, shared by the tests and their Worker children.

The model is `ScriptedModel` (it follows the JSON script in the turn's user
message). Every model and tool call is counted in the `InvocationLog` under
``$SAGENT_TEST_STATE``: model calls as ``("model", <script>, step=n)``, tool
calls as ``("tool", <name>, key=<idempotency key>)``. A script step with
``gate`` parks the model, and a tool called with ``gate`` parks the tool, at a
`FileGate` until the test releases it.

Tools: ``find_order`` (read), ``refund_order`` (idempotent write, approval),
``email_customer`` (non-idempotent write); ``read_tool``, ``idempotent_write``,
``write``, ``unclassified_write`` (each parks at its ``gate``); ``fail_me``
(an ``is_error`` result), ``crash`` (raises); and sagent's own ``Read``,
``Edit``, ``Write`` and ``Bash`` working in ``$SAGENT_TEST_STATE/files``.
"""

from pathlib import Path
from typing import cast

from sagent.agent.agent import Agent
from sagent.tools import Bash, Edit, Read, Write, tool
from sagent.types.runtime import ToolResult
from sagent.types.tools import Tool

from dex_agents import AgentSessionFlow, AgentSessionOptions, CompactionPolicy, ToolEffect, ToolPolicy
from dex_agents.adapters.sagent import deferred_tool_idempotency_key, sagent_session_flow
from tests.integration.case_state import case_state
from tests.integration.scenario_tools import SCENARIO_TOOL_POLICIES
from tests.sagent.scripted_model import ModelCall, ScriptedModel

STATE_ENV = "SAGENT_TEST_STATE"
FLOW_TYPE = "SagentOrderAgent"
COMPACTING_FLOW_TYPE = "SagentCompactingOrderAgent"
COMPACTION = CompactionPolicy(context_budget_chars=4096, keep_recent_messages=2)
"""The compacting flow's policy: a small context, so a few turns compact."""
SYSTEM = "You help customers with their orders."

TOOL_POLICIES = {
    **SCENARIO_TOOL_POLICIES,
    "fail_me": ToolPolicy(ToolEffect.READ),
    "crash": ToolPolicy(ToolEffect.READ),
    "Read": ToolPolicy(ToolEffect.READ),
    "Edit": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=False),
    "Write": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=False),
}
"""``Bash`` has none: sagent's classifier decides (a read-only command is a read)."""


state_dir, invocations, gate = case_state(STATE_ENV)


def notes_file(directory: Path) -> Path:
    """A new ``notes.txt`` in ``directory`` holding ``hello world``: the file the Read, Edit and Write cases edit."""
    target = directory / "notes.txt"
    target.write_text("hello world\n")
    return target


def files_dir() -> Path:
    path = state_dir() / "files"
    path.mkdir(parents=True, exist_ok=True)
    return path


async def before_response(model_call: ModelCall) -> None:
    invocations().record("model", model_call.script, step=model_call.step)
    if model_call.gate is not None:
        await gate(model_call.gate).wait_for_release()


async def ran(name: str, gate_name: str = "") -> None:
    invocations().record("tool", name, key=deferred_tool_idempotency_key())
    if gate_name:
        await gate(gate_name).wait_for_release()


@tool
async def find_order(order_id: str) -> str:
    """Return the status of an order."""
    await ran("find_order")
    return f"order {order_id} delivered"


@tool
async def refund_order(order_id: str) -> str:
    """Refund an order."""
    await ran("refund_order")
    return f"refund of {order_id} with key {deferred_tool_idempotency_key()}"


@tool
async def email_customer(order_id: str, text: str) -> str:
    """Email the customer who placed an order."""
    await ran("email_customer")
    return f"emailed the customer of order {order_id}"


@tool
async def read_tool(gate: str = "") -> str:
    """A read that may park."""
    await ran("read_tool", gate)
    return "read done"


@tool
async def idempotent_write(gate: str = "") -> str:
    """An idempotent write that may park."""
    await ran("idempotent_write", gate)
    return f"written with key {deferred_tool_idempotency_key()}"


@tool
async def write(gate: str = "") -> str:
    """A non-idempotent write that may park."""
    await ran("write", gate)
    return "written"


@tool
async def unclassified_write(gate: str = "") -> str:
    """A write without a policy (the default effect: unclassified, approval)."""
    await ran("unclassified_write", gate)
    return "written"


@tool
async def fail_me() -> ToolResult:
    """A tool that answers with an error result."""
    await ran("fail_me")
    return ToolResult(call_id="", content="the order is locked", is_error=True)


@tool
async def crash() -> str:
    """A tool that raises."""
    await ran("crash")
    raise ValueError("disk full")


# sagent's ``@tool`` returns its private ``_ToolImpl``, whose ``name`` mypy reads as optional.
FUNCTION_TOOLS: list[Tool] = [
    cast(Tool, function)
    for function in (
        find_order,
        refund_order,
        email_customer,
        read_tool,
        idempotent_write,
        write,
        unclassified_write,
        fail_me,
        crash,
    )
]


def build_agent() -> Agent:
    """A fresh agent: called once per Step."""
    return Agent(
        model=ScriptedModel(before_response=before_response),
        system=SYSTEM,
        tools=[*FUNCTION_TOOLS, Read(), Edit(), Write(), Bash()],
    )


def build_flows() -> list[AgentSessionFlow]:
    """The order agent's flow, then the same agent under `COMPACTION`."""
    return [
        sagent_session_flow(build_agent, flow_type=FLOW_TYPE, tool_policies=TOOL_POLICIES),
        sagent_session_flow(
            build_agent,
            flow_type=COMPACTING_FLOW_TYPE,
            tool_policies=TOOL_POLICIES,
            options=AgentSessionOptions(compaction=COMPACTION),
        ),
    ]
