"""`sagent_session_flow`: the one-call builder of a sagent agent's session Flow.

The only module of the adapter that touches the Dex binding, through its
public `AgentSessionFlow` and `AgentSessionOptions`.
"""

from collections.abc import Mapping

import attrs

from dex_agents.adapters.sagent.runner import AgentFactory, SagentRunner
from dex_agents.application.options import AgentSessionOptions
from dex_agents.domain.tools import ToolPolicy
from dex_agents.infrastructure.dex.flow import AgentSessionFlow


def sagent_session_flow(
    agent_factory: AgentFactory,
    *,
    flow_type: str,
    tool_policies: Mapping[str, ToolPolicy] | None = None,
    options: AgentSessionOptions | None = None,
) -> AgentSessionFlow:
    """Build the `AgentSessionFlow` that runs the factory's sagent agent as durable sessions.

    Args:
        agent_factory: builds a fresh sagent ``Agent`` (no arguments); called
            once here to check it, then once per model and tool Step.
        flow_type: the Flow type of this agent's sessions.
        tool_policies: policies by tool name; they win over ``options.tool_policies``
            for the tools they name.
        options: the session options (default effect, approval deadline,
            event stream, limits); ``AgentSessionOptions()`` when ``None``.

    Raises:
        ValueError: the agent cannot run as a durable session (see `SagentRunner`).
    """
    runner = SagentRunner(agent_factory)
    chosen = options or AgentSessionOptions()
    if tool_policies:
        chosen = attrs.evolve(chosen, tool_policies={**chosen.tool_policies, **tool_policies})
    return AgentSessionFlow(runner, flow_type=flow_type, options=chosen)
