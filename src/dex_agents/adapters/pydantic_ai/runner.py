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
  replayed as one delta per part; a live run's model Step capability does this
  itself) and `ReinjectSystemPrompt` (unless the agent has its own, or has no
  system prompt for it to put back). An agent whose runs stream anyway (an event handler or event
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
  ``ApprovalRequired`` (either way) is `ToolApprovalRequestedError`: the call
  waits for approval, and its approved Step runs the tool again with
  ``ctx.tool_call_approved`` (through the run, with ``ToolApproved``).
- `PydanticAIRunner.reconcile_tool_call`: runs the reconcile probe a tool
  declared in its metadata (`dex_agents.adapters.pydantic_ai.reconcile`) with
  the call's arguments, idempotency key and the session's deps; ``unknown``
  for a tool without one.

The model Step runs in `dex_agents.adapters.pydantic_ai._model_steps`, the
tool Step in `dex_agents.adapters.pydantic_ai._tool_steps`, and a model Step
run's end becomes its outcome (requested calls with their policies, or the
turn) in `dex_agents.adapters.pydantic_ai._outcomes`.

Policies: `AgentTurnContext.resolve_tool_policy` with the framework effect
from the tool's original definition (MCP ``readOnlyHint`` → ``read``,
``idempotentHint`` → ``idempotent_write``, a ``tool-search`` tool → ``read``);
a tool declared ``requires_approval=True`` (original kind ``unapproved``) or a
call Pydantic AI routed to ``approvals`` always requires approval; a tool
whose metadata declares a reconcile probe is ``reconcilable``.
"""

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from pydantic_ai import DeferredToolRequests
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.usage import UsageLimits

from dex_agents.adapters.pydantic_ai import _history
from dex_agents.adapters.pydantic_ai._agent_checks import (
    check_agent,
    ends_early,
    has_reinject_system_prompt,
    lists_deferred_tool_requests,
    with_deferred_output,
)
from dex_agents.adapters.pydantic_ai._compaction import (
    DEFAULT_TOOL_RESULT_BUDGET_CHARS,
    ModelSummaryCompactor,
)
from dex_agents.adapters.pydantic_ai._direct_tool import DirectToolCache
from dex_agents.adapters.pydantic_ai._live_runs import (
    LiveRuns,
)
from dex_agents.adapters.pydantic_ai._model_steps import ModelSteps
from dex_agents.adapters.pydantic_ai._outcomes import (
    SEARCH_TOOLS_KIND,
    check_answered_calls,
    framework_effect,
    requested_calls,
)
from dex_agents.adapters.pydantic_ai._return_types import ReturnTypes
from dex_agents.adapters.pydantic_ai._tool_steps import ToolSteps
from dex_agents.adapters.pydantic_ai.reconcile import ReconcileCall, find_reconcile_probe
from dex_agents.application.compaction import CompactionSummary, HistoryCompactor
from dex_agents.application.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ReconcileResult,
    ToolExecutionResult,
)
from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.messages import AgentMessage, FrameworkMessage
from dex_agents.domain.turns import AgentTurnOutcome

__all__ = ["SEARCH_TOOLS_KIND", "PydanticAIRunner", "check_answered_calls", "framework_effect", "requested_calls"]

DepsT = TypeVar("DepsT")


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
        self._live = LiveRuns() if live_runs else None
        self._model_steps = ModelSteps(
            agent,
            self._run_agent,
            self._output_type,
            model,
            self._reinject_system_prompt,
            tool_result_budget_chars,
            ReturnTypes(agent),
            self._live,
            UsageLimits() if usage_limits is None else usage_limits,
            self._deps,
            ends_early(agent),
        )
        self._tool_steps = ToolSteps(
            run_agent=self._run_agent,
            output_type=self._output_type,
            model=model,
            direct_tools=DirectToolCache(agent, model) if direct_tool_calls else None,
            deps=self._deps,
        )

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
        return await self._model_steps.run(turn)

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
        return await self._tool_steps.execute(call)

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

    async def _deps(self, session_id: str) -> object:
        if self._deps_factory is None:
            return None
        deps = self._deps_factory(session_id)
        if inspect.isawaitable(deps):
            return await deps
        return deps
