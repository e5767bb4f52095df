"""Construction-time checks of the user's agent, and what the runner reads from it.

The runner calls only the public ``run`` of the agent it was given, so a
`WrapperAgent` subclass keeps its behaviour; it unwraps ``.wrapped`` only for
checks that need private state: the output validators (Pydantic AI has no
public accessor for ``_output_validators``) and legacy durable wrapper agents.

Refused at construction, with `ValueError`:

- output validators without `DeferredToolRequests` in ``output_type``: a run
  may not set its own ``output_type`` then, and every model Step needs
  `DeferredToolRequests` among the output types;
- a Pydantic AI durability capability (``BaseDurabilityCapability``: Temporal,
  DBOS, Prefect) or a ``pydantic_ai.durable_exec`` wrapper agent: Dex Steps
  are the durable boundary, and outside its own workflow Pydantic AI does not
  refuse the combination itself;
- a capability ordering that conflicts with the model Step capability (such as
  another capability declaring ``outermost`` and wrapping every capability):
  every ``RunModel`` would fail with Pydantic AI's circular ordering error.
"""

from collections.abc import Sequence
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.agent import AbstractAgent, WrapperAgent
from pydantic_ai.capabilities import AbstractCapability, CombinedCapability, ReinjectSystemPrompt
from pydantic_ai.durable_exec import BaseDurabilityCapability
from pydantic_ai.exceptions import UserError

from dex_agents.adapters.pydantic_ai._capabilities import ModelStepCapability

_DURABLE_EXEC_MODULE = "pydantic_ai.durable_exec"


def agent_chain(agent: AbstractAgent[Any, Any]) -> list[AbstractAgent[Any, Any]]:
    """Return ``agent`` and every agent it wraps, outermost first."""
    chain = [agent]
    while isinstance(chain[-1], WrapperAgent):
        chain.append(chain[-1].wrapped)
    return chain


def lists_deferred_tool_requests(output_type: object) -> bool:
    """Whether an output spec names `DeferredToolRequests` (directly or in a sequence)."""
    if output_type is DeferredToolRequests:
        return True
    if isinstance(output_type, Sequence) and not isinstance(output_type, str):
        return any(lists_deferred_tool_requests(item) for item in output_type)
    return False


def has_output_validators(agent: AbstractAgent[Any, Any]) -> bool:
    """Whether the innermost `Agent` has output validators."""
    return any(isinstance(inner, Agent) and bool(inner._output_validators) for inner in agent_chain(agent))  # noqa: SLF001 - no public accessor


def capabilities_of(agent: AbstractAgent[Any, Any]) -> list[AbstractCapability[Any]]:
    """Return every capability the agent registers (the leaves of its root capability)."""
    found: list[AbstractCapability[Any]] = []
    agent.root_capability.apply(found.append)
    return found


def has_reinject_system_prompt(agent: AbstractAgent[Any, Any]) -> bool:
    """Whether the agent already has a `ReinjectSystemPrompt` (a run-level one would replace it)."""
    return any(isinstance(capability, ReinjectSystemPrompt) for capability in capabilities_of(agent))


def check_agent(agent: AbstractAgent[Any, Any]) -> None:
    """Refuse an agent the runner cannot run in Step mode.

    Raises:
        ValueError: the agent has output validators but no `DeferredToolRequests`
            output, carries a durability capability or wrapper, or its capability
            ordering conflicts with the model Step capability.
    """
    if has_output_validators(agent) and not lists_deferred_tool_requests(agent.output_type):
        raise ValueError(
            "an agent with output validators must list DeferredToolRequests in its output_type, "
            "such as output_type=[Answer, DeferredToolRequests]: every model Step ends with "
            "DeferredToolRequests when the model asks for tools, and Pydantic AI refuses a run "
            "output_type on an agent with output validators"
        )
    durable = [type(c).__name__ for c in capabilities_of(agent) if isinstance(c, BaseDurabilityCapability)]
    durable += [type(a).__name__ for a in agent_chain(agent) if type(a).__module__.startswith(_DURABLE_EXEC_MODULE)]
    if durable:
        raise ValueError(
            f"the agent uses Pydantic AI durable execution ({', '.join(durable)}); do not combine it with "
            "dex-agents: Dex Steps are already the durable boundary of every model and tool call. "
            "Build the session from the agent without its durability capability."
        )
    try:
        CombinedCapability([agent.root_capability, ModelStepCapability()])
    except UserError as error:
        raise ValueError(
            f"the agent's capability ordering conflicts with the model Step capability, which must wrap every "
            f"capability from the outermost position (a capability declaring position='outermost' and "
            f"wraps=(AbstractCapability,) does this): {error}"
        ) from error
