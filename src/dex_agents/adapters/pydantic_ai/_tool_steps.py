"""The tool Step of `PydanticAIRunner`: one deferred tool call, directly or through an agent run.

See `PydanticAIRunner.execute_deferred_tool_call` for the contract.
"""

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any

import attrs
from pydantic import ValidationError
from pydantic_ai import DeferredToolResults, ToolApproved
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ModelRetry,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RunUsage

from dex_agents.adapters.pydantic_ai import _history
from dex_agents.adapters.pydantic_ai._capabilities import (
    RevealToolCapability,
    ToolDefinitions,
    ToolStepCapability,
)
from dex_agents.adapters.pydantic_ai._compaction import (
    summary_request,
)
from dex_agents.adapters.pydantic_ai._direct_tool import DirectToolCache
from dex_agents.adapters.pydantic_ai._results import (
    ran_out_of_retries,
    tool_step_output,
)
from dex_agents.adapters.pydantic_ai._retries import (
    ToolRetriesCapability,
)
from dex_agents.adapters.pydantic_ai._tool_context import (
    ToolStepContext,
    context_of,
)
from dex_agents.adapters.pydantic_ai._tool_state import ToolCallState, load_state
from dex_agents.adapters.pydantic_ai._usage import (
    copy_usage,
    usage_since,
)
from dex_agents.adapters.pydantic_ai.idempotency import IDEMPOTENCY_KEY_METADATA_KEY
from dex_agents.application.runner import (
    DeferredToolExecution,
    ToolApprovalRequestedError,
    ToolCallHistory,
    ToolExecutionResult,
    ToolResultDeferredError,
)
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.tools import ToolCallStatus
from dex_agents.domain.usage import AgentUsage


def _reported(usage: RunUsage, mark: RunUsage) -> AgentUsage | None:
    """What a tool Step's run added to its usage since ``mark``, or ``None`` when nothing."""
    added = usage_since(usage, mark)
    return None if added.is_zero else added


def _ran_out_of_retries(error: UnexpectedModelBehavior, tool_name: str) -> bool:
    """Whether ``error`` is Pydantic AI giving up on the Step's own tool after its retries.

    A sub-agent's model error escaping the tool's body has the same class; it
    differs by naming another tool or having no ``ModelRetry`` (or validation error) cause.
    """
    return isinstance(error.__cause__, ModelRetry | ValidationError) and error.message.startswith(
        f"Tool {tool_name!r} exceeded max retries"
    )


