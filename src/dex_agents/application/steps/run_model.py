"""``RunModel``: one model call.

Input: none. 15 min method timeout, 2 min heartbeat timeout, 3 attempts
within 30 min; failure route ``RecordTurnFailure``. Calls the runner's
`run_model_step` with the model's window (the current summary and the
messages after its range; the host loads only those), the turn's run state
and records, and the steered messages the turn took since its last model
call (which it moves to the seen ones once the call returns: the run state
or the stored messages hold them from then on, and a turn that fails or is
cancelled before it completes stores them, `TurnCloser.store_seen_steered`).

A turn with a `TurnCancelRequest` ends here, before the model is called
(`TurnCloser.end_if_cancelled`): this is the boundary every cancel reaches
(``CompactHistory``, which may come first, checks the same request).

A model call that the Step of a response's one call resumed
(`AgentState.resumed_by_call`, `AgentToolCall.resumes_turn`), while a steered
user message waits, goes to ``ResumeTurn`` (input 0: nothing to join) first,
which takes the messages at this boundary (at most 100, as any boundary) and
comes back here, once: that Step saw the Channel as it was when it started.

- `TurnFailedError` (the framework ended the turn, such as at a usage limit):
  fails the turn at once, as ``RecordTurnFailure`` does after exhausted
  attempts (the message is ``last_turn_error``), and counts the usage the
  error carries; no other attempt, which would only repeat it.
- `ContextOverflowError` (the provider refused the context): goes to
  ``CompactHistory`` (input ``overflow``), which compacts and comes back here
  once; an overflow on that retry fails the attempt. The steered messages
  stay for the retry.

- `TurnCompleted`: appends the turn's new messages in one commit, clears the
  turn's run state and records, and goes to ``AwaitUserMessage``. Each stored
  message that answers tool calls (``answered_tool_call_ids``) carries their
  records' `ToolOutcome` in ``tool_outcomes``, matched by tool-call ID: the
  records are deleted here, and the outcomes must outlive them.
- `ToolCallsRequested`: stores the run state, one record per call (awaiting
  approval when its policy requires it, with a pending interrupt; an
  ``external`` call that needs none ``awaiting_result``, its interrupt raised
  by ``AwaitToolApproval``) and goes to many: per call ``AwaitToolApproval``,
  ``CallTool`` or ``CallSingleAttemptTool``, plus ``ResumeTurn`` with the
  number of calls. A response of one call that needs no answer goes to its
  tool Step alone: nothing is to be joined, so the Step that ends the call
  resumes the turn (`AgentToolCall.resumes_turn`, `ToolCallFinisher`).
  When the response has ``sequential`` calls, only its first wave starts
  here (`dex_agents.domain.tool_order`): the calls of later waves are stored
  ``queued``, and ``ResumeTurn`` counts only the first wave's calls.
"""

from collections.abc import Sequence
from typing import assert_never

import attrs

from dex_agents.application.compaction import CompactionReason, compaction_window
from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.invocation import StepCall
from dex_agents.application.next import GoTo, GoToMany, Next, StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.policies import policy_resolver
from dex_agents.application.ports import (
    RunStateStore,
    SessionStateStore,
    SteeredMessageStore,
    SteeringQueue,
    ToolCallStore,
)
from dex_agents.application.runner import (
    AgentFrameworkRunner,
    AgentTurnContext,
    ContextOverflowError,
    HeartbeatFn,
    TurnFailedError,
)
from dex_agents.application.steps._shared import HistoryReader, ToolCallStarter, UsageMeter
from dex_agents.application.steps._turn_control import TurnCloser
from dex_agents.application.wiring import Wired
from dex_agents.domain import events as ev
from dex_agents.domain.contract import check_turn_outcome
from dex_agents.domain.history import ModelWindow
from dex_agents.domain.interrupts import interrupt_id_for, result_interrupt_id_for
from dex_agents.domain.limits import ERROR_TEXT_BYTES, cap_text
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.tool_order import first_wave_size
from dex_agents.domain.tools import (
    AgentToolCall,
    ToolCallStatus,
    is_approval_required,
)
from dex_agents.domain.turns import DeferredToolCall, ToolCallsRequested, TurnCompleted, validate_turn_outcome


@attrs.frozen(kw_only=True)
class ModelCaller(Wired):
    """Calls the runner's `run_model_step` once, with the turn's window, run state, records and steered messages."""

    runner: AgentFrameworkRunner
    options: AgentSessionOptions
    history: HistoryReader
    events: AgentEventWriter
    heartbeat: HeartbeatFn

    async def call(
        self, call: StepCall, state: AgentState, records: Sequence[AgentToolCall], steered: Sequence[AgentUserMessage]
    ) -> object:
        """Return what the runner returned (unchecked); its errors propagate."""
        assert state.active_turn_id is not None
        history = self.history.read(state.model_window())
        context = AgentTurnContext(
            flow_id=call.flow_id,
            turn_id=state.active_turn_id,
            attempt=call.attempt,
            step_execution_id=call.step_execution_id,
            messages=history.messages,
            summary=history.summary,
            framework_run_state=history.framework_run_state,
            tool_calls={record.tool_call_id: record for record in records},
            events=self.events,
            heartbeat=self.heartbeat,
            policy_resolver=policy_resolver(self.options),
            steered_messages=tuple(steered),
        )
        returned: object = await self.runner.run_model_step(context)
        return returned


