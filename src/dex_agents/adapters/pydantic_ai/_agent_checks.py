"""Construction-time checks of the user's agent, and what the runner reads from it.

The runner calls only the public ``run`` of the agent it was given, so a
`WrapperAgent` subclass keeps its behaviour; it unwraps ``.wrapped`` only for
checks that need private state: the output validators (Pydantic AI has no
public accessor for ``_output_validators``) and legacy durable wrapper agents.

Every model and tool Step needs `DeferredToolRequests` among the run's output
types; the runner adds it with the run's ``output_type`` argument. Pydantic AI
refuses that argument on an agent with output validators, so for such an agent
whose ``output_type`` does not list it, `with_deferred_output` gives the runner
a copy of the agent (and of every `WrapperAgent` around it) whose output type
adds `DeferredToolRequests`: same tools, toolsets, capabilities and the same
validator list (validators never see `DeferredToolRequests`: Pydantic AI builds
that output without them). The user's agent is not changed.

Refused at construction, with `ValueError`:

- a Pydantic AI durability capability (``BaseDurabilityCapability``: Temporal,
  DBOS, Prefect) or a ``pydantic_ai.durable_exec`` wrapper agent: Dex Steps
  are the durable boundary, and outside its own workflow Pydantic AI does not
  refuse the combination itself;
- a capability ordering that conflicts with the model Step capability (such as
  another capability declaring ``outermost`` and wrapping every capability):
  every ``RunModel`` would fail with Pydantic AI's circular ordering error.
"""

import copy
from collections.abc import Sequence
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai._output import OutputSchema
from pydantic_ai.agent import AbstractAgent, WrapperAgent
from pydantic_ai.capabilities import AbstractCapability, CombinedCapability, ReinjectSystemPrompt
from pydantic_ai.durable_exec import BaseDurabilityCapability
from pydantic_ai.exceptions import UserError
from pydantic_ai.output import OutputSpec

from dex_agents.adapters.pydantic_ai._capabilities import ModelStepCapability

_DURABLE_EXEC_MODULE = "pydantic_ai.durable_exec"


def agent_chain(agent: AbstractAgent[Any, Any]) -> list[AbstractAgent[Any, Any]]:
    """Return ``agent`` and every agent it wraps, outermost first."""
    chain = [agent]
    while isinstance(chain[-1], WrapperAgent):
        chain.append(chain[-1].wrapped)
    return chain


def ends_early(agent: AbstractAgent[Any, Any]) -> bool:
    """Whether the innermost `Agent`'s ``end_strategy`` is ``'early'`` (what its runs use: the runner sets none)."""
    return any(isinstance(inner, Agent) and inner.end_strategy == "early" for inner in agent_chain(agent))


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


def needs_deferred_output_copy(agent: AbstractAgent[Any, Any]) -> bool:
    """Whether the runner must run a copy of ``agent`` (see `with_deferred_output`)."""
    return has_output_validators(agent) and not lists_deferred_tool_requests(agent.output_type)


def with_deferred_output(agent: AbstractAgent[Any, Any]) -> AbstractAgent[Any, Any]:
    """Return ``agent``, or, when it has output validators and no `DeferredToolRequests` output, that copy.

    Shallow copies: the tool and toolset lists, the capabilities and the validator list stay shared, so a
    tool or validator registered on the user's agent later is the copy's too.
    """
    if not needs_deferred_output_copy(agent):
        return agent
    chain = agent_chain(agent)
    inner = chain[-1]
    assert isinstance(inner, Agent)  # has_output_validators found one
    copied: AbstractAgent[Any, Any] = _with_output_type(inner, [inner.output_type, DeferredToolRequests])
    for wrapper in reversed(chain[:-1]):
        outer = copy.copy(wrapper)
        assert isinstance(outer, WrapperAgent)
        outer.wrapped = copied
        copied = outer
    return copied


def _with_output_type(agent: Agent[Any, Any], output_type: OutputSpec[Any]) -> Agent[Any, Any]:
    """A shallow copy of ``agent`` with another output type, set as ``Agent.__init__`` sets it."""
    copied = copy.copy(agent)
    schema: OutputSchema[Any] = OutputSchema.build(output_type)
    copied._output_type = output_type  # noqa: SLF001 - no public way to copy an agent with another output type
    copied._output_schema = schema  # noqa: SLF001
    toolset = schema.toolset
    if toolset is not None and toolset.max_retries is None:
        toolset.max_retries = agent._max_output_retries  # noqa: SLF001
    copied._output_toolset = toolset  # noqa: SLF001
    return copied


def capabilities_of(agent: AbstractAgent[Any, Any]) -> list[AbstractCapability[Any]]:
    """Return every capability the agent registers (the leaves of its root capability)."""
    found: list[AbstractCapability[Any]] = []
    agent.root_capability.apply(found.append)
    return found


def has_reinject_system_prompt(agent: AbstractAgent[Any, Any]) -> bool:
    """Whether the agent already has a `ReinjectSystemPrompt` (a run-level one would replace it)."""
    return any(isinstance(capability, ReinjectSystemPrompt) for capability in capabilities_of(agent))


def has_system_prompt(agent: AbstractAgent[Any, Any]) -> bool:
    """Whether the agent may have a system prompt for `ReinjectSystemPrompt` to put back.

    ``ReinjectSystemPrompt`` reinjects ``agent.system_prompt_parts``: a plain ``Agent``'s static
    system prompts and system prompt functions. With neither, it finds nothing to add and leaves the
    messages as they are, so a run need not carry it (each capability costs every hook a context copy).
    Anything but a plain ``Agent`` counts as having one.
    """
    if type(agent) is not Agent:
        return True
    try:
        return bool(agent._system_prompts or agent._system_prompt_functions)  # noqa: SLF001 - no public view
    except AttributeError:
        return True


def check_agent(agent: AbstractAgent[Any, Any]) -> None:
    """Refuse an agent the runner cannot run in Step mode.

    Raises:
        ValueError: the agent carries a durability capability or wrapper, or its
            capability ordering conflicts with the model Step capability.
    """
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
