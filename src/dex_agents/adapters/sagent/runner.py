"""`SagentRunner`: the runner contract for a sagent agent.

The runner imports only the application's runner contract and compaction port and the domain; it
knows nothing of Dex. It is stateless between calls: every model and tool
Step builds a fresh ``Agent`` from the factory (sagent agents hold mutable
per-conversation state: runtime tape, cost tracker, ``ToolState``, background
registry), so nothing is shared across sessions or concurrent Steps.

- `SagentRunner.build_user_message`: one ``UserMessage``
  (`dex_agents.adapters.sagent._codec`).
- `SagentRunner.run_model_step`: the history is the summary, if any (one
  ``UserMessage``, `summary_message`), the model's window (``turn.messages``) plus the
  turn's entries so far (the run state), followed by one ``ToolResult`` per
  answered call, built from its final record (`tool_result`), then one
  ``UserMessage`` per message steered into the turn since its last model call
  (`AgentTurnContext.steered_messages`, oldest first; a ``RunModel`` that hands
  out a later wave keeps them in the run state until the model call after the
  last wave). They stay in the turn's entries, so the turn stores them where
  the model saw them, as ``user`` messages. One model request through the
  public rich ``Model`` protocol: ``ModelRequest(history, agent.system_prompt(),
  agent.live_tools(), agent.max_response_tokens)`` through sagent's
  ``materialize_request`` (tool-result budget, adjacent user entries merged),
  sent once with ``model.stream(request, publish)``: text and thinking
  partials become ``text_delta`` and ``reasoning_delta`` events. No sagent
  retry loop runs: Dex retries ``RunModel``. A failed request raises
  `SagentModelError`, whose ``retryable`` is sagent's own classification
  (``sagent.agent.retry.is_retryable``; a response ``validate_model_response``
  refuses is retryable when it is a ``StreamInterruptedError``). A response
  with tool calls returns `ToolCallsRequested` with the first wave of its calls
  (`dex_agents.adapters.sagent._effects`); the following ``RunModel`` hands out
  the next wave without a model call, until every call is answered. A
  response without tool calls returns `TurnCompleted` with the turn's entries.
  A request the provider refuses as too long (`is_context_overflow`) raises
  `ContextOverflowError`: the session compacts and retries once.
- `SagentRunner.compact` (the `HistoryCompactor` port): sagent's own
  ``Compactor`` (the agent's, else ``SummaryCompactor()``) over the previous
  summary and the covered entries; the splice's payload, rendered as text
  (`render_payload`), is the new summary. A fallback splice raises
  `SagentCompactionError`.
- `SagentRunner.execute_deferred_tool_call`: the agent's own tool object
  (``agent.tools_map[name]``), its arguments checked by sagent's
  ``validate_tool_input`` against its ``directive_schema``, run with sagent's
  context variables set to this Step's agent and a ``ToolState`` restored from
  the call's record (never sagent's process-global fallback). A result is
  returned as its ``content`` with the ended tool state; an invalid call, an
  unknown tool or a result with ``is_error`` raises `ToolExecutionError` (the
  model sees it as a tool error, the call is recorded ``failed``); any
  exception the tool raises fails the Step (a read is retried). Inside the
  tool, `deferred_tool_idempotency_key()` is the call's idempotency key.

The values it maps between sagent and the session (summary, usage, run state,
tool results) are in `dex_agents.adapters.sagent._mapping`.

Usage: ``ModelResponse.tokens`` (a ``TokenCount``) gives ``input_tokens``
(``prompt``: uncached, cache writes and cache reads), ``output_tokens``
(``response``) and ``cached_input_tokens`` (``cache_read``); ``spend`` gives
``cost_usd``. sagent has no reasoning-token count.
"""

import json
from collections.abc import Callable, Sequence
from typing import Any, cast

import attrs
from sagent.agent.agent import Agent
from sagent.agent.retry import is_retryable, validate_model_response
from sagent.agent.runtime import current_call_id_var
from sagent.agent.state import ToolState, current_agent_var, tool_state_context
from sagent.compaction.summary import SummaryCompactor
from sagent.lib.tool_validation import validate_tool_input
from sagent.request_materialization import materialize_request
from sagent.types.compactor import Compactor
from sagent.types.model import Model, ModelRequest, ModelResponse, StreamInterruptedError
from sagent.types.runtime import (
    AssistantMessage,
    ModelResponsePartial,
    ModelResponseThinking,
    RuntimeEvent,
    ToolResultKind,
    UserMessage,
)
from sagent.types.tape import TapeRef

