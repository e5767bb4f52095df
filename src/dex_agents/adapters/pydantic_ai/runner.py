"""`PydanticAIRunner`: the runner contract for a Pydantic AI agent.

The runner imports only the application's runner contract and the domain; it
knows nothing of Dex. Every outcome derives from its arguments alone (a live
run, below, only saves work), so any call may run again after a crash.

- `PydanticAIRunner.build_user_message`: one ``ModelRequest`` holding the
  prompt (see `dex_agents.adapters.pydantic_ai._history`).
- `PydanticAIRunner.run_model_step`: runs the agent with `ModelStepCapability`
  (every function tool external, output call stripped beside other calls),
  `DeltaForwardingCapability` (the run does not stream; each model request is
  served by the model's streaming API, its text and reasoning written as live
  events as they arrive; a model that cannot stream serves one request,
  replayed as one delta per part) and `ReinjectSystemPrompt` (unless the agent
  has its own). An agent whose runs stream anyway (an event handler or event
  listener) gets `StreamingModelStepCapability` and
  `NonStreamingFallbackCapability` instead: see
  `dex_agents.adapters.pydantic_ai._streaming`. The turn's first model call runs
  ``user_prompt=<turn text>`` over the replayed earlier turns; a later one
  resumes the run state with `DeferredToolResults` built from the final
  records (the values their tool Steps kept, so the model request is a plain
  run's: `dex_agents.adapters.pydantic_ai._results`), plus the user messages
  steered into the turn since then as the
  ``user_prompt`` (joined by blank lines), which Pydantic AI sends after the
  tool results in the same request. Tool retries count across the turn as in
  one plain run (`dex_agents.adapters.pydantic_ai._retries`); a call whose
  tool ran out of them in its Step fails the turn here with Pydantic AI's
  ``UnexpectedModelBehavior`` message (`TurnFailedError`), as the plain run
  raises it. A run that ends with `DeferredToolRequests`
  returns `ToolCallsRequested` (one call per requested call, in the order of
  the model response, each with its tool's retry count in the turn as its
  ``framework_state``: `dex_agents.adapters.pydantic_ai._tool_state`) with the
  run state; any other end returns
  `TurnCompleted` with the turn's messages. A run in which Pydantic AI
  answered a tool call that no Dex Step ran (other than its own ``retried``
  answers and output tool returns) fails the attempt with
  `RunnerContractError`. With live runs (``live_runs=True``, the default), a
  run that would end with `DeferredToolRequests` may instead wait inside the
  run for the next ``RunModel`` of its turn; when that Step lands on this
  runner with exactly the run state the run handed over, the run goes on with
  the same `DeferredToolResults` (one Pydantic AI run per turn, not per model
  Step); any other Step resumes the run state as above. Outcomes and run
  states are the same either way: see
  `dex_agents.adapters.pydantic_ai._live_runs` for the rules.
- `PydanticAIRunner.execute_deferred_tool_call`: for a plain function tool of
  a plain agent (no capabilities of its own, no other toolsets, not an approved
  call: `dex_agents.adapters.pydantic_ai._direct_tool` lists the rules), calls
  the tool through Pydantic AI's ``ToolManager`` with the context a run would
  give it, without an agent run (``direct_tool_calls=False`` turns this off).
  Otherwise, runs the agent over a
  history holding only the call (``ModelResponse([ToolCallPart])``) with
  `ToolStepCapability` and `RevealToolCapability`, the idempotency key in the
  run metadata, the session ID as ``conversation_id`` and, for an approved
  call, ``ToolApproved``; the run lists its tools without running
  ``prepare`` / ``prepare_tools`` again and the tool gets the definition fields
  the model Step's prepare produced (`dex_agents.adapters.pydantic_ai._capabilities`);
  see `dex_agents.adapters.pydantic_ai._results` for
  how the run's end maps to a result. Either way the tool sees its retry count
  in the turn (``ctx.retry``), Pydantic AI applies the tool's ``max_retries``,
  and what the tool gave Pydantic AI (the return part with its value,
  ``ToolReturn.content`` and ``metadata``; a ``retried`` or ``failed`` part)
  is kept as the result's ``framework_state``. A ``ModelRetry``, ``ToolFailed``
  or invalid arguments are `ToolExecutionError` (recorded ``failed``, never a
  Step retry); the model sees Pydantic AI's own answer when the run resumes.
- `PydanticAIRunner.reconcile_tool_call`: runs the reconcile probe a tool
  declared in its metadata (`dex_agents.adapters.pydantic_ai.reconcile`) with
  the call's arguments, idempotency key and the session's deps; ``unknown``
  for a tool without one.

Policies: `AgentTurnContext.resolve_tool_policy` with the framework effect
from the tool's original definition (MCP ``readOnlyHint`` → ``read``,
``idempotentHint`` → ``idempotent_write``, a ``tool-search`` tool → ``read``);
a tool declared ``requires_approval=True`` (original kind ``unapproved``) or a
call Pydantic AI routed to ``approvals`` always requires approval; a tool
whose metadata declares a reconcile probe is ``reconcilable``.
"""

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Generic, TypeVar, cast

