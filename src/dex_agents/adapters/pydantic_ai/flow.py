"""`pydantic_ai_session_flow`: the one-call builder of a Pydantic AI agent's session Flow.

The only module of the adapter that touches the Dex binding, through its
public `AgentSessionFlow` and `AgentSessionOptions`.
"""

from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from pydantic_ai.agent import AbstractAgent
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.usage import UsageLimits

from dex_agents.adapters.pydantic_ai._compaction import DEFAULT_TOOL_RESULT_BUDGET_CHARS, default_compaction_policy
from dex_agents.adapters.pydantic_ai.runner import PydanticAIRunner
from dex_agents.application.compaction import CompactionPolicy, HistoryCompactor
from dex_agents.application.options import DEFAULT_EVENT_STREAM_CAPACITY_BYTES, AgentSessionOptions, TracerSource
from dex_agents.domain.tools import ToolEffect, ToolPolicy
from dex_agents.infrastructure.dex.flow import AgentSessionFlow

DepsT = TypeVar("DepsT")


def pydantic_ai_session_flow(
    agent: AbstractAgent[DepsT, Any],
    *,
    flow_type: str,
    tool_policies: Mapping[str, ToolPolicy] | None = None,
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED,
    interrupt_deadline: timedelta | None = None,
    external_result_deadline: timedelta | None = None,
    event_stream_capacity_bytes: int = DEFAULT_EVENT_STREAM_CAPACITY_BYTES,
    deps_factory: Callable[[str], DepsT | Awaitable[DepsT]] | None = None,
    model: Model | KnownModelName | str | None = None,
    compaction: CompactionPolicy | None = None,
    compactor: HistoryCompactor | None = None,
    tool_result_budget_chars: int | None = DEFAULT_TOOL_RESULT_BUDGET_CHARS,
    direct_tool_calls: bool = True,
    live_runs: bool = True,
    usage_limits: UsageLimits | None = None,
    tracing: "bool | TracerSource" = False,
) -> AgentSessionFlow:
    """Build the `AgentSessionFlow` that runs ``agent`` as durable sessions.

    Args:
        agent: the agent (an ``Agent`` or a ``WrapperAgent``); its code stays unchanged.
        flow_type: the Flow type of this agent's sessions.
        tool_policies: policies by the tool name the model calls, toolset prefix included.
        default_tool_effect: the effect of a tool with neither a policy nor tool metadata.
        interrupt_deadline: how long an approval may wait before the call counts as rejected.
        external_result_deadline: how long a call of an external tool (or one that raised ``CallDeferred``)
            may wait for ``submit_tool_result`` before it ends ``expired``; ``None``: forever.
        event_stream_capacity_bytes: byte budget of the live event Stream.
        deps_factory: builds the agent's dependencies from the session ID before every
            model and tool Step.
        model: the model to run instead of the agent's own.
        compaction: when the model's context is compacted (`CompactionPolicy`). ``None``: a budget of
            three quarters of the model's context window where Pydantic AI knows it (``model``, else the
            agent's), else `CompactionPolicy`'s defaults.
        compactor: how history is summarised; one request to the agent's model by default.
        tool_result_budget_chars: characters of earlier turns' tool results the model reads
            whole; older ones are shortened in its view (``None``: never).
        direct_tool_calls: let a tool Step call a plain function tool of a plain agent without
            an agent run (same result; see `PydanticAIRunner`); ``False``: always run the agent.
        live_runs: let one agent run serve the model Steps of a turn that land on the same Worker
            (same outcomes and run states; see `PydanticAIRunner`); ``False``: one run per model Step.
        usage_limits: each turn's `UsageLimits`, as ``agent.run`` takes them for a run, enforced across the
            turn's Steps; a turn that reaches one fails with Pydantic AI's ``UsageLimitExceeded`` message
            (``last_turn_error``). ``None``: Pydantic AI's default (50 requests a turn).
        tracing: OpenTelemetry spans per Step attempt, one trace per turn (`AgentSessionOptions.tracing`):
            ``True`` with the global ``TracerProvider``, or a ``TracerProvider``; the ``[otel]`` extra.

    Raises:
        ValueError: the agent cannot run in Step mode (see `PydanticAIRunner`), or
            an option is invalid.
    """
    runner = PydanticAIRunner(
        agent,
        deps_factory=deps_factory,
        model=model,
        compactor=compactor,
        tool_result_budget_chars=tool_result_budget_chars,
        direct_tool_calls=direct_tool_calls,
        live_runs=live_runs,
        usage_limits=usage_limits,
    )
    options = AgentSessionOptions(
        compaction=compaction or default_compaction_policy(model if model is not None else agent.model),
        tool_policies=tool_policies,
        default_tool_effect=default_tool_effect,
        interrupt_deadline=interrupt_deadline,
        external_result_deadline=external_result_deadline,
        event_stream_capacity_bytes=event_stream_capacity_bytes,
        tracing=tracing,
    )
    return AgentSessionFlow(runner, flow_type=flow_type, options=options)