from dex_agents.adapters.sagent import _codec, _effects
from dex_agents.adapters.sagent._mapping import NOT_APPROVED as NOT_APPROVED
from dex_agents.adapters.sagent._mapping import TOOL_STATE_LINE as TOOL_STATE_LINE
from dex_agents.adapters.sagent._mapping import MeteredModel, serialize_keys
from dex_agents.adapters.sagent._mapping import RunState as RunState
from dex_agents.adapters.sagent._mapping import agent_usage as agent_usage
from dex_agents.adapters.sagent._mapping import is_context_overflow as is_context_overflow
from dex_agents.adapters.sagent._mapping import render_payload as render_payload
from dex_agents.adapters.sagent._mapping import split_summary as split_summary
from dex_agents.adapters.sagent._mapping import summary_message as summary_message
from dex_agents.adapters.sagent._mapping import tool_result as tool_result
from dex_agents.adapters.sagent.idempotency import IDEMPOTENCY_KEY
from dex_agents.application.compaction import CompactionSummary
from dex_agents.application.runner import (
    AgentTurnContext,
    ContextOverflowError,
    DeferredToolExecution,
    ToolExecutionResult,
)
from dex_agents.domain.errors import DexAgentsError, RunnerContractError, ToolExecutionError
from dex_agents.domain.messages import AgentMessage, FrameworkMessage
from dex_agents.domain.tools import AgentToolCall
from dex_agents.domain.turns import (
    AgentTurnOutcome,
    DeferredToolCall,
    ToolCallsRequested,
    TurnCompleted,
    validate_tool_call_id,
)
from dex_agents.domain.usage import AgentUsage

AgentFactory = Callable[[], Agent]
"""Builds a fresh sagent ``Agent``; called once per model and tool Step."""

IN_PROCESS_TOOLS = frozenset({"AgentSpawn", "AgentSend", "AgentSelf", "BackgroundTask"})
"""sagent tools that live on in-process agents and asyncio tasks: not durable, refused."""


class SagentModelError(DexAgentsError):
    """A sagent model request failed; the ``RunModel`` attempt fails with it."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(f"{message} [sagent: {'retryable' if retryable else 'not retryable'}]")
        self.retryable = retryable
        """sagent's classification: a transient error (rate limit, overload, cut stream) or a fatal one."""


class BackgroundResultError(DexAgentsError):
    """A tool answered with a non-final (background) result in its Step: a Step failure."""


class SagentCompactionError(DexAgentsError):
    """sagent's Compactor gave no summary (its fallback splice): the ``CompactHistory`` attempt fails.

    The session's failure route then leaves the history as it was.
    """


COMPACTION_SESSION = "dex-agents-compaction"
"""The tape namespace of the refs a compaction mints (the splice itself is never stored)."""


