"""The tool Step's direct path: one function tool called through Pydantic AI's ``ToolManager``, no agent run.

A tool Step otherwise runs the whole agent over a one-call history (see
`PydanticAIRunner.execute_deferred_tool_call`). Pydantic AI prepares every run
(capability resolution, the agent graph, the run's event stream), which costs
the Worker about 2.5 ms per tool Step, several times the tool call itself
(``docs/performance.md``). For an agent whose run could do nothing
but validate the arguments and call the function, the Step does what that
run's ``CallToolsNode`` does, with the same Pydantic AI code:

- ``ToolManager.for_run_step`` over the agent's function toolset: the called
  tool built from the definition the model Step prepared
  (``FunctionToolset.tool_for_tool_def``: ``prepare`` does not run again), the
  others as declared (as the full run's tool Step lists them), then
  ``ToolManager.handle_call``: argument validation (the tool's schema and its
  ``args_validator``), the call, ``ModelRetry`` and validation errors turned
  into a ``retried`` return within the tool's retry budget (past it, the same
  ``UnexpectedModelBehavior`` the run raises), ``ToolFailed`` into a ``failed``
  return, ``ApprovalRequired`` and ``CallDeferred`` raised as in the run;
- ``build_tool_return_part``: the return part the model would read, with the
  ``UserPromptPart`` of ``ToolReturn.content`` and the ``ToolAvailabilityDeltaPart``
  of ``ToolReturn.tools`` that the run's ``CallToolsNode`` puts beside it.

The tool's `RunContext` carries what a run's would: the deps, the model, the
session ID as ``conversation_id``, the run metadata (the agent's, computed
from this context, and the idempotency key), the turn's prompt, run step and
usage so far (`dex_agents.adapters.pydantic_ai._tool_context`), the tool's retry count in the
turn (``ctx.retries``; `dex_agents.adapters.pydantic_ai._retries`), a history
holding only the call, a fresh ``run_id``, and ``tool_call_id``, ``tool_name``,
``retry``, ``max_retries`` as ``ToolManager`` sets them.
``tests/unit/adapters/pydantic_ai/test_direct_tool.py`` runs every case both
ways and compares what the tool saw and what the Step returned.

`direct_tool` answers ``None`` (take the full run) unless everything that
could make the run behave differently is absent:

- the agent is exactly ``pydantic_ai.Agent`` (no subclass, no ``WrapperAgent``),
  with no ``agent.override(...)`` in effect;
- its capabilities are only the ones every agent gets (``ToolSearch``, the
  pending-message drain): no user capability, hook, event handler, toolset or
  dynamic toolset; no instrumentation (the agent's or ``Agent.instrument_all``);
  no tool timeout or concurrency limit;
- the tool is a plain function tool of the agent itself: not
  ``requires_approval``, not ``defer_loading``, no timeout of its own, and no
  ``prepare`` function unless the model Step handed on its prepared definition;
- the call is not an approved one (an approval goes through the run);
- the model resolves to a ``Model`` without a run (a model name that cannot be
  built here takes the run, which raises what it always raised).
"""

from dataclasses import dataclass
from typing import Any, cast

