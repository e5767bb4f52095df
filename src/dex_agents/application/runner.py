"""The runner contract: what a framework adapter implements.

A runner is stateless between calls; every call may run again after a crash
or a retry, so it derives everything from its arguments.

- `AgentFrameworkRunner.build_user_message` turns text into the framework's
  user message (role ``user``); the session stores it as a turn's first
  message, and for the turn-failure note.
- `AgentFrameworkRunner.run_model_step` makes at most one model call and
  returns `TurnCompleted` or `ToolCallsRequested`; it never runs a tool it can
  defer. It reads the model's window: ``turn.summary`` (the cumulative summary
  of the compacted messages, if any) and ``turn.messages`` (every message
  after the summary's range). `ContextOverflowError` says the provider refused
  the context: the session compacts its history and retries the call once.
  Any other exception fails the attempt.
- Optionally, `dex_agents.application.compaction.HistoryCompactor.compact`
  (``compact(messages, previous_summary) -> summary``): how the runner
  summarises history for ``CompactHistory``.
  `TurnFailedError` fails the turn at once, without another attempt (a usage
  limit reached: retrying would repeat it).
- `AgentFrameworkRunner.execute_deferred_tool_call` runs one tool call once and
  returns `ToolExecutionResult` (with the usage of agent runs inside the tool);
  a call the runner marked ``reads_history`` gets the turn's history with it
  (`DeferredToolExecution.history`: the window, its summary, the run state);
  `ToolExecutionError` records ``failed`` and is not retried;
  `ToolResultDeferredError` says the call's result comes from outside the session
  (an external tool, or a tool that deferred its call): the call then waits
  for ``submit_tool_result`` (``awaiting_result``), as an approval waits;
  `ToolApprovalRequestedError` says the tool asked for approval before acting:
  the call then waits for it (``awaiting_approval``) and, approved, runs again
  with ``tool_call.status`` ``approved`` (the tool told it is approved); any
  other exception is a Step failure.
- Optionally, `ToolCallReconciler.reconcile_tool_call` (a runner that has it
  is a `ToolCallReconciler`): the reconcile probe of a call whose policy is
  ``reconcilable`` and whose outcome is unknown. A read: did the call with
  ``call.idempotency_key`` take effect, and with what result? It returns a
  `ReconcileResult`; any exception fails the attempt (``ReconcileToolCall``
  retries it as a read, 3 attempts, then records ``outcome_unknown``).
"""

from collections.abc import Awaitable, Callable, Mapping
from enum import StrEnum
from typing import Protocol, runtime_checkable

import attrs

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.domain.history import HistorySummary
from dex_agents.domain.messages import AgentMessage, AgentUserMessage, FrameworkMessage
from dex_agents.domain.tools import AgentToolCall, ToolEffect, ToolPolicy, idempotency_key
from dex_agents.domain.turns import AgentTurnOutcome
from dex_agents.domain.usage import AgentUsage

HeartbeatFn = Callable[[], Awaitable[None]]
"""Records liveness of the running Step."""

PolicyResolver = Callable[[str, ToolEffect | None], ToolPolicy]
"""Resolves a tool's policy from its name and the framework's effect, if any."""


@attrs.frozen(kw_only=True)
class AgentTurnContext:
    """What `run_model_step` gets: the committed state of the turn."""

    flow_id: str
    """The session ID."""
    turn_id: str
    """``turn-<n>``."""
    attempt: int
    """The ``RunModel`` attempt, from 1."""
    step_execution_id: str
    """The ``RunModel`` execution, shared by its attempts."""
    messages: tuple[AgentMessage, ...]
    """The model's window: every stored message after the summary's range, in sequence order; the last user
    message opens this turn."""
    framework_run_state: str | None
    """``None`` for the turn's first model call, else the last `ToolCallsRequested` state."""
    tool_calls: Mapping[str, AgentToolCall]
    """Every record of this turn by call ID; all final when the model runs."""
    events: AgentEventWriter
    """Live events of this attempt."""
    heartbeat: HeartbeatFn
    """Records liveness (the session also beats every 20 s in the background)."""
    policy_resolver: PolicyResolver
    """Backs `resolve_tool_policy`."""
    summary: HistorySummary | None = None
    """The cumulative summary of messages ``1..summary.through_sequence``, read in their place; ``None``: none."""
    steered_messages: tuple[AgentUserMessage, ...] = ()
    """User messages steered into this turn since its last model call, oldest first (only when resuming).

    Give them to the model after the tool results of the run state (never
    between a tool call and its result), keep them in the turn's messages (the
    next run state, and `TurnCompleted.new_messages` in their place), and let
    this model call see them. The session hands each to one model call that
    returns: a call that raises (`ContextOverflowError` included) gets them
    again on its retry.
    """

    @property
    def is_resuming(self) -> bool:
        """Whether this model call continues the turn after tool calls."""
        return self.framework_run_state is not None

    def resolve_tool_policy(self, tool_name: str, framework_effect: ToolEffect | None = None) -> ToolPolicy:
        """Return the policy: explicit, else ``framework_effect``, else the default effect."""
        return self.policy_resolver(tool_name, framework_effect)

    def recorded_tool_call(self, tool_call_id: str) -> AgentToolCall:
        """Return this turn's record of one call.

        Raises:
            KeyError: the turn has no such call.
        """
        return self.tool_calls[tool_call_id]


class ContextOverflowError(Exception):
    """The provider refused a model call because its context is too long (raised by `run_model_step`).

    ``RunModel`` answers it by compacting the history and retrying the model
    call once; a second overflow fails the attempt.
    """