@attrs.frozen(kw_only=True)
class ToolCallDeferral(Wired):
    """Stores what a model response that asked for tools decided: its run state, one record per call, the wait."""

    session_state: SessionStateStore
    run_state: RunStateStore
    tool_starter: ToolCallStarter
    events: AgentEventWriter

    def defer(self, state: AgentState, turn_id: str, outcome: ToolCallsRequested, earlier: int) -> Next:
        """Store the run state and records, start the first wave's calls, and wait for their results."""
        self.run_state.set(outcome.framework_run_state)
        starting = self.tool_starter.starting()
        movements: list[GoTo] = []
        first = first_wave_size([requested.sequential for requested in outcome.tool_calls])
        window = state.model_window()
        alone = len(outcome.tool_calls) == 1
        resumes = False
        for index, requested in enumerate(outcome.tool_calls):
            record = _record(turn_id, requested, earlier + index, queued=index >= first, window=window)
            if alone and record.status is ToolCallStatus.PENDING:
                # Nothing to join: its tool Step resumes the turn itself, one Step less per model call.
                record, resumes = attrs.evolve(record, resumes_turn=True), True
            starting.store(record)
            self.events.write(
                ev.tool_call_deferred(
                    requested.tool_call_id, requested.tool_name, requested.policy, arguments=requested.arguments
                )
            )
            if record.status is ToolCallStatus.QUEUED:
                continue
            movements.append(starting.start(record))
        starting.store_interrupts(unchanged_too=True)
        self.session_state.set(state.wait_for_tools())
        if resumes:
            return movements[0]
        movements.append(GoTo(step=StepName.RESUME_TURN, input=first))
        return GoToMany(movements=movements)


@attrs.frozen(kw_only=True)
class RunModel(Wired):
    """Runs one model call of the active turn."""

    session_state: SessionStateStore
    tool_calls: ToolCallStore
    steered: SteeredMessageStore
    steering: SteeringQueue
    model: ModelCaller
    usage_meter: UsageMeter
    turn_closer: TurnCloser
    deferral: ToolCallDeferral

    async def execute(self, call: StepCall) -> Next:
        """Run the model once and store what it decided."""
        state = self.session_state.get()
        assert state is not None, "the session has not started"
        assert state.active_turn_id is not None, "RunModel needs an active turn"
        turn_id = state.active_turn_id
        cancelled = self.turn_closer.end_if_cancelled(state)
        if cancelled is not None:
            return cancelled
        records = self.tool_calls.all()
        if state.resumed_by_call and self.steering.size():
            # A message steered while the response's one call ran: ResumeTurn takes it at this boundary first.
            return GoTo(step=StepName.RESUME_TURN, input=0)
        steered = self.steered.get()
        try:
            returned = await self.model.call(call, state, records, steered)
        except ContextOverflowError:
            if state.retry_after_overflow:
                raise  # the history was already compacted for this call
            # The steered messages stay stored: the retry after the compaction gives them to the model.
            return GoTo(
                step=StepName.COMPACT_HISTORY,
                input=CompactionReason.OVERFLOW.value,
                window=compaction_window(state),
            )
        except TurnFailedError as failure:
            return self._fail(state, failure)
        outcome = check_turn_outcome(returned)
        if steered:
            # From now on the run state holds them; they are stored with the turn however it ends.
            self.steered.set(())
            self.steered.set_seen((*self.steered.seen(), *steered))
        if state.retry_after_overflow:
            state = attrs.evolve(state, retry_after_overflow=False)
        validate_turn_outcome(outcome, earlier_tool_call_ids=[record.tool_call_id for record in records])
        self.usage_meter.add(outcome.usage)
        match outcome:
            case TurnCompleted():
                return self.turn_closer.complete(state, outcome, records)
            case ToolCallsRequested():
                return self.deferral.defer(state, turn_id, outcome, len(records))
            case _:
                assert_never(outcome)

    def _fail(self, state: AgentState, failure: TurnFailedError) -> Next:
        """Fail the turn at once, as ``RecordTurnFailure`` would, after counting what the failed call used."""
        if failure.usage is not None and not failure.usage.is_zero:
            self.usage_meter.add(failure.usage)
        return self.turn_closer.fail(
            state, cap_text(failure.message, ERROR_TEXT_BYTES, what="the error"), model_had_taken=True
        )


def _record(
    turn_id: str, requested: DeferredToolCall, order: int, *, queued: bool, window: ModelWindow
) -> AgentToolCall:
    if queued:
        status, needs_approval = ToolCallStatus.QUEUED, False
    else:
        needs_approval = is_approval_required(requested.policy)
        status = ToolCallStatus.AWAITING_APPROVAL if needs_approval else ToolCallStatus.PENDING
        if requested.external and not needs_approval:
            status = ToolCallStatus.AWAITING_RESULT
    return AgentToolCall(
        tool_call_id=requested.tool_call_id,
        turn_id=turn_id,
        tool_name=requested.tool_name,
        arguments=requested.arguments,
        policy=requested.policy,
        deferral_order=order,
        status=status,
        interrupt_id=interrupt_id_for(turn_id, requested.tool_call_id) if needs_approval else None,
        framework_state=requested.framework_state,
        sequential=requested.sequential,
        result_interrupt_id=(result_interrupt_id_for(turn_id, requested.tool_call_id) if requested.external else None),
        history_window=window if requested.reads_history else None,
    )
