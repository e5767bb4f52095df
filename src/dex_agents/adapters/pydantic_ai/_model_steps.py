"""The model Step of `PydanticAIRunner`: one agent run up to a model response that asks for tools, or to the output.

See `PydanticAIRunner.run_model_step` for the contract and `dex_agents.adapters.pydantic_ai._live_runs` for live runs.
"""

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
from pydantic_ai import DeferredToolResults
from pydantic_ai.agent import AbstractAgent, AgentRunResult
from pydantic_ai.capabilities import AbstractCapability, ReinjectSystemPrompt
from pydantic_ai.exceptions import (
    UsageLimitExceeded,
)
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.usage import RunUsage, UsageLimits

from dex_agents.adapters.pydantic_ai import _history
from dex_agents.adapters.pydantic_ai._agent_checks import has_system_prompt
from dex_agents.adapters.pydantic_ai._capabilities import (
    ModelStepCapability,
    ModelStepRecord,
    StreamingModelStepCapability,
)
from dex_agents.adapters.pydantic_ai._compaction import (
    is_context_overflow,
    shorten_old_tool_results,
    summary_request,
)
from dex_agents.adapters.pydantic_ai._live_runs import (
    Handoff,
    LiveRun,
    LiveRuns,
    live_runs_possible,
    run_message_index,
)
from dex_agents.adapters.pydantic_ai._outcomes import StepRun, check_answered_calls, step_outcome
from dex_agents.adapters.pydantic_ai._results import (
    deferred_tool_results,
    kept_retries,
    typed_call_ids,
)
from dex_agents.adapters.pydantic_ai._retries import (
    ExactReturnsCapability,
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
from dex_agents.adapters.pydantic_ai._usage import (
    copy_usage,
    limit_failure,
    model_step_limits,
    turn_usage,
    usage_since,
)
from dex_agents.application.runner import (
    AgentTurnContext,
    ContextOverflowError,
)
from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.tools import ToolCallStatus
from dex_agents.domain.turns import AgentTurnOutcome, ToolCallsRequested


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


@attrs.define
class ModelSteps:
    """Runs the model Steps of one runner's agent (and keeps its live runs)."""

    _agent: AbstractAgent[Any, Any]
    _run_agent: AbstractAgent[Any, Any]
    _output_type: list[object] | None
    _model: Model | KnownModelName | str | None
    _reinject_system_prompt: bool
    _tool_result_budget_chars: int | None
    _return_types: ReturnTypes
    _live: LiveRuns | None
    _usage_limits: UsageLimits
    _deps: Callable[[str], Awaitable[object]]
    _ends_early: bool
    """Whether the agent's ``end_strategy`` is ``'early'`` (`ModelStepRecord.ends_early`)."""

    async def run(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Run the agent up to the end of one model response that asks for tools, or to its output.

        With live runs on, the turn's run may stay alive in this runner between its model Steps and
        serve the next one: see `dex_agents.adapters.pydantic_ai._live_runs`.
        """
        earlier = [message for message in turn.messages if message.turn_id != turn.turn_id]
        history_key = _history_key(earlier, turn)
        live_possible = self._live is not None and live_runs_possible(self._agent)
        if self._live is not None:
            continued = await self._continue_live(turn, history_key, live_possible=live_possible)
            if continued is not None:
                return continued
        opening = self._opening_message(turn)
        prompt = _history.turn_prompt(opening, turn.flow_id)
        history = _history.replay(earlier, turn.flow_id)
        if self._tool_result_budget_chars is not None:
            shorten_old_tool_results(history, budget_chars=self._tool_result_budget_chars)
        if turn.summary is not None:
            history.insert(0, summary_request(turn.summary))
        record = ModelStepRecord(ends_early=self._ends_early)
        live, capabilities = self._step_capabilities(turn, record, history_key, live_possible=live_possible)
        step_capability = capabilities[0]
        assert isinstance(step_capability, ModelStepCapability)
        if self._reinject_system_prompt and has_system_prompt(self._run_agent):
            capabilities.append(ReinjectSystemPrompt())
        deps = await self._deps(turn.flow_id)
        if turn.framework_run_state is None:
            earlier_turn_messages: list[ModelMessage] = []
            supplied: frozenset[str] = frozenset()
            results: DeferredToolResults | None = None
            user_prompt: _history.UserPrompt | None = prompt
            usage = RunUsage()
        else:
            earlier_turn_messages, supplied, results, user_prompt, usage = self._resumed(
                turn, turn.framework_run_state, step_capability, capabilities, history
            )
            # A plain run's context shows the turn's prompt, unless it started again after a call it deferred.
            responses = sum(isinstance(message, ModelResponse) for message in earlier_turn_messages)
            step_capability.prompt = prompt if step_capability.run_step == responses else None

        mark = copy_usage(usage)
        limits = model_step_limits(self._usage_limits)

        def run() -> Awaitable[AgentRunResult[Any]]:
            return self._run_agent.run(
                user_prompt,
                message_history=[*history, *earlier_turn_messages],
                deferred_tool_results=results,
                output_type=self._output_type,
                deps=deps,
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
        return step_outcome(
            output,
            [*earlier_turn_messages, *new_messages],
            result.usage,
            mark,
            StepRun(turn, record, prompt, self._usage_limits),
        )

    def _resumed(
        self,
        turn: AgentTurnContext,
        run_state: str,
        step_capability: ModelStepCapability,
        capabilities: list[AbstractCapability[Any]],
        history: list[ModelMessage],
    ) -> tuple[list[ModelMessage], frozenset[str], DeferredToolResults, _history.UserPrompt | None, RunUsage]:
        """Resume ``run_state``: the turn's messages, answered calls, their results, the steered prompt, the usage.

        Sets up ``step_capability`` for a resumed run and adds the retry capabilities it needs to ``capabilities``.
        """
        state = _history.RunState.decode(run_state)
        earlier_turn_messages = list(state.messages)
        supplied = frozenset(state.tool_call_ids) | frozenset(state.output_call_ids)
        usage = turn_usage(state.usage, turn.tool_calls, state.tool_call_ids)
        results = deferred_tool_results(
            state.tool_call_ids,
            turn.tool_calls,
            typed=typed_call_ids(earlier_turn_messages),
            restore=self._return_types.restore,
        )
        # An output the model gave beside the calls: listed, the resumed run processes it (its entry's
        # value is not read) with the calls' results and ends with it, without another model request.
        results.calls.update(dict.fromkeys(state.output_call_ids))
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
            if call.interrupt_id is not None and call.status not in (ToolCallStatus.REJECTED, ToolCallStatus.EXPIRED)
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
        return earlier_turn_messages, supplied, results, user_prompt, usage

    def _step_capabilities(
        self, turn: AgentTurnContext, record: ModelStepRecord, history_key: object, *, live_possible: bool
    ) -> tuple[LiveRun | None, list[AbstractCapability[Any]]]:
        """The run's model Step capabilities (the first one a `ModelStepCapability`), and its live run if any."""
        live = None
        if live_possible:
            # A plain agent (what live runs need) never streams its runs: no StreamingModelStepCapability here,
            # and the live capability forwards the deltas itself (one capability layer rather than two).
            live = LiveRun((turn.flow_id, turn.turn_id), history_key, base=0, turn_base=[])  # set below
            live.deltas.target = turn.events
            live.record = record
            capabilities: list[AbstractCapability[Any]] = [live.capability()]
        elif run_streams(self._agent):
            capabilities = [
                StreamingModelStepCapability(events=turn.events, record=record),
                NonStreamingFallbackCapability(),
            ]
        else:
            capabilities = [ModelStepCapability(record=record), DeltaForwardingCapability(events=turn.events)]
        step = capabilities[0]
        if isinstance(step, ModelStepCapability) and self._usage_limits.tool_calls_limit is not None:
            step.tool_calls_limit = self._usage_limits
        return live, capabilities

    async def _continue_live(
        self, turn: AgentTurnContext, history_key: object, *, live_possible: bool
    ) -> AgentTurnOutcome | None:
        """Serve the Step with the turn's live run when it may continue it; ``None``: resume the run state."""
        assert self._live is not None
        live = self._live.take((turn.flow_id, turn.turn_id))
        if live is None:
            return None
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
            # The tool Steps' usage joins the run's (ResumeTurn or a lone call's Step counted it: not again here).
            used = turn_usage(None, turn.tool_calls, live.tool_call_ids)
            live.run_usage.incr(used)
            live.usage_mark.incr(used)
            live.resume(answers, turn.events)
            return await self._live_stop(live, turn)
        return None

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
            outcome = step_outcome(
                output,
                turn_messages,
                usage,
                live.usage_mark,
                StepRun(turn, live.record, live.prompt, self._usage_limits),
            )
        except BaseException:
            live.abandon()  # a run waiting at a handoff nobody keeps would wait for ever
            raise
        if isinstance(stop, Handoff) and isinstance(outcome, ToolCallsRequested) and self._live is not None:
            if live.record.unstripped is not None:
                # The run got the response without its output (`ModelStepRecord.unstripped`): a resumed
                # run answers the calls and processes that output.
                live.abandon()
                return outcome
            live.state = outcome.framework_run_state
            live.tool_call_ids = tuple(call.tool_call_id for call in outcome.tool_calls)
            live.supplied = frozenset(live.tool_call_ids)
            live.turn_base = list(turn_messages)
            live.turn_length = len(turn_messages)
            live.usage_mark = copy_usage(usage)
            self._live.keep(live)
        return outcome

    def _opening_message(self, turn: AgentTurnContext) -> AgentMessage:
        for message in turn.messages:
            if message.turn_id == turn.turn_id:
                return message
        raise RunnerContractError(f"turn {turn.turn_id!r} has no stored user message")
