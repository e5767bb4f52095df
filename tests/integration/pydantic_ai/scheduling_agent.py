"""A Pydantic AI agent whose tools show how a session schedules and waits, shared by the tests and their Worker.

The model is `ScriptedModel` (its script is the turn's user prompt). Every
tool logs ``("start", name)`` and ``("end", name)`` in the `InvocationLog`
under ``$PYDANTIC_AI_TEST_STATE``; one called with ``hold`` parks at that
`FileGate` between the two.

- ``work``: a plain tool (parallel); ``serial``: ``sequential=True``;
  ``ledger``: a tool of a sequential ``FunctionToolset``; ``approve_serial``:
  sequential and ``requires_approval=True``; ``delegate``: asks a sub-agent
  that shares the run's usage (``usage=ctx.usage``, two model calls).

`LIMITED_FLOW_TYPE` runs the same agent with ``UsageLimits(request_limit=2)``.

The same `build_agent` runs plainly in the test process, so a test compares
a plain run's order with a session's.
"""

from pydantic_ai import Agent, RunContext
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import UsageLimits

from dex_agents import AgentSessionFlow, ToolEffect, ToolPolicy
from dex_agents.adapters.pydantic_ai import pydantic_ai_session_flow
from tests.integration.case_state import case_state
from tests.unit.adapters.pydantic_ai.scripted_model import ScriptedModel, call, script

STATE_ENV = "PYDANTIC_AI_TEST_STATE"
FLOW_TYPE = "PydanticSchedulingAgent"
LIMITED_FLOW_TYPE = "PydanticLimitedSchedulingAgent"
LIMITS = UsageLimits(request_limit=2)

READ = ToolPolicy(ToolEffect.READ)
TOOL_POLICIES = {
    "work": READ,
    "serial": READ,
    "ledger": READ,
    "approve_serial": ToolPolicy(ToolEffect.READ, requires_approval=True),
    "delegate": READ,
}


state_dir, invocations, gate = case_state(STATE_ENV)


async def _run(tool: str, label: str, hold: str) -> str:
    invocations().record("start", label, tool=tool)
    if hold:
        await gate(hold).wait_for_release()
    invocations().record("end", label, tool=tool)
    return f"{tool} {label} done"


def build_agent() -> Agent[None, str]:
    ordered: FunctionToolset[None] = FunctionToolset(sequential=True)

    @ordered.tool_plain
    async def ledger(label: str, hold: str = "") -> str:
        """Write one ledger line (the toolset runs its tools one at a time)."""
        return await _run("ledger", label, hold)

    agent: Agent[None, str] = Agent(ScriptedModel().model(), toolsets=[ordered])

    @agent.tool_plain
    async def work(label: str, hold: str = "") -> str:
        """Do some work beside other calls."""
        return await _run("work", label, hold)

    @agent.tool_plain(sequential=True)
    async def serial(label: str, hold: str = "") -> str:
        """Do work that must run alone."""
        return await _run("serial", label, hold)

    @agent.tool_plain(sequential=True, requires_approval=True)
    async def approve_serial(label: str, hold: str = "") -> str:
        """Do work that runs alone, once someone approved it."""
        return await _run("approve_serial", label, hold)

    sub_agent: Agent[None, str] = Agent(ScriptedModel().model())

    @sub_agent.tool_plain
    def echo(text: str) -> str:
        return text

    @agent.tool
    async def delegate(ctx: RunContext[None], question: str) -> str:
        """Ask a sub-agent, which shares the run's usage."""
        asked = script([call("e", "echo", text=question)], "the sub-agent's answer", name="sub")
        return (await sub_agent.run(asked, usage=ctx.usage)).output

    return agent


AGENT = build_agent()


def build_flows() -> list[AgentSessionFlow]:
    return [
        pydantic_ai_session_flow(AGENT, flow_type=FLOW_TYPE, tool_policies=TOOL_POLICIES),
        pydantic_ai_session_flow(AGENT, flow_type=LIMITED_FLOW_TYPE, tool_policies=TOOL_POLICIES, usage_limits=LIMITS),
    ]