class SagentRunner:
    """Runs a sagent agent, built fresh by ``agent_factory`` for every Step, as a durable session's framework."""

    def __init__(self, agent_factory: AgentFactory) -> None:
        """Check one agent from the factory and keep the factory.

        Raises:
            ValueError: the agent has a tool that lives on in-process agents or
                tasks (``AgentSpawn``, ``AgentSend``, ``AgentSelf``,
                ``BackgroundTask``), or a ``session_dir`` (a session file per Step).
        """
        self._factory = agent_factory
        agent = self._agent()
        refused = sorted(type(tool).__name__ for tool in agent.tools if type(tool).__name__ in IN_PROCESS_TOOLS)
        if refused:
            raise ValueError(
                f"sagent tools {refused} run on in-process agents or asyncio tasks, which a durable session "
                "cannot carry; build the agent without them"
            )
        if agent.session_dir is not None:
            raise ValueError("the agent has a session_dir: the session lives in Dex; build the agent without one")

    def _agent(self) -> Agent:
        agent = self._factory()
        if not isinstance(agent, Agent):
            raise TypeError(f"agent_factory must return a sagent Agent, got {type(agent).__name__}")
        # A call with background/delay would return a placeholder while a task runs on after the Step.
        agent.allow_background = False
        return agent

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a sagent ``UserMessage`` holding ``text`` (role ``user``)."""
        return _codec.framework_message(UserMessage(text=text))

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Hand out the next wave of calls, or make one model request."""
        agent = self._agent()
        history: list[Any] = _codec.decode_entries(message.framework_item for message in turn.messages)
        if turn.summary is not None:
            history.insert(0, summary_message(turn.summary))
        steered = [_codec.encode_entry(UserMessage(text=message.text)) for message in turn.steered_messages]
        if turn.framework_run_state is None:
            entries: list[str] = [*steered]
            carried = None if turn.summary is None else split_summary(turn.summary.text)[1]
            base = _codec.latest_tool_state(turn.messages) or carried or _effects.snapshot_of(ToolState())
        else:
            run = RunState.decode(turn.framework_run_state)
            ended = [self._ended_state(turn.recorded_tool_call(call_id)) for call_id in run.issued]
            base = _effects.merge_tool_states(run.tool_state, [state for state in ended if state is not None])
            if run.waves:
                return self._next_wave(turn, attrs.evolve(run, steered=(*run.steered, *steered)), base)
            results = [tool_result(turn.recorded_tool_call(call_id)) for call_id in run.calls]
            # Steered messages join after every result of the response (never between a call and its
            # result), where sagent's own runtime puts a user message its inbox took during a tool batch.
            entries = [*run.entries, *(_codec.encode_entry(result) for result in results), *run.steered, *steered]
        history.extend(_codec.decode_entries(entries))
        agent.tool_state = _effects.tool_state_from(base)
        response = await self._request(agent, history, turn)
        usage = agent_usage(response)
        message = response.message
        if message.tool_calls:
            for call in message.tool_calls:
                validate_tool_call_id(call.id)
            entries.append(_codec.encode_entry(message))
            keys = serialize_keys(agent, message.tool_calls)
            calls = tuple(call.id for call in message.tool_calls)
            waves = _effects.waves(message.tool_calls, [keys[call_id] for call_id in calls])
            return self._hand_out(
                turn,
                agent,
                message,
                RunState(
                    entries=tuple(entries), calls=calls, waves=tuple(map(tuple, waves)), issued=(), tool_state=base
                ),
                usage,
            )
        return self._complete(entries, message, base, usage)

    def _next_wave(self, turn: AgentTurnContext, run: RunState, base: dict[str, object]) -> ToolCallsRequested:
        agent = self._agent()
        agent.tool_state = _effects.tool_state_from(base)
        return self._hand_out(
            turn, agent, self._last_response(run.entries), attrs.evolve(run, tool_state=base), AgentUsage()
        )

    @staticmethod
    def _hand_out(
        turn: AgentTurnContext, agent: Agent, message: AssistantMessage, run: RunState, usage: AgentUsage
    ) -> ToolCallsRequested:
        """Return the first wave of ``run.waves`` as deferred calls, each starting from ``run.tool_state``."""
        keys = serialize_keys(agent, message.tool_calls)
        by_id = {call.id: call for call in message.tool_calls}
        wave, *rest = run.waves
        state_text = json.dumps(run.tool_state)
        deferred = []
        for call_id in wave:
            call = by_id[call_id]
            effect = _effects.framework_effect(agent.tools_map.get(call.name), keys[call_id])
            deferred.append(
                DeferredToolCall(
                    call.id,
                    call.name,
                    json.dumps(dict(call.args), ensure_ascii=False),
                    turn.resolve_tool_policy(call.name, effect),
                    framework_state=state_text,
                )
            )
        handed = attrs.evolve(run, waves=tuple(rest), issued=tuple(wave))
        return ToolCallsRequested(handed.encode(), deferred, usage)

    @staticmethod
    def _last_response(entries: Sequence[str]) -> AssistantMessage:
        for item in reversed(entries):
            entry = _codec.decode_entry(item)
            if isinstance(entry, AssistantMessage):
                return entry
        raise RunnerContractError("the sagent run state holds no model response")

    def _complete(
        self,
        entries: Sequence[str],
        message: AssistantMessage,
        tool_state: dict[str, object],
        usage: AgentUsage,
    ) -> TurnCompleted:
        turn_entries = _codec.decode_entries(entries)
        names = {
            call.id: call.name
            for entry in turn_entries
            if isinstance(entry, AssistantMessage)
            for call in entry.tool_calls
        }
        # Every turn that ran tools, or inherited a non-empty state, carries it: the model's window
        # (after a compaction) then still holds the newest state in its latest completed turn.
        carries = bool(names) or tool_state != _effects.snapshot_of(ToolState())
        stored = [_codec.framework_message(entry, tool_names=names) for entry in turn_entries]
        stored.append(_codec.framework_message(message, tool_state=tool_state if carries else None))
        return TurnCompleted(stored, usage)

    @staticmethod
    def _ended_state(record: AgentToolCall) -> dict[str, object] | None:
        if record.framework_state is None:
            return None
        try:
            loaded = json.loads(record.framework_state)
        except ValueError as error:
            raise RunnerContractError(f"call {record.tool_call_id!r} holds no sagent tool state") from error
        return loaded if isinstance(loaded, dict) else None

    async def _request(self, agent: Agent, history: list[Any], turn: AgentTurnContext) -> ModelResponse:
        def publish(event: RuntimeEvent) -> None:
            if isinstance(event, ModelResponsePartial) and event.text:
                turn.events.write_text_delta(event.text)
            elif isinstance(event, ModelResponseThinking) and event.text:
                turn.events.write_reasoning_delta(event.text)

        token = current_agent_var.set(agent)
        try:
            with tool_state_context(agent.tool_state):
                request = materialize_request(
                    ModelRequest(
                        messages=history,
                        system=agent.system_prompt(),
                        tools=agent.live_tools(),
                        max_response_tokens=agent.max_response_tokens,
                    ),
                    tool_result_budget_tokens=agent.tool_results.message_budget_tokens,
                )
            try:
                response = await agent.model.stream(request, publish)
                validate_model_response(response)
            except StreamInterruptedError as error:
                raise SagentModelError(f"the model's stream was cut: {error}", retryable=True) from error
            except Exception as error:
                if is_context_overflow(error, agent.model):
                    raise ContextOverflowError(
                        f"the provider refused the context ({type(error).__name__}: {error})"
                    ) from error
                retryable = is_retryable(error, agent.model)
                raise SagentModelError(
                    f"the model request failed ({type(error).__name__}: {error})", retryable=retryable
                ) from error
        finally:
            current_agent_var.reset(token)
        return response

    async def compact(self, messages: Sequence[AgentMessage], previous_summary: str | None) -> CompactionSummary:
        """Summarise history for ``CompactHistory`` through sagent's own ``Compactor``.

        The agent's ``compactor``, else sagent's ``SummaryCompactor()``, gets
        the previous summary (a ``UserMessage``, as the model read it) and the
        covered messages' entries as its context, an empty tape and the
        agent's model; the splice's payload becomes the new summary
        (`render_payload`), after a first line carrying the newest tool state
        of the covered messages or the previous summary (`split_summary`). The
        usage of the responses it got through the agent's model is recorded
        with the session's.

        Raises:
            SagentCompactionError: the compactor fell back (no summary), so the
                history stays as it was.
        """
        agent = self._agent()
        compactor: Compactor = agent.compactor if agent.compactor is not None else SummaryCompactor()
        earlier, earlier_state = split_summary(previous_summary or "")
        tool_state = _codec.latest_tool_state(messages) or earlier_state
        context: list[Any] = [] if previous_summary is None else [UserMessage(text=earlier)]
        context.extend(_codec.decode_entries(message.framework_item for message in messages))
        model = MeteredModel(agent.model)
        minted = iter(range(1 << 62))

        def mint_ref() -> TapeRef:
            return TapeRef(session_id=COMPACTION_SESSION, ordinal=next(minted))

        token = current_agent_var.set(agent)
        try:
            with tool_state_context(agent.tool_state):
                splice = await compactor.compact((), context, cast(Model, model), mint_ref)
        finally:
            current_agent_var.reset(token)
        if splice.fallback_reason or splice.strategy.endswith("fallback"):
            raise SagentCompactionError(
                f"sagent's compactor gave no summary ({splice.strategy}: {splice.fallback_reason or 'no reason'})"
            )
        text = render_payload(splice.payload)
        if not text.strip():
            raise SagentCompactionError("sagent's compactor returned an empty summary")
        if tool_state is not None:
            text = f"{TOOL_STATE_LINE}{json.dumps(tool_state, separators=(',', ':'))}\n\n{text}"
        return CompactionSummary(text, usage=model.usage)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run one call through the agent's own tool object, with the session's tool state."""
        record = call.tool_call
        agent = self._agent()
        agent.tool_state = _effects.tool_state_from(self._ended_state(record))
        tool = agent.tools_map.get(record.tool_name)
        if tool is None:
            raise ToolExecutionError(f"Unknown tool {record.tool_name!r}; the agent has {sorted(agent.tools_map)}.")
        try:
            loaded = json.loads(record.arguments)
        except ValueError as error:
            raise ToolExecutionError(f"The arguments are not JSON: {error}") from error
        args: dict[str, object] = loaded if isinstance(loaded, dict) else {}
        problem = validate_tool_input(tool.name, tool.directive_schema, args)
        if problem is not None:
            raise ToolExecutionError(problem)
        agent_token = current_agent_var.set(agent)
        call_token = current_call_id_var.set(record.tool_call_id)
        key_token = IDEMPOTENCY_KEY.set(call.idempotency_key)
        try:
            with tool_state_context(agent.tool_state):
                result = await tool.run(args)
        finally:
            IDEMPOTENCY_KEY.reset(key_token)
            current_call_id_var.reset(call_token)
            current_agent_var.reset(agent_token)
        ended = json.dumps(_effects.snapshot_of(agent.tool_state))
        if result.kind is not ToolResultKind.FINAL:
            raise BackgroundResultError(
                f"tool {record.tool_name!r} answered {result.kind.value!r} ({result.content[:80]!r}) in its Step; "
                "background tool calls do not run in a durable session"
            )
        if result.is_error:
            raise ToolExecutionError(result.content, framework_state=ended)
        return ToolExecutionResult(result.content, framework_state=ended)