@attrs.frozen(kw_only=True)
class ToolCallHistory:
    """The turn's history, for a call whose tool reads it (`DeferredToolCall.reads_history`)."""

    messages: tuple[AgentMessage, ...]
    """The model's window when the call was asked for (`AgentToolCall.history_window`), in sequence order."""
    summary: HistorySummary | None
    """The cumulative summary that opens that window, if any."""
    framework_run_state: str | None
    """The turn's run state: the `ToolCallsRequested` state of the model call that asked for the call."""


@attrs.frozen(kw_only=True)
class DeferredToolExecution:
    """What `execute_deferred_tool_call` gets: one approved call to run."""

    flow_id: str
    """The session ID."""
    tool_call: AgentToolCall
    """The call's record."""
    idempotency_key: str
    """``<flow_id>/<turn_id>/<tool_call_id>``, the same on every attempt."""
    attempt: int
    """The tool Step's attempt, from 1."""
    events: AgentEventWriter
    """Live events of this attempt."""
    heartbeat: HeartbeatFn
    """Records liveness."""
    history: ToolCallHistory | None = None
    """The turn's history, when the call reads it (`DeferredToolCall.reads_history`); ``None`` otherwise."""

    @classmethod
    def of_attempt(
        cls,
        flow_id: str,
        tool_call: AgentToolCall,
        *,
        attempt: int,
        events: AgentEventWriter,
        heartbeat: HeartbeatFn,
        history: ToolCallHistory | None = None,
    ) -> "DeferredToolExecution":
        """The execution of ``tool_call``'s attempt ``attempt``, with its idempotency key derived from the IDs."""
        return cls(
            flow_id=flow_id,
            tool_call=tool_call,
            idempotency_key=idempotency_key(flow_id, tool_call.turn_id, tool_call.tool_call_id),
            attempt=attempt,
            events=events,
            heartbeat=heartbeat,
            history=history,
        )

    @property
    def turn_id(self) -> str:
        """The call's turn."""
        return self.tool_call.turn_id


@attrs.frozen
class ToolExecutionResult:
    """A tool's result as the model should see it."""

    output: str
    """The result text."""
    framework_state: str | None = attrs.field(default=None, kw_only=True)
    """Runner-owned text that replaces the record's `AgentToolCall.framework_state`; ``None`` keeps it."""
    usage: AgentUsage | None = attrs.field(default=None, kw_only=True)
    """The framework's model usage while the tool ran (an agent run inside the tool), counted into the turn's
    and the session's usage; ``None`` when there was none."""


class ToolResultDeferredError(Exception):
    """The call's result comes from outside the session (raised by `execute_deferred_tool_call`).

    The tool has no function to run here (an external tool), or it ran and
    deferred its own call (Pydantic AI's ``CallDeferred``). The record goes to
    ``awaiting_result`` with a ``tool_result`` interrupt; the result an
    application submits (``submit_tool_result``) is what the model sees.
    Not a failure: nothing is retried.
    """


class ToolApprovalRequestedError(Exception):
    """The tool asked for approval before acting (raised by `execute_deferred_tool_call`).

    Pydantic AI's ``ApprovalRequired``. A definite outcome of the attempt: not
    a failure, not retried, and the tool did nothing (it asked first). A
    ``pending`` call goes to ``awaiting_approval`` under its approval interrupt,
    raised as for a call whose policy asks (same kind, snapshot entry,
    ``interrupt_raised`` event and deadline); once approved its tool Step runs
    again with the record ``approved``, and a rejection reaches the model as
    one. A call that was approved already and asks again is recorded ``failed``.
    """


class TurnFailedError(Exception):
    """The framework ended the turn with an error another attempt would repeat (raised by `run_model_step`).

    For example a usage limit the turn reached. ``RunModel`` fails the turn at once with this message
    (``last_turn_error``, ``turn_failed``), as ``RecordTurnFailure`` would after exhausted attempts,
    without another attempt; ``usage`` is what the failed call used, added to the session's.
    """

    def __init__(self, message: str, *, usage: AgentUsage | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage


class AgentFrameworkRunner(Protocol):
    """What a framework adapter implements."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return the framework's user message for ``text`` (role ``user``)."""
        ...

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Make at most one model call and say how the turn goes on."""
        ...

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run one tool call once."""
        ...


class ReconcileVerdict(StrEnum):
    """What a reconcile probe found."""

    APPLIED = "applied"
    """The call took effect; `ReconcileResult.output` is its result."""
    NOT_APPLIED = "not_applied"
    """The call did not take effect."""
    UNKNOWN = "unknown"
    """The probe cannot tell."""


@attrs.frozen
class ReconcileResult:
    """A reconcile probe's answer: ``ReconcileResult(verdict, output=None)``."""

    verdict: ReconcileVerdict
    """What the probe found."""
    output: str | None = None
    """The call's result as the model should see it, when ``applied``."""

    @classmethod
    def applied(cls, output: str) -> "ReconcileResult":
        """The call took effect with ``output``."""
        return cls(ReconcileVerdict.APPLIED, output)

    @classmethod
    def not_applied(cls) -> "ReconcileResult":
        """The call did not take effect."""
        return cls(ReconcileVerdict.NOT_APPLIED)

    @classmethod
    def unknown(cls) -> "ReconcileResult":
        """The probe cannot tell."""
        return cls(ReconcileVerdict.UNKNOWN)


@runtime_checkable
class ToolCallReconciler(Protocol):
    """The optional part of the runner contract: reconcile probes of tools whose policy is ``reconcilable``."""

    async def reconcile_tool_call(self, call: DeferredToolExecution) -> ReconcileResult:
        """Return whether the call (by ``call.idempotency_key``) took effect, and with what result."""
        ...