import attrs
from pydantic import ValidationError
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved
from pydantic_ai.agent import AbstractAgent, AgentRunResult
from pydantic_ai.capabilities import AbstractCapability, ReinjectSystemPrompt
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ModelRetry,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RunUsage, UsageLimits

from dex_agents.adapters.pydantic_ai import _history
from dex_agents.adapters.pydantic_ai._agent_checks import (
    check_agent,
    has_reinject_system_prompt,
    lists_deferred_tool_requests,
    with_deferred_output,
)
from dex_agents.adapters.pydantic_ai._capabilities import (
    ModelStepCapability,
    ModelStepRecord,
    RevealToolCapability,
    StreamingModelStepCapability,
    ToolDefinitions,
    ToolStepCapability,
)
from dex_agents.adapters.pydantic_ai._compaction import (
    DEFAULT_TOOL_RESULT_BUDGET_CHARS,
    ModelSummaryCompactor,
    is_context_overflow,
    shorten_old_tool_results,
    summary_request,
)
from dex_agents.adapters.pydantic_ai._direct_tool import DirectToolCache
from dex_agents.adapters.pydantic_ai._live_runs import (
    Handoff,
    LiveRun,
    LiveRuns,
    live_runs_possible,
    run_message_index,
)
from dex_agents.adapters.pydantic_ai._results import (
    ASKED_FOR_APPROVAL,
    deferred_tool_results,
    kept_retries,
    ran_out_of_retries,
    tool_step_output,
    typed_call_ids,
)
from dex_agents.adapters.pydantic_ai._retries import (
    ExactReturnsCapability,
    ToolRetriesCapability,
    TurnRetriesCapability,
    turn_retries,
)
from dex_agents.adapters.pydantic_ai._return_types import ReturnTypes
from dex_agents.adapters.pydantic_ai._run_nodes import resumed_run_step
from dex_agents.adapters.pydantic_ai._streaming import (
    DeltaForwardingCapability,
    NonStreamingFallbackCapability,
    run_streams,
)
from dex_agents.adapters.pydantic_ai._tool_context import (
    PreparedFields,
    ToolStepContext,
    decode_context,
    encode_context,
    reads_run_messages,
)
from dex_agents.adapters.pydantic_ai._tool_state import ToolCallState
from dex_agents.adapters.pydantic_ai._usage import (
    agent_usage,
    check_tool_calls,
    copy_usage,
    limit_failure,
    model_step_limits,
    turn_usage,
    usage_since,
)
from dex_agents.adapters.pydantic_ai.idempotency import IDEMPOTENCY_KEY_METADATA_KEY
from dex_agents.adapters.pydantic_ai.reconcile import ReconcileCall, find_reconcile_probe, tool_has_probe
from dex_agents.application.compaction import CompactionSummary, HistoryCompactor
from dex_agents.application.runner import (
    AgentTurnContext,
    ContextOverflowError,
    DeferredToolExecution,
    ReconcileResult,
    ToolCallHistory,
    ToolExecutionResult,
    ToolResultDeferredError,
)
from dex_agents.domain.errors import RunnerContractError, ToolExecutionError
from dex_agents.domain.messages import AgentMessage, FrameworkMessage
from dex_agents.domain.tools import ToolCallStatus, ToolEffect
from dex_agents.domain.turns import AgentTurnOutcome, DeferredToolCall, ToolCallsRequested, TurnCompleted
from dex_agents.domain.usage import AgentUsage