from pydantic_ai import Agent
from pydantic_ai._agent_graph import resolve_run_id
from pydantic_ai._run_context import RunContext
from pydantic_ai._tool_execution import build_tool_return_part, tool_bound_retry_part
from pydantic_ai.capabilities import ToolSearch
from pydantic_ai.exceptions import ToolFailedError, ToolRetryError
from pydantic_ai.messages import (
    ModelRequestPart,
    ModelResponse,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_ai.usage import RunUsage

from dex_agents.adapters.pydantic_ai._tool_context import PreparedFields, ToolStepContext

_DEFAULT_CAPABILITY_NAMES = frozenset({"PendingMessageDrainCapability"})
"""Capabilities Pydantic AI gives every agent, besides ``ToolSearch``; they take no part in a tool call."""

_OVERRIDES = (
    "_override_deps",
    "_override_model",
    "_override_toolsets",
    "_override_tools",
    "_override_instructions",
    "_override_root_capability",
    "_override_tool_retries",
    "_override_metadata",
    "_override_workspace",
    "_override_native_tools",
    "_override_output_retries",
    "_override_model_settings",
    "_override_name",
)


def _plain_capabilities(agent: Agent[Any, Any]) -> bool:
    root = getattr(agent, "_root_capability", None)
    capabilities = getattr(root, "capabilities", None)
    if capabilities is None:
        return False
    for capability in capabilities:
        if isinstance(capability, ToolSearch):
            if type(capability) is not ToolSearch or capability.defer_loading:
                return False
        elif type(capability).__name__ not in _DEFAULT_CAPABILITY_NAMES:
            return False
    return True


def plain_agent(agent: object) -> bool:
    """Whether the agent's run can only validate and call a function tool (see the module docstring)."""
    if type(agent) is not Agent:
        return False
    typed: Agent[Any, Any] = agent
    try:
        return (
            _plain_capabilities(typed)
            and not typed._user_toolsets  # noqa: SLF001 - see the module docstring: Pydantic AI has no public view
            and not typed._dynamic_toolsets  # noqa: SLF001
            and not typed._cap_toolsets  # noqa: SLF001
            and typed._event_stream_handler is None  # noqa: SLF001
            and not typed._event_hooks._registry  # noqa: SLF001
            and typed._instrument is None  # noqa: SLF001
            and not Agent._instrument_default  # noqa: SLF001
            and typed._tool_timeout is None  # noqa: SLF001
            and typed._concurrency_limiter is None  # noqa: SLF001
            and typed._function_toolset.timeout is None  # noqa: SLF001
            and all(getattr(typed, name).get() is None for name in _OVERRIDES)
        )
    except AttributeError:
        # Another Pydantic AI version: its run is the only path known to be right.
        return False


def _plain_tool(tool: Tool[Any], *, prepared: bool) -> bool:
    return (
        (tool.prepare is None or prepared)
        and not tool.requires_approval
        and not tool.defer_loading
        and tool.timeout is None
    )


@dataclass
class _OneToolToolset(WrapperToolset[Any]):
    """The agent's function toolset without ``prepare``: the called tool as the model Step prepared it."""

    tool_name: str = ""
    definition_fields: PreparedFields | None = None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        # Every tool is listed (the others as declared), so ``ctx.available_tool_names`` is a run's.
        toolset = cast(FunctionToolset[Any], self.wrapped)
        listed: dict[str, ToolsetTool[Any]] = {}
        for name, tool in toolset.tools.items():
            tool_def = tool.tool_def
            if name == self.tool_name and self.definition_fields is not None:
                tool_def = self.definition_fields.apply(tool_def)
            listed[name] = toolset.tool_for_tool_def(tool_def, ctx=ctx)
        return listed


@dataclass(frozen=True)
class DirectTool:
    """One tool call the Step may make without an agent run."""

    agent: Agent[Any, Any]
    model: Model

    async def call(
        self,
        part: ToolCallPart,
        *,
        deps: object,
        conversation_id: str,
        metadata: dict[str, Any],
        usage: RunUsage | None = None,
        context: ToolStepContext | None = None,
    ) -> list[ModelRequestPart]:
        """Validate and call the tool; return the parts the model would read (the return part first).

        ``usage`` is the context's usage (a fresh one by default), which the call adds to as a run would;
        ``context`` what the model Step handed on (the prompt, the run step, the prepared definition,
        the tool's retry count in the turn).

        Raises:
            pydantic_ai.exceptions.UnexpectedModelBehavior: the tool ran out of retries.
            pydantic_ai.exceptions.ApprovalRequired: the tool asked for approval while it ran.
            pydantic_ai.exceptions.CallDeferred: the tool deferred itself.
            Exception: whatever the tool raised, as the run would.
        """
        context = ToolStepContext() if context is None else context
        toolset = _OneToolToolset(
            self.agent._function_toolset,  # noqa: SLF001
            tool_name=part.tool_name,
            definition_fields=context.prepared,
        )
        ctx: RunContext[Any] = RunContext(
            deps=deps,
            model=self.model,
            usage=RunUsage() if usage is None else usage,
            agent=self.agent,
            prompt=context.prompt,
            messages=[ModelResponse(parts=[part])] if context.messages is None else context.messages,
            conversation_id=conversation_id,
            run_step=context.run_step,
            run_id=resolve_run_id(None, None),
            max_retries=self.agent._max_tool_retries,  # noqa: SLF001
            retries={part.tool_name: context.retries} if context.retries else {},
        )
        # The agent's metadata (a mapping, or a function of the context) merged with the Step's, as a run merges them.
        ctx.metadata = self.agent._get_metadata(ctx, metadata)  # noqa: SLF001
        manager = await ToolManager(
            toolset=toolset,
            default_max_retries=self.agent._max_tool_retries,  # noqa: SLF001
        ).for_run_step(ctx)
        try:
            result = await manager.handle_call(part)
        except ToolRetryError as error:
            return [tool_bound_retry_part(error)]
        except ToolFailedError as error:
            return [error.tool_failed]
        tool_def = manager.get_tool_def(part.tool_name)
        return_part, user_content, tools = build_tool_return_part(
            result, call=part, tool_kind=tool_def.tool_kind if tool_def is not None else None
        )
        parts: list[ModelRequestPart] = [return_part]
        if tools:
            added = list(dict.fromkeys(tools))
            parts.append(ToolAvailabilityDeltaPart(tools_added=added, tool_call_id=part.tool_call_id))
        if user_content:
            parts.append(UserPromptPart(content=user_content))
        return parts


class DirectToolCache:
    """Decides per call whether a tool Step may skip the run (the module docstring's rules); resolves the model once."""

    def __init__(self, agent: object, model: object) -> None:
        """Remember the agent and the runner's model override (``None``: the agent's own)."""
        self._agent = agent
        self._model_choice = model
        self._model: Model | None = None
        self._model_failed = False

    def _resolve_model(self, agent: Agent[Any, Any]) -> Model | None:
        if self._model is None and not self._model_failed:
            try:
                self._model = agent._get_model_outside_run(self._model_choice)  # type: ignore[arg-type] # noqa: SLF001
            except Exception:  # noqa: BLE001 - any failure: the run reports it as it always did
                self._model_failed = True
        return self._model

    def direct_tool(self, tool_name: str, *, approved: bool, prepared: bool = False) -> DirectTool | None:
        """Return how to call ``tool_name`` directly, or ``None`` when the call needs the full run.

        ``prepared``: the model Step handed on the tool's prepared definition (a tool with ``prepare`` may go direct).
        """
        if approved or not plain_agent(self._agent):
            return None
        agent = cast(Agent[Any, Any], self._agent)
        tool = agent._function_toolset.tools.get(tool_name)  # noqa: SLF001
        if tool is None or not _plain_tool(tool, prepared=prepared):
            return None
        model = self._resolve_model(agent)
        if model is None:
            return None
        return DirectTool(agent=agent, model=model)
