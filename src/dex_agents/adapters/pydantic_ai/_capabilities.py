"""The per-run Pydantic AI capabilities the runner adds; the user's agent is never changed.

- `ModelStepCapability` (every ``RunModel``): ordered
  ``CapabilityOrdering(position='outermost', wraps=(AbstractCapability,))``,
  so its toolset wrapper is the outermost one and also sees tools other
  capabilities add (``search_tools``). It records every tool's original
  `ToolDefinition` and then marks every ``function`` and ``unapproved`` tool
  ``external``, so the model response that asks for tools ends the run with
  `DeferredToolRequests`; arguments are still validated against the real
  schema. Under ``end_strategy='graceful'`` or ``'exhaustive'`` it strips the
  output tool call from a response that also holds other tool calls (a plain
  run runs those calls and then ends with that output: the run state keeps the
  whole response, and the resumed run gives the output); under ``'early'`` it
  keeps it, and the run ends there as a plain run does. The model's text and reasoning reach the live events
  through `dex_agents.adapters.pydantic_ai._streaming.DeltaForwardingCapability`
  (the run itself does not stream), or, for an agent whose runs stream anyway,
  through `StreamingModelStepCapability`'s ``on_event`` listener. Its
  ``before_node_run`` makes the run's event listeners and ``run_step`` those
  of a plain run (`dex_agents.adapters.pydantic_ai._run_nodes`). A resumed
  run lists the tools once more to answer the calls of the response it
  resumes, at that response's ``run_step``; a plain run reuses the listing it
  made before that model request (``ToolManager.for_run_step`` is a no-op for
  the same step), so that listing runs no ``prepare`` / ``prepare_tools`` /
  ``toolset.prepared`` (`unprepared`). A run resumed at ``run_step`` 0 (after a
  call a plain run defers too) prepares there, as the user's resumed run does.
- `ToolStepCapability` (every tool Step): same ordering; records the tools'
  original definitions and turns the ``ModelRequestNode`` that follows the
  tool call into ``End(FinalResult(parts))``, so the run ends normally
  (``after_run`` hooks run, nothing is cancelled) before any model request;
  its ``before_node_run`` keeps the call's events from the run's listeners
  (its model Steps show them). Given the definition the model Step prepared,
  the run lists its tools without ``prepare`` (`unprepared`): a plain run
  calls the tool with the listing made before the model request, which the
  model Step made.
- `RevealToolCapability` (every tool Step): default ordering, so its wrapper
  sits inside ``ToolSearch``'s; makes a ``defer_loading`` tool that only tool
  search reveals callable in its own Step.
"""

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering, on_event
from pydantic_ai.capabilities.abstract import RawToolArgs
from pydantic_ai.messages import (
    AgentStreamEvent,
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.result import FinalResult
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, FunctionToolset, PreparedToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_ai.usage import UsageLimits
from pydantic_graph import End

from dex_agents.adapters.pydantic_ai._run_nodes import (
    continue_run_step,
    quiet_model_step_events,
    silence_tool_step_events,
)
from dex_agents.adapters.pydantic_ai._tool_context import ToolStepContext
from dex_agents.adapters.pydantic_ai._usage import copy_usage
from dex_agents.application.event_writer import AgentEventWriter

_DEFERRABLE_KINDS = frozenset({"function", "unapproved"})

OUTERMOST_WRAPPING_ALL = CapabilityOrdering(position="outermost", wraps=(AbstractCapability,))
"""First in the outermost tier: wraps every other capability, the auto-injected ``ToolSearch`` included."""


@dataclass
class ToolDefinitions:
    """The original definitions of the tools a run offered, by the name the model calls."""

    by_name: dict[str, ToolDefinition] = field(default_factory=dict)
    """Definitions as the agent's toolsets gave them, before any rewrite."""

    def original(self, tool_def: ToolDefinition) -> ToolDefinition:
        """Return ``tool_def`` with the ``kind`` the agent gave it (the model Step marks function tools external)."""
        recorded = self.by_name.get(tool_def.name)
        if recorded is None or recorded.kind == tool_def.kind:
            return tool_def
        return replace(tool_def, kind=recorded.kind)

    def kind(self, tool_name: str) -> str | None:
        """Return a tool's original ``kind``, or ``None`` when the run never listed it."""
        definition = self.by_name.get(tool_name)
        return None if definition is None else definition.kind


@dataclass
class ModelStepRecord:
    """What one ``RunModel`` run learned about its tools."""

    tools: ToolDefinitions = field(default_factory=ToolDefinitions)
    """Original tool definitions (``kind``, ``metadata``, ``tool_kind``)."""
    output_tool_names: set[str] = field(default_factory=set)
    """Names of the output tools offered to the model."""
    ends_early: bool = False
    """Whether the agent's ``end_strategy`` is ``'early'``: an output beside function tool calls ends the run
    without them, so the model Step keeps it in the response (given, not learned)."""
    unstripped: ModelResponse | None = None
    """The last response as the model gave it, when the run got it without its output tool calls."""


@dataclass
class _UnpreparedFunctionToolset(WrapperToolset[Any]):
    """A function toolset listing its tools as they are declared, without their ``prepare`` functions."""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        toolset = self.wrapped
        assert isinstance(toolset, FunctionToolset)
        return {
            name: toolset.tool_for_tool_def(tool.tool_def, ctx=ctx, original_name=name)
            for name, tool in toolset.tools.items()
        }


def _called_names(messages: list[ModelMessage]) -> set[str]:
    """The tools the last model response calls (the calls a run's first step answers)."""
    response = next((message for message in reversed(messages) if isinstance(message, ModelResponse)), None)
    return set() if response is None else {call.tool_name for call in response.tool_calls}


def unprepared(toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
    """``toolset`` listing its tools without running ``prepare``, ``prepare_tools`` or ``toolset.prepared``.

    A copy of the wrappers and combinations (as ``visit_and_replace`` makes), the other leaves shared;
    ``PreparedToolset`` layers are left out and function toolsets list their tools as declared.
    """
    if isinstance(toolset, PreparedToolset):
        return unprepared(toolset.wrapped)
    if isinstance(toolset, FunctionToolset):
        return _UnpreparedFunctionToolset(toolset)
    if isinstance(toolset, WrapperToolset):
        return replace(toolset, wrapped=unprepared(toolset.wrapped))
    if isinstance(toolset, CombinedToolset):
        return replace(toolset, toolsets=[unprepared(child) for child in toolset.toolsets])
    return toolset


@dataclass
class _RecordingToolset(WrapperToolset[Any]):
    """Records the wrapped tools' definitions; with ``defer``, marks function tools external.

    With ``context`` (a tool Step), the tool ``tool_name`` gets the definition fields the model Step
    prepared, and its call the turn's state in its `RunContext`.

    A listing at ``unprepared_step`` (a resumed model Step's first step: the one whose calls it answers),
    or any listing with ``unprepared`` (a tool Step given the prepared fields), runs no ``prepare`` /
    ``prepare_tools`` (`unprepared`): a plain run prepared that step's tools once, before its model request.
    """

    tools: ToolDefinitions = field(default_factory=ToolDefinitions)
    defer: bool = False
    tool_name: str = ""
    context: ToolStepContext | None = None
    unprepared: bool = False
    unprepared_step: int | None = None
    answered_step: int | None = None
    output_names: set[str] = field(default_factory=set)
    _listed_from: AbstractToolset[Any] | None = field(default=None, init=False, repr=False)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if self.context is not None and name == self.tool_name:
            ctx = self.context.applied(ctx)
        if self._listed_from is not None:
            # The tool comes from the unprepared copy: call it through the wrappers that listed it.
            return await self._listed_from.call_tool(name, tool_args, ctx, tool)
        return await super().call_tool(name, tool_args, ctx, tool)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools: dict[str, ToolsetTool[Any]] | None = None
        self._listed_from = None
        if self.unprepared or (self.unprepared_step is not None and ctx.run_step == self.unprepared_step):
            chain = unprepared(self.wrapped)
            listed = await chain.get_tools(ctx)
            # A prepare that renamed or hid a called tool: only the prepared listing has it.
            if _called_names(ctx.messages) - self.output_names <= listed.keys():
                tools, self._listed_from = listed, chain
        if tools is None:
            tools = await super().get_tools(ctx)
        offered: dict[str, ToolsetTool[Any]] = {}
        for name, tool in tools.items():
            self.tools.by_name[name] = tool.tool_def
            # The step that answers a resumed response's calls lists the tools as a plain run does: every
            # call has its result, and Pydantic AI's end_strategy rules (a tool retry beside an output
            # wins over it) read the kinds.
            if self.defer and tool.tool_def.kind in _DEFERRABLE_KINDS and ctx.run_step != self.answered_step:
                tool = replace(tool, tool_def=replace(tool.tool_def, kind="external"))
            elif self.context is not None and self.context.prepared is not None and name == self.tool_name:
                tool = replace(tool, tool_def=self.context.prepared.apply(tool.tool_def))
            offered[name] = tool
        return offered


@dataclass
class _RevealingToolset(WrapperToolset[Any]):
    """Clears ``defer_loading`` on one tool."""

    tool_name: str = ""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        tool = tools.get(self.tool_name)
        if tool is not None and tool.tool_def.defer_loading:
            tools = {**tools, self.tool_name: replace(tool, tool_def=replace(tool.tool_def, defer_loading=False))}
        return tools


def without_output_calls(response: ModelResponse, output_tool_names: set[str]) -> ModelResponse:
    """Return ``response`` without its output tool calls when it also holds other tool calls."""
    calls = [part for part in response.parts if isinstance(part, ToolCallPart)]
    if not any(call.tool_name in output_tool_names for call in calls):
        return response
    if all(call.tool_name in output_tool_names for call in calls):
        return response
    kept = [
        part for part in response.parts if not (isinstance(part, ToolCallPart) and part.tool_name in output_tool_names)
    ]
    return replace(response, parts=kept)


@dataclass
class ModelStepCapability(AbstractCapability[Any]):
    """Makes one ``RunModel`` run stop after the model response that asks for tools."""

    record: ModelStepRecord = field(default_factory=ModelStepRecord)
    """What the run learned about its tools."""
    run_step: int = 0
    """The ``run_step`` a resumed run starts at: the turn's model responses so far (0: a new run's)."""
    plain_deferred: frozenset[str] = frozenset()
    """The turn's calls a plain run defers too (an approval, an external result): their events stay."""
    approved: frozenset[str] = frozenset()
    """Those of them that were approved (a plain resumed run validates their call again)."""
    resumed: bool = False
    """Whether the run resumes the turn's run state: its first step answers calls a plain run's step listed
    the tools for, so that listing runs no ``prepare`` (unless the run starts again at 0, as a plain run does)."""
    prompt: object = None
    """The turn's prompt a resumed run shows as ``ctx.prompt`` (``None`` after a call a plain run defers)."""
    tool_calls_limit: UsageLimits | None = None
    """The turn's limits, when they limit tool calls: checked where a plain run checks them (``before_node_run``)."""
    answered: bool = False
    """Whether a resumed run's first ``CallToolsNode``, the one answering the stored response, has run."""

    def get_ordering(self) -> CapabilityOrdering | None:
        """Return the outermost, wraps-everything ordering."""
        return OUTERMOST_WRAPPING_ALL

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        """Wrap the run's toolset so every function tool is deferred."""
        step = self.run_step if self.resumed and self.run_step > 0 else None
        return _RecordingToolset(
            toolset,
            tools=self.record.tools,
            defer=True,
            unprepared_step=step,
            answered_step=self.run_step if self.resumed else None,
            output_names=self.record.output_tool_names,
        )

    async def before_node_run(self, ctx: RunContext[Any], *, node: Any) -> Any:
        """Show listeners a plain run's events and ``run_step`` (`dex_agents.adapters.pydantic_ai._run_nodes`)."""
        continue_run_step(node, self.run_step, self.prompt)
        quiet_model_step_events(node, self.record.tools.kind, self.plain_deferred, self.approved)
        if Agent.is_call_tools_node(node):
            answering = self.resumed and not self.answered
            self.answered = True
            if not answering:
                self._check_tool_calls(ctx, node.model_response)
        return node

    def _check_tool_calls(self, ctx: RunContext[Any], response: ModelResponse) -> None:
        """Check the tool call limit for a new response's function calls before any event shows them.

        A plain run checks it there, for every call of the response to a function tool or to a tool it does
        not know (not its external or output tools' calls), before its calls run;
        the session's run defers those calls (they are external to it), so it would not.

        Raises:
            UsageLimitExceeded: the calls would exceed the limit (Pydantic AI's own check and message).
        """
        if self.tool_calls_limit is None:
            return
        functions = sum(1 for call in response.tool_calls if self._counted(call.tool_name))
        if functions:
            projected = copy_usage(ctx.usage)
            projected.tool_calls += functions
            self.tool_calls_limit.check_before_tool_call(projected)

    def _counted(self, tool_name: str) -> bool:
        """Whether a plain run counts a call to ``tool_name`` against the limit: a function or unknown tool's."""
        kind = self.record.tools.kind(tool_name)
        return kind == "function" or (kind is None and tool_name not in self.record.output_tool_names)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Offer the model (and every later hook) the tools as the agent defines them, not marked external."""
        parameters = request_context.model_request_parameters
        restored = [self.record.tools.original(tool_def) for tool_def in parameters.function_tools]
        if all(new is old for new, old in zip(restored, parameters.function_tools, strict=True)):
            return request_context
        return replace(request_context, model_request_parameters=replace(parameters, function_tools=restored))

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        """Drop the output tool call from a response that also asks for other tools (not under ``'early'``)."""
        names = {tool.name for tool in request_context.model_request_parameters.output_tools}
        self.record.output_tool_names.update(names)
        stripped = response if self.record.ends_early else without_output_calls(response, names)
        self.record.unstripped = None if stripped is response else response
        return stripped

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Opt out of agent specs."""
        return None


class DeltaSink(Protocol):
    """Where a model request's text and reasoning go: an `AgentEventWriter`, or a live run's switch."""

    def write_text_delta(self, text: str) -> None:
        """Write one text delta."""

    def write_reasoning_delta(self, text: str) -> None:
        """Write one reasoning delta."""


def forward_delta(events: DeltaSink, event: object) -> None:
    """Write a text or reasoning delta (or a part's first text) of a model stream as a live event."""
    match event:
        case PartStartEvent(part=TextPart(content=text)) | PartDeltaEvent(delta=TextPartDelta(content_delta=text)):
            if text:
                events.write_text_delta(text)
        case (
            PartStartEvent(part=ThinkingPart(content=text))
            | PartDeltaEvent(delta=ThinkingPartDelta(content_delta=text))
        ):
            if text:
                events.write_reasoning_delta(text)
        case _:
            pass


@dataclass
class StreamingModelStepCapability(ModelStepCapability):
    """`ModelStepCapability` for a run that streams anyway: deltas come from the run's events.

    Listening to the run's events makes Pydantic AI stream the whole run, so this is used only when the
    agent itself streams its runs (an event handler or an event hook); otherwise
    `dex_agents.adapters.pydantic_ai._streaming.DeltaForwardingCapability` streams the model request alone.
    """

    events: AgentEventWriter | None = None
    """Where the model's text and reasoning go as it streams."""

    @on_event(PartStartEvent, PartDeltaEvent)
    async def _stream_text(self, ctx: RunContext[Any], event: AgentStreamEvent) -> None:
        if self.events is not None:
            forward_delta(self.events, event)


@dataclass
class ToolStepCapability(AbstractCapability[Any]):
    """Ends a tool Step run right after its one tool call, before any model request.

    The call's tool gets the definition the model Step prepared and a `RunContext` with the turn's
    state (`dex_agents.adapters.pydantic_ai._tool_context`).
    """

    tools: ToolDefinitions = field(default_factory=ToolDefinitions)
    """The original definitions of the tools the run offered."""
    tool_name: str = ""
    """The tool the Step calls."""
    context: ToolStepContext = field(default_factory=ToolStepContext)
    """What the call's `RunContext` carries from the model Step."""

    def get_ordering(self) -> CapabilityOrdering | None:
        """Return the outermost, wraps-everything ordering."""
        return OUTERMOST_WRAPPING_ALL

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        """Wrap the run's toolset to record the tools' original definitions."""
        return _RecordingToolset(
            toolset,
            tools=self.tools,
            tool_name=self.tool_name,
            context=self.context,
            unprepared=self.context.prepared is not None,
        )

    async def before_tool_validate(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: RawToolArgs
    ) -> RawToolArgs:
        """Give the call's context the turn's state for its validation (`_RecordingToolset` for its call)."""
        if call.tool_name == self.tool_name:
            self.context.apply(ctx)
        return args

    async def before_node_run(self, ctx: RunContext[Any], *, node: Any) -> Any:
        """Show listeners none of the call's events: its model Steps show them."""
        silence_tool_step_events(node, self.context.run_step)
        return node

    async def after_node_run(self, ctx: RunContext[Any], *, node: Any, result: Any) -> Any:
        """Turn the model request that would follow the tool call into the run's end."""
        if Agent.is_call_tools_node(node) and Agent.is_model_request_node(result):
            return End(FinalResult(list(result.request.parts)))
        return result

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Opt out of agent specs."""
        return None


@dataclass
class RevealToolCapability(AbstractCapability[Any]):
    """Makes one ``defer_loading`` tool callable without a tool search in the run's history."""

    tool_name: str = ""
    """The tool to reveal."""

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        """Wrap the run's toolset to clear the tool's ``defer_loading``."""
        return _RevealingToolset(toolset, tool_name=self.tool_name)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Opt out of agent specs."""
        return None