DepsT = TypeVar("DepsT")

SEARCH_TOOLS_KIND = "tool-search"
"""The ``tool_kind`` of Pydantic AI's ``search_tools``."""


def framework_effect(definition: ToolDefinition | None) -> ToolEffect | None:
    """Return the effect a tool's definition implies, or ``None`` when it implies none."""
    if definition is None:
        return None
    if definition.tool_kind == SEARCH_TOOLS_KIND:
        return ToolEffect.READ
    annotations = (definition.metadata or {}).get("annotations")
    if isinstance(annotations, Mapping):
        if annotations.get("readOnlyHint") is True:
            return ToolEffect.READ
        if annotations.get("idempotentHint") is True:
            return ToolEffect.IDEMPOTENT_WRITE
    return None


def check_answered_calls(
    new_messages: Sequence[ModelMessage], supplied: frozenset[str], output_tool_names: set[str]
) -> None:
    """Fail when a run answered a tool call that no Dex Step ran.

    Pydantic AI's own ``retried`` answers (invalid arguments, unknown or
    unavailable tools) and output tool returns are not tool calls a Step runs.

    Raises:
        RunnerContractError: such an answer is in ``new_messages``.
    """
    for message in new_messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if (
                isinstance(part, ToolReturnPart)
                and part.outcome != "retried"
                and part.tool_call_id not in supplied
                and part.tool_name not in output_tool_names
            ):
                raise RunnerContractError(
                    f"Pydantic AI answered tool call {part.tool_call_id!r} ({part.tool_name!r}) that no Dex Step "
                    "ran; a capability that handles deferred tool calls itself (HandleDeferredToolCalls) "
                    "conflicts with Dex Steps"
                )


def requested_calls(output: DeferredToolRequests, turn_messages: Sequence[ModelMessage]) -> list[ToolCallPart]:
    """Return the deferred calls in the order of the model response that asked for them."""
    deferred = {call.tool_call_id: call for call in [*output.calls, *output.approvals]}
    last_response = next((m for m in reversed(turn_messages) if isinstance(m, ModelResponse)), None)
    parts = [] if last_response is None else last_response.parts
    ordered = [
        deferred.pop(part.tool_call_id)
        for part in parts
        if isinstance(part, ToolCallPart) and part.tool_call_id in deferred
    ]
    ordered.extend(deferred.values())
    return ordered


def _history_key(earlier: Sequence[AgentMessage], turn: AgentTurnContext) -> object:
    """What a live run's view of earlier turns depends on: their stored messages and the summary."""
    return (tuple(message.sequence for message in earlier), turn.summary)


def _continues(live: LiveRun, turn: AgentTurnContext, history_key: object) -> bool:
    """Whether ``turn``'s model Step may continue ``live`` (the last rule of `_live_runs`)."""
    return (
        live.waiting_here
        and turn.framework_run_state is not None
        and turn.framework_run_state == live.state
        and live.history_key == history_key
        and not turn.steered_messages
    )


def _reported(usage: RunUsage, mark: RunUsage) -> AgentUsage | None:
    """What a tool Step's run added to its usage since ``mark``, or ``None`` when nothing."""
    added = agent_usage(usage - mark)
    return None if added.is_zero else added


def _usage_of_last(turn_messages: Sequence[ModelMessage], responses: int) -> RunUsage:
    """The usage a run that made the last ``responses`` model requests of ``turn_messages`` has."""
    usage = RunUsage()
    answered = [message for message in turn_messages if isinstance(message, ModelResponse)]
    for response in answered[len(answered) - responses :] if responses else []:
        usage.incr(response.usage)
        usage.requests += 1
    return usage