@attrs.frozen(kw_only=True)
class ToolSteps:
    """Runs the tool Steps of one runner's agent, with what every tool Step's run needs."""

    _run_agent: AbstractAgent[Any, Any]
    """The runner's copy of the agent."""
    _output_type: list[object] | None
    """The output type its runs are given."""
    _model: Model | KnownModelName | str | None
    """The model to run instead of the agent's own."""
    _direct_tools: DirectToolCache | None
    """The plain function tools a Step may call without an agent run, or ``None``: always run the agent."""
    _deps: Callable[[str], Awaitable[object]]
    """The agent's dependencies for a session ID."""

    async def execute(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run one tool call: the contract is `PydanticAIRunner.execute_deferred_tool_call`."""
        loaded = load_state(call.tool_call.framework_state)  # read once: the context and the state share it
        context = context_of(loaded) or ToolStepContext()
        if call.history is not None:
            context = replace(context, messages=self._run_messages(call.history, call.flow_id, call.turn_id))
        usage = context.fresh_usage()
        mark = copy_usage(usage)
        try:
            result = await self._tool_step(call, usage, context, ToolCallState.from_data(loaded))
        except ToolExecutionError as error:
            if error.usage is None:
                error.usage = _reported(usage, mark)
            raise
        return attrs.evolve(result, usage=_reported(usage, mark))

    async def _tool_step(
        self, call: DeferredToolExecution, usage: RunUsage, context: ToolStepContext, state: ToolCallState
    ) -> ToolExecutionResult:
        record = call.tool_call
        tools = ToolDefinitions()
        part = ToolCallPart(record.tool_name, record.arguments, tool_call_id=record.tool_call_id)
        approved = record.status is ToolCallStatus.APPROVED
        deps = await self._deps(call.flow_id)
        direct = (
            None
            if self._direct_tools is None
            else self._direct_tools.direct_tool(
                record.tool_name, approved=approved, prepared=context.prepared is not None
            )
        )
        metadata = {IDEMPOTENCY_KEY_METADATA_KEY: call.idempotency_key}
        try:
            if direct is not None:
                parts = await direct.call(
                    part,
                    deps=deps,
                    conversation_id=call.flow_id,
                    metadata=metadata,
                    usage=usage,
                    context=replace(context, retries=state.retries),
                )
                return tool_step_output(parts, record, tools, state)
            with _metadata_from_the_turn(self._run_agent, context, metadata):
                result = await self._run_agent.run(
                    None,
                    message_history=[ModelResponse(parts=[part])],
                    deferred_tool_results=(
                        DeferredToolResults(approvals={record.tool_call_id: ToolApproved()}) if approved else None
                    ),
                    output_type=self._output_type,
                    deps=deps,
                    model=self._model,
                    conversation_id=call.flow_id,
                    metadata=metadata,
                    capabilities=[
                        ToolStepCapability(tools=tools, tool_name=record.tool_name, context=context),
                        RevealToolCapability(tool_name=record.tool_name),
                        ToolRetriesCapability(retries={record.tool_name: state.retries} if state.retries else {}),
                    ],
                    usage=usage,
                )
        except ApprovalRequired as error:
            raise ToolApprovalRequestedError(
                f"tool {record.tool_name!r} asked for approval of call {record.tool_call_id!r}"
            ) from error
        except CallDeferred as error:
            raise ToolResultDeferredError(f"tool {record.tool_name!r} deferred call {record.tool_call_id!r}") from error
        except UnexpectedModelBehavior as error:
            if _ran_out_of_retries(error, record.tool_name):
                cause = error.__cause__
                display = (str(cause) if isinstance(cause, ModelRetry) else "") or error.message
                raise ran_out_of_retries(display, error.message, state) from error
            raise
        except RuntimeError as error:
            # An approved call of an external tool: Pydantic AI refuses to call it.
            if tools.kind(record.tool_name) == "external":
                raise ToolResultDeferredError(f"tool {record.tool_name!r} is external") from error
            raise
        return tool_step_output(result.output, record, tools, state)

    @staticmethod
    def _run_messages(history: ToolCallHistory, session_id: str, turn_id: str) -> list[ModelMessage]:
        """The run's messages up to the model response that asked for the call, as a plain run's ``ctx.messages``.

        Earlier turns replay whole (no tool result is shortened: that is the model's view only), after the summary.
        """
        messages = _history.replay([message for message in history.messages if message.turn_id != turn_id], session_id)
        if history.summary is not None:
            messages.insert(0, summary_request(history.summary))
        if history.framework_run_state is not None:
            messages.extend(_history.RunState.decode(history.framework_run_state).messages)
        return messages


def _metadata_from_the_turn(
    agent: AbstractAgent[Any, Any], context: ToolStepContext, step_metadata: dict[str, Any]
) -> AbstractContextManager[None]:
    """Compute an agent's metadata function from the turn's context, as in the plain run it stands for.

    A run computes its metadata when it starts, from a context whose prompt is the run's; the tool Step's
    run starts without one (its prompt comes from the model Step, `ToolStepContext`), so a metadata
    function is shown the turn's prompt and step, and ``step_metadata`` (the idempotency key) merged over
    what it returns, as a run merges its run metadata over the agent's. A mapping needs nothing: the run
    merges the Step's metadata over it itself.
    """
    override = getattr(agent, "_override_metadata", None)
    current = override.get() if override is not None else None
    config = current.value if current is not None else getattr(agent, "_metadata", None)
    if not callable(config):
        return nullcontext()

    def computed(ctx: RunContext[Any]) -> dict[str, Any]:
        own: dict[str, Any] | None = config(context.applied(ctx))
        return {**(own or {}), **step_metadata}

    return agent.override(metadata=computed)