def _ran_out_of_retries(error: UnexpectedModelBehavior, tool_name: str) -> bool:
    """Whether ``error`` is Pydantic AI giving up on the Step's own tool after its retries.

    A sub-agent's model error escaping the tool's body has the same class; it
    differs by naming another tool or having no ``ModelRetry`` (or validation error) cause.
    """
    return isinstance(error.__cause__, ModelRetry | ValidationError) and error.message.startswith(
        f"Tool {tool_name!r} exceeded max retries"
    )


class PydanticAIRunner(Generic[DepsT]):
    """Runs a Pydantic AI agent (an ``Agent`` or a ``WrapperAgent``) as a durable session's framework."""

    def __init__(
        self,
        agent: AbstractAgent[DepsT, Any],
        *,
        deps_factory: Callable[[str], DepsT | Awaitable[DepsT]] | None = None,
        model: Model | KnownModelName | str | None = None,
        compactor: HistoryCompactor | None = None,
        tool_result_budget_chars: int | None = DEFAULT_TOOL_RESULT_BUDGET_CHARS,
        direct_tool_calls: bool = True,
        live_runs: bool = True,
        usage_limits: UsageLimits | None = None,
    ) -> None:
        """Check the agent and keep what every run needs.

        Args:
            agent: the agent; its code stays unchanged.
            deps_factory: builds the agent's dependencies from the session ID
                before every model and tool Step (sync or async); may run many
                times per session, in parallel, and again after a crash.
            model: the model to run instead of the agent's own.
            compactor: how ``CompactHistory`` summarises history; by default
                one summarising request to the agent's own model (or ``model``).
            tool_result_budget_chars: characters of earlier turns' tool results
                the model reads whole, newest first; older ones are shortened
                in the model's view with a notice (stored history is unchanged).
                ``None``: never shorten.
            direct_tool_calls: let a tool Step call a plain function tool of a
                plain agent through Pydantic AI's tool manager instead of a whole
                agent run (same validation, retries and result; about 25 times
                less Worker CPU; see `dex_agents.adapters.pydantic_ai._direct_tool`).
                ``False``: every tool Step runs the agent.
            live_runs: let one agent run serve every model Step of a turn that lands on this
                runner while the run waits (same outcomes and run states; see
                `dex_agents.adapters.pydantic_ai._live_runs`). ``False``: every model Step is a new run.
            usage_limits: the limits of each turn, as ``agent.run(usage_limits=...)`` has them for a run,
                enforced across the turn's Steps (`dex_agents.adapters.pydantic_ai._usage`); a turn
                that reaches one fails with Pydantic AI's ``UsageLimitExceeded`` message. ``None``:
                Pydantic AI's default ``UsageLimits()`` (50 requests a turn), as ``agent.run`` without them.

        Raises:
            ValueError: the agent uses Pydantic AI durable execution, or has a
                capability ordering that conflicts with the runner's.
        """
        check_agent(agent)
        self._agent = agent
        self._deps_factory = deps_factory
        self._model = model
        # What every Step runs: the agent, or its copy that adds DeferredToolRequests to the output type.
        self._run_agent = with_deferred_output(agent)
        self._output_type: list[object] | None = (
            None
            if lists_deferred_tool_requests(self._run_agent.output_type)
            else [agent.output_type, DeferredToolRequests]
        )
        self._reinject_system_prompt = not has_reinject_system_prompt(agent)
        self._compactor = compactor
        if tool_result_budget_chars is not None and tool_result_budget_chars < 0:
            raise ValueError(f"tool_result_budget_chars must not be negative, got {tool_result_budget_chars!r}")
        self._tool_result_budget_chars = tool_result_budget_chars
        self._direct_tools = DirectToolCache(agent, model) if direct_tool_calls else None
        self._return_types = ReturnTypes(agent)
        self._live = LiveRuns() if live_runs else None
        self._usage_limits = UsageLimits() if usage_limits is None else usage_limits

    @property
    def agent(self) -> AbstractAgent[DepsT, Any]:
        """The agent this runner runs."""
        return self._agent

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a ``ModelRequest`` holding ``text`` as the user prompt (role ``user``)."""
        return _history.user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Run the agent up to the end of one model response that asks for tools, or to its output.

        With live runs on, the turn's run may stay alive in this runner between its model Steps and
        serve the next one: see `dex_agents.adapters.pydantic_ai._live_runs`.
        """
        earlier = [message for message in turn.messages if message.turn_id != turn.turn_id]
        history_key = _history_key(earlier, turn)
        live_possible = self._live is not None and live_runs_possible(self._agent)
        if self._live is not None:
            live = self._live.take((turn.flow_id, turn.turn_id))
            if live is not None:
                answers = None
                if live_possible and _continues(live, turn, history_key):
                    try:
                        # Built as for any model Step (the factory's contract); the live run reads no deps.
                        await self._deps(turn.flow_id)
                        answers = deferred_tool_results(
                            live.tool_call_ids,
                            turn.tool_calls,
                            typed=typed_call_ids(live.turn_base),
                            restore=self._return_types.restore,
                        )
                    except BaseException:
                        live.abandon()
                        raise
                # A denial reads differently inside a run than at a resumed run's start, and a retry
                # answered inside a run lacks its retry count: resume those.
                if answers is None or answers.approvals or kept_retries(live.tool_call_ids, turn.tool_calls):
                    live.abandon()
                else:
                    # The tool Steps' usage joins the run's (ResumeTurn reported it: not again here).
                    used = turn_usage(None, turn.tool_calls, live.tool_call_ids)
                    live.run_usage.incr(used)
                    live.usage_mark.incr(used)
                    live.resume(answers, turn.events)
                    return await self._live_stop(live, turn)
        opening = self._opening_message(turn)
        prompt = _history.turn_prompt(opening, turn.flow_id)
        history = _history.replay(earlier, turn.flow_id)
        if self._tool_result_budget_chars is not None:
            shorten_old_tool_results(history, budget_chars=self._tool_result_budget_chars)
        if turn.summary is not None:
            history.insert(0, summary_request(turn.summary))
        record = ModelStepRecord()
        live = None
        if live_possible:
            # A plain agent (what live runs need) never streams its runs: no StreamingModelStepCapability here.
            live = LiveRun((turn.flow_id, turn.turn_id), history_key, base=0, turn_base=[])  # set below
            live.deltas.target = turn.events
            live.record = record
            capabilities: list[AbstractCapability[Any]] = [
                live.capability(),
                DeltaForwardingCapability(events=live.deltas),
            ]
        elif run_streams(self._agent):
            capabilities = [
                StreamingModelStepCapability(events=turn.events, record=record),
                NonStreamingFallbackCapability(),
            ]
        else:
            capabilities = [ModelStepCapability(record=record), DeltaForwardingCapability(events=turn.events)]
        step_capability = capabilities[0]
        assert isinstance(step_capability, ModelStepCapability)
        if self._reinject_system_prompt:
            capabilities.append(ReinjectSystemPrompt())
        deps = await self._deps(turn.flow_id)
        if turn.framework_run_state is None:
            earlier_turn_messages: list[ModelMessage] = []
            supplied: frozenset[str] = frozenset()
            results: DeferredToolResults | None = None
            user_prompt: _history.UserPrompt | None = prompt
            usage = RunUsage()
        else:
            state = _history.RunState.decode(turn.framework_run_state)
            earlier_turn_messages = list(state.messages)
            supplied = frozenset(state.tool_call_ids)
            usage = turn_usage(state.usage, turn.tool_calls, state.tool_call_ids)
            results = deferred_tool_results(
                state.tool_call_ids,
                turn.tool_calls,
                typed=typed_call_ids(earlier_turn_messages),
                restore=self._return_types.restore,
            )
            # The calls a plain run defers too: it ends there, and the user's resumed run starts again.
            plain_deferred = frozenset(
                call_id
                for call_id, call in turn.tool_calls.items()
                if call.interrupt_id is not None or call.has_external_result
            )
            step_capability.plain_deferred = plain_deferred
            step_capability.approved = frozenset(
                call_id
                for call_id, call in turn.tool_calls.items()
                if call.interrupt_id is not None
                and call.status not in (ToolCallStatus.REJECTED, ToolCallStatus.EXPIRED)
            )
            step_capability.run_step = resumed_run_step(earlier_turn_messages, plain_deferred)
            step_capability.resumed = True
            retried = kept_retries(state.tool_call_ids, turn.tool_calls)
            if retried:
                capabilities.append(ExactReturnsCapability(parts=retried))
            if retried or turn_retries(earlier_turn_messages):
                # A fresh run counts tool retries from zero: give it the turn's.
                capabilities.append(TurnRetriesCapability(turn_start=run_message_index(history)))
            # Steered messages go after the tool results, in the same request (Pydantic AI's
            # CallToolsNode appends a user prompt given with deferred results after the returns).
            steered = [message.text for message in turn.steered_messages]
            user_prompt = "\n\n".join(steered) if steered else None

        mark = copy_usage(usage)
        limits = model_step_limits(self._usage_limits)

        def run() -> Awaitable[AgentRunResult[Any]]:
            return self._run_agent.run(
                user_prompt,
                message_history=[*history, *earlier_turn_messages],
                deferred_tool_results=results,
                output_type=self._output_type,
                deps=cast(DepsT, deps),
                model=self._model,
                conversation_id=turn.flow_id,
                capabilities=capabilities,
                usage=usage,
                usage_limits=limits,
            )

        if live is not None:
            live.base = run_message_index([*history, *earlier_turn_messages])
            live.opening = list(earlier_turn_messages)
            live.turn_base = list(earlier_turn_messages)
            live.turn_length = len(earlier_turn_messages)
            live.supplied = supplied
            live.prompt = prompt
            live.run_usage = usage
            live.usage_mark = mark
            live.start(run)
            return await self._live_stop(live, turn)
        try:
            result = await run()
        except UsageLimitExceeded as error:
            raise limit_failure(error, usage_since(usage, mark)) from error
        except Exception as error:
            if is_context_overflow(error):
                raise ContextOverflowError(str(error)) from error
            raise
        new_messages = result.new_messages()
        check_answered_calls(new_messages, supplied, record.output_tool_names)
        output: object = result.output
        return self._outcome(output, [*earlier_turn_messages, *new_messages], result.usage, mark, turn, record, prompt)

    async def _live_stop(self, live: LiveRun, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Wait for the live run's next stop and answer the Step as the durable path would."""
        try:
            stop = await live.next_stop()
        except UsageLimitExceeded as error:
            raise limit_failure(error, usage_since(live.run_usage, live.usage_mark)) from error
        except Exception as error:
            if is_context_overflow(error):
                raise ContextOverflowError(str(error)) from error
            raise
        if isinstance(stop, Handoff):
            turn_messages = [*live.opening, *stop.messages[live.base :]]
            output: object = stop.requests
            usage = stop.usage
        else:
            turn_messages = [*live.opening, *stop.new_messages()]
            output = stop.output
            usage = stop.usage
        try:
            check_answered_calls(turn_messages[live.turn_length :], live.supplied, live.record.output_tool_names)
            outcome = self._outcome(output, turn_messages, usage, live.usage_mark, turn, live.record, live.prompt)
        except BaseException:
            live.abandon()  # a run waiting at a handoff nobody keeps would wait for ever
            raise
        if isinstance(stop, Handoff) and isinstance(outcome, ToolCallsRequested) and self._live is not None:
            live.state = outcome.framework_run_state
            live.tool_call_ids = tuple(call.tool_call_id for call in outcome.tool_calls)
            live.supplied = frozenset(live.tool_call_ids)
            live.turn_base = list(turn_messages)
            live.turn_length = len(turn_messages)
            live.usage_mark = copy_usage(usage)
            self._live.keep(live)
        return outcome

    def _outcome(
        self,
        output: object,
        turn_messages: list[ModelMessage],
        run_usage: RunUsage,
        mark: RunUsage,
        turn: AgentTurnContext,
        record: ModelStepRecord,
        prompt: _history.UserPrompt,
    ) -> AgentTurnOutcome:
        """The Step's outcome; ``run_usage`` is the turn's usage now, ``mark`` what earlier Steps reported of it.

        Raises:
            TurnFailedError: the requested calls would pass the tool call limit.
        """
        usage = usage_since(run_usage, mark)
        if isinstance(output, DeferredToolRequests):
            calls = requested_calls(output, turn_messages)
            check_tool_calls(self._usage_limits, run_usage, len(calls), step_usage=usage)
            approvals = frozenset(call.tool_call_id for call in output.approvals)
            # The context of the plain run that runs these calls: a plain run ends at a response with a
            # call it defers (approval, external result), and the user's resumed run has no prompt and
            # counts its steps from 0 (as `resumed_run_step` does for the model Steps).
            plain_deferred = frozenset(
                call_id
                for call_id, record_of in turn.tool_calls.items()
                if record_of.interrupt_id is not None or record_of.has_external_result
            )
            run_step = resumed_run_step(turn_messages, plain_deferred)
            restarted = run_step < sum(isinstance(message, ModelResponse) for message in turn_messages)
            context = ToolStepContext(
                prompt=None if restarted else prompt,
                run_step=run_step,
                usage=_usage_of_last(turn_messages, run_step) if restarted else copy_usage(run_usage),
            )
            retries = turn_retries(turn_messages)
            return ToolCallsRequested(
                framework_run_state=_history.RunState(
                    messages=turn_messages,
                    tool_call_ids=[call.tool_call_id for call in calls],
                    usage=copy_usage(run_usage),
                ).encode(),
                tool_calls=[self._deferred_call(call, turn, record, approvals, context, retries) for call in calls],
                usage=usage,
            )
        if turn_messages and _history.is_bare_prompt(turn_messages[0], prompt):
            turn_messages = turn_messages[1:]
        return TurnCompleted(new_messages=[_history.framework_message(m) for m in turn_messages], usage=usage)

    async def compact(self, messages: Sequence[AgentMessage], previous_summary: str | None) -> CompactionSummary | str:
        """Summarise history for ``CompactHistory``: the custom compactor, else one request to the agent's model.

        Raises:
            RunnerContractError: neither the runner nor the agent names a model.
        """
        if self._compactor is not None:
            return await self._compactor.compact(messages, previous_summary)
        model = self._model if self._model is not None else self._agent.model
        if model is None:
            raise RunnerContractError("the agent has no model to summarise with; pass model= or compactor=")
        return await ModelSummaryCompactor(model).compact(messages, previous_summary)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run one tool call, directly or through the agent, stopping before any model request.

        Directly (Pydantic AI's tool manager, no agent run) when nothing but the tool could take part in
        the run: see `dex_agents.adapters.pydantic_ai._direct_tool`. The tool's `RunContext` carries the
        turn's state the model Step handed on (`dex_agents.adapters.pydantic_ai._tool_context`) and its
        retry count in the turn (`dex_agents.adapters.pydantic_ai._retries`); what it gave Pydantic AI is
        kept as a value in the result's ``framework_state`` (`dex_agents.adapters.pydantic_ai._results`).
        The result (or the `ToolExecutionError`) carries what the run added to its usage: the tool's own
        call, and the model calls of agent runs inside the tool that share ``ctx.usage``.
        """
        context = decode_context(call.tool_call.framework_state) or ToolStepContext()
        if call.history is not None:
            context = replace(context, messages=self._run_messages(call.history, call.flow_id, call.turn_id))
        usage = context.fresh_usage()
        mark = copy_usage(usage)
        try:
            result = await self._tool_step(call, usage, context)
        except ToolExecutionError as error:
            if error.usage is None:
                error.usage = _reported(usage, mark)
            raise
        return attrs.evolve(result, usage=_reported(usage, mark))

    async def _tool_step(
        self, call: DeferredToolExecution, usage: RunUsage, context: ToolStepContext
    ) -> ToolExecutionResult:
        record = call.tool_call
        state = ToolCallState.decode(record.framework_state)
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
        try:
            if direct is not None:
                parts = await direct.call(
                    part,
                    deps=deps,
                    conversation_id=call.flow_id,
                    metadata={IDEMPOTENCY_KEY_METADATA_KEY: call.idempotency_key},
                    usage=usage,
                    context=replace(context, retries=state.retries),
                )
                return tool_step_output(parts, record, tools, state)
            result = await self._run_agent.run(
                None,
                message_history=[ModelResponse(parts=[part])],
                deferred_tool_results=(
                    DeferredToolResults(approvals={record.tool_call_id: ToolApproved()}) if approved else None
                ),
                output_type=self._output_type,
                deps=cast(DepsT, deps),
                model=self._model,
                conversation_id=call.flow_id,
                metadata={IDEMPOTENCY_KEY_METADATA_KEY: call.idempotency_key},
                capabilities=[
                    ToolStepCapability(tools=tools, tool_name=record.tool_name, context=context),
                    RevealToolCapability(tool_name=record.tool_name),
                    ToolRetriesCapability(retries={record.tool_name: state.retries} if state.retries else {}),
                ],
                usage=usage,
            )
        except ApprovalRequired as error:
            raise ToolExecutionError(ASKED_FOR_APPROVAL) from error
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

    async def reconcile_tool_call(self, call: DeferredToolExecution) -> ReconcileResult:
        """Run the tool's reconcile probe (declared in its metadata); ``unknown`` when it has none."""
        record = call.tool_call
        probe = find_reconcile_probe(self._agent, record.tool_name)
        if probe is None:
            return ReconcileResult.unknown()
        try:
            loaded = json.loads(record.arguments)
        except ValueError:
            loaded = None
        arguments: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
        deps = await self._deps(call.flow_id)
        return await probe(
            ReconcileCall(
                session_id=call.flow_id,
                tool_name=record.tool_name,
                arguments=arguments,
                idempotency_key=call.idempotency_key,
                deps=deps,
            )
        )

    def _opening_message(self, turn: AgentTurnContext) -> AgentMessage:
        for message in turn.messages:
            if message.turn_id == turn.turn_id:
                return message
        raise RunnerContractError(f"turn {turn.turn_id!r} has no stored user message")

    def _deferred_call(
        self,
        call: ToolCallPart,
        turn: AgentTurnContext,
        record: ModelStepRecord,
        approvals: frozenset[str],
        context: ToolStepContext,
        retries: Mapping[str, int],
    ) -> DeferredToolCall:
        definition = record.tools.by_name.get(call.tool_name)
        if definition is not None:
            context = replace(context, prepared=PreparedFields.of(definition))
        if definition is None and call.tool_kind == SEARCH_TOOLS_KIND:
            effect: ToolEffect | None = ToolEffect.READ
        else:
            effect = framework_effect(definition)
        policy = turn.resolve_tool_policy(call.tool_name, effect)
        asks_approval = call.tool_call_id in approvals or (definition is not None and definition.kind == "unapproved")
        if asks_approval and policy.requires_approval is not True:
            policy = attrs.evolve(policy, requires_approval=True)
        if policy.requires_approval is True or (definition is not None and definition.kind == "external"):
            # A call a plain run defers runs in the user's resumed run: a new run's context.
            context = ToolStepContext(prepared=context.prepared, run_step=0)
        elif definition is not None and definition.kind == "external" and policy.requires_approval is None:
            # Nothing runs here: the result comes from outside, which is the answer a person gives.
            policy = attrs.evolve(policy, requires_approval=False)
        if tool_has_probe(definition) and not policy.reconcilable:
            policy = attrs.evolve(policy, reconcilable=True)
        return DeferredToolCall(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            arguments=call.args_as_json_str(),
            policy=policy,
            framework_state=encode_context(context, ToolCallState(retries=retries.get(call.tool_name, 0)).encode()),
            sequential=definition is not None and definition.sequential,
            external=definition is not None and definition.kind == "external",
            reads_history=reads_run_messages(definition),
        )

    async def _deps(self, session_id: str) -> object:
        if self._deps_factory is None:
            return None
        deps = self._deps_factory(session_id)
        if inspect.isawaitable(deps):
            return await deps
        return deps
