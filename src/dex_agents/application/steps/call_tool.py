"""``CallTool`` and ``CallSingleAttemptTool``: run one tool call.

Input: the tool-call ID. ``CallTool`` runs ``read`` and ``idempotent_write``
calls: 3 attempts, failure route ``RecordToolFailure``.
``CallSingleAttemptTool`` runs ``non_idempotent_write`` and ``unclassified``
calls: exactly 1 attempt, failure route ``RecordToolOutcomeUnknown``.

Before the runner is called, ``CallTool`` writes ``tool_call_started``: the
Step's first output, which is what narrows the engine's window for handing the
same attempt to another Worker (any output frame counts, a Stream write as
well as a heartbeat). It awaits no separate heartbeat (one frame less per
tool call); a ``read`` or ``idempotent_write`` call may run again anyway.
``CallSingleAttemptTool`` runs the tool at most once,
whatever the engine's redelivery rule (an engine may hand an attempt whose
Worker vanished to another Worker at the same attempt, before or after its
first output):

1. On start it reads the `DeliveryLedger`: when the engine already stored a
   ``tool_call_started`` of this Step execution and attempt, an earlier
   delivery got as far as it may run the tool, so the call is recorded
   ``outcome_unknown`` without running.
2. Else it writes ``tool_call_started`` carrying a fresh delivery marker,
   awaits a heartbeat, and waits until the ledger shows the marker stored.
   It runs the tool only when its marker is the first one of this attempt
   (two deliveries racing cannot both be first); otherwise ``outcome_unknown``
   (``reconciling`` with ``ReconcileToolCall`` next when the policy is
   ``reconcilable``, see `ToolCallFinisher.settle_unknown`).
   A marker never confirmed fails the attempt (`DeliveryUnconfirmedError`),
   so the failure route records ``outcome_unknown`` and the tool never ran.
   A ledger that cannot read at all (`DeliveryLedgerUnavailableError`: the
   Worker has no Client, a set-up error) records the call ``failed`` with
   the error naming the fix, logged as an error: it is known not to have run.

The one assumption left: what the ledger reads back is durable (Stream writes
are durable once read back). The result is ``succeeded``, or ``failed`` for
`ToolExecutionError` (not retried); its one ``TOOL_CALL_RESULTS`` message is
published with it; a ``framework_state`` either gives replaces the record's
(the runner's own per-call state, `AgentToolCall.framework_state`), and a
``usage`` either gives is kept on the record (`AgentToolCall.usage`) for
``ResumeTurn`` to count. Any other
exception fails the attempt. A record that is already final ends without running or publishing.
A call whose tool reads the turn's history (`AgentToolCall.history_window`) gets the window's
messages, its summary and the run state with it (`DeferredToolExecution.history`), which its
movement loaded; any other call loads only its own record. Next: ends (or
``ReconcileToolCall`` as above).

The call of a response that asked for this one call (`AgentToolCall.resumes_turn`) has no
``ResumeTurn`` waiting: its result is stored unpublished, its usage counted, and the model
comes next (`ToolCallFinisher`). When it waits for an answer instead (the two cases below),
``ResumeTurn`` is started beside ``AwaitToolApproval`` to join its result.

A call whose result comes from outside (the runner raises `ToolResultDeferredError`:
an external tool, or a tool that deferred its call) is stored
``awaiting_result`` under its ``tool_result`` interrupt ID; nothing is
published, and next is ``AwaitToolApproval``, which raises the interrupt and
waits for ``submit_tool_result``.

A tool that asks for approval before acting (the runner raises
`ToolApprovalRequestedError`: Pydantic AI's ``ApprovalRequired``) ends the
attempt with that definite outcome, neither a failure nor a retry: a
``pending`` call is stored ``awaiting_approval`` under its approval interrupt
ID (`AgentToolCall.ask_approval`), nothing is published, and next is
``AwaitToolApproval``, which raises the interrupt as for a call whose policy
asks. Approved, the call's tool Step runs again (a new Step execution) with
the record ``approved``; for a single-attempt write that is its one real
attempt, since the first one stopped before acting. A call approved already
that asks again is recorded ``failed`` with `ASKED_AGAIN`.

A call whose turn was cancelled (`TurnCancelRequest`) before its first
attempt started is recorded ``cancelled`` without running; a call already
running when the cancel arrives finishes, and its result is kept.

An approved call runs only when its approval is bound to this call (the
digest of its tool name and canonical arguments, `AgentToolCall.approval_mismatch`);
otherwise it is recorded ``failed`` with an error saying so, never run. The
approval is used once: the record is final after its tool Step.

Output and error texts are made safe to store (`sanitize_output_text`) and
cut to ``max_tool_output_bytes`` with a notice the model reads
(`cap_text`), so a tool returning 10 MB does not fail its Step.
"""

import logging
import uuid

import attrs

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.invocation import StepCall
from dex_agents.application.next import End, GoTo, GoToMany, Next, StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import (
    CancelRequestStore,
    DeliveryLedger,
    ToolCallStore,
)
from dex_agents.application.runner import (
    AgentFrameworkRunner,
    DeferredToolExecution,
    HeartbeatFn,
    ToolApprovalRequestedError,
    ToolCallHistory,
    ToolExecutionResult,
    ToolResultDeferredError,
)
from dex_agents.application.steps._shared import HistoryReader, ToolCallFinisher, tool_call_record
from dex_agents.application.wiring import Wired
from dex_agents.domain.contract import broken, check_usage
from dex_agents.domain.errors import DeliveryLedgerUnavailableError, ToolExecutionError
from dex_agents.domain.interrupts import interrupt_id_for, result_interrupt_id_for
from dex_agents.domain.limits import cap_text, sanitize_output_text
from dex_agents.domain.tools import AgentToolCall, ToolCallStatus
from dex_agents.domain.turn_control import cancel_rejection_message

_log = logging.getLogger(__name__)


ASKED_AGAIN = "The tool asked for approval again after its call was approved; the call did not complete."
"""The error of an approved call whose tool asked for approval once more (the model reads it)."""


@attrs.frozen(kw_only=True)
class _ToolCallStep(Wired):
    runner: AgentFrameworkRunner
    options: AgentSessionOptions
    tool_calls: ToolCallStore
    tool_call_finisher: ToolCallFinisher
    events: AgentEventWriter
    heartbeat: HeartbeatFn
    cancel_request: CancelRequestStore
    history: HistoryReader

    async def execute(self, call: StepCall, tool_call_id: str) -> Next:
        """Run the call once and record its result."""
        record = tool_call_record(self.tool_calls, tool_call_id)
        if record.is_final:
            return End()
        cancel = self.cancel_request.get()
        if call.attempt == 1 and cancel is not None and cancel.applies_to(record.turn_id):
            # Only a first attempt: a later one may follow an attempt that started the tool.
            cancelled = record.cancel(cancel_rejection_message(cancel.reason))
            return self.tool_call_finisher.finish(cancelled)
        assert record.status in (ToolCallStatus.PENDING, ToolCallStatus.APPROVED), (
            f"tool call {tool_call_id!r} may not run in status {record.status.value!r}"
        )
        mismatch = record.approval_mismatch()
        if mismatch is not None:
            failed = record.fail(mismatch, attempt=0)
            return self.tool_call_finisher.finish(failed)
        try:
            held = await self._announce(call, record)
        except DeliveryLedgerUnavailableError as error:
            # Nothing was announced: the tool did not run, and never will on this Worker as it is set up.
            _log.error("%s (session %s, tool call %s)", error, call.flow_id, record.tool_call_id)
            failed = record.fail(str(error), attempt=call.attempt)
            return self.tool_call_finisher.finish(failed)
        if held is not None:
            return self.tool_call_finisher.settle_unknown(record, held)
        return await self._run(call, record)

    async def _run(self, call: StepCall, record: AgentToolCall) -> Next:
        """Run the tool through the runner and record what it came to."""
        execution = DeferredToolExecution.of_attempt(
            call.flow_id,
            record,
            attempt=call.attempt,
            events=self.events,
            heartbeat=self.heartbeat,
            history=self._history(record),
        )
        try:
            returned: object = await self.runner.execute_deferred_tool_call(execution)
            if not isinstance(returned, ToolExecutionResult):
                raise broken("execute_deferred_tool_call", "a ToolExecutionResult", returned)
            result = returned
        except ToolResultDeferredError:
            waiting = record.await_result(
                result_interrupt_id_for(record.turn_id, record.tool_call_id), attempt=call.attempt
            )
            self.tool_calls.put(waiting)
            return _await_answer(record)
        except ToolApprovalRequestedError:
            if record.status is ToolCallStatus.APPROVED:
                return self.tool_call_finisher.finish(record.fail(ASKED_AGAIN, attempt=call.attempt))
            asking = record.ask_approval(interrupt_id_for(record.turn_id, record.tool_call_id), attempt=call.attempt)
            self.tool_calls.put(asking)
            return _await_answer(record)
        except ToolExecutionError as error:
            finished = record.fail(self._bounded(error.message, "the tool's error"), attempt=call.attempt)
            state, usage = error.framework_state, error.usage
        else:
            finished = record.succeed(self._bounded(result.output, "the tool's output"), attempt=call.attempt)
            state, usage = result.framework_state, result.usage
        kept_usage = finished.usage
        if usage is not None:
            check_usage("execute_deferred_tool_call", usage)
            if not usage.is_zero:
                kept_usage = usage
        if state is not None or kept_usage is not finished.usage:
            # One copy for both (a tool Step makes several).
            finished = attrs.evolve(
                finished, framework_state=finished.framework_state if state is None else state, usage=kept_usage
            )
        return self.tool_call_finisher.finish(finished)

    def _history(self, record: AgentToolCall) -> ToolCallHistory | None:
        """The turn's history for a call that reads it: what its movement loaded (`tool_step_movement`)."""
        window = record.history_window
        if window is None:
            return None
        return self.history.read(window)

    def _bounded(self, text: str, what: str) -> str:
        return cap_text(sanitize_output_text(text), self.options.max_tool_output_bytes, what=what)

    async def _announce(self, call: StepCall, record: AgentToolCall) -> str | None:
        """Write ``tool_call_started`` before the tool runs; return why it must not run, or ``None``."""
        self.events.write_tool_call_started(record.tool_call_id, record.tool_name)
        return None


def _await_answer(record: AgentToolCall) -> Next:
    """``AwaitToolApproval`` next for a call that now waits for an answer; with ``ResumeTurn``, when none waits.

    A call that resumed its turn itself (`AgentToolCall.resumes_turn`) stops doing so while it waits, so its
    result is joined as any other call's.
    """
    waiting = GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input=record.tool_call_id)
    if not record.resumes_turn:
        return waiting
    return GoToMany(movements=(waiting, GoTo(step=StepName.RESUME_TURN, input=1)))


class CallTool(_ToolCallStep):
    """Runs a ``read`` or ``idempotent_write`` call (retried up to 3 attempts)."""


EARLIER_DELIVERY = (
    "an earlier delivery of this Step attempt got as far as running the tool; "
    "it may have taken effect, so it was not run again"
)
"""The error of a single-attempt call that an earlier delivery may have run."""

CONCURRENT_DELIVERY = (
    "another delivery of this Step attempt announced the tool first; "
    "it may have taken effect, so this delivery did not run it"
)
"""The error of a single-attempt call whose delivery lost the race to announce it."""


@attrs.frozen(kw_only=True)
class CallSingleAttemptTool(_ToolCallStep):
    """Runs a ``non_idempotent_write`` or ``unclassified`` call (exactly one attempt, at most once)."""

    deliveries: DeliveryLedger

    async def _announce(self, call: StepCall, record: AgentToolCall) -> str | None:
        execution, attempt = call.step_execution_id, call.attempt
        if await self.deliveries.started(
            call.flow_id, record.tool_call_id, step_execution_id=execution, attempt=attempt
        ):
            return EARLIER_DELIVERY
        delivery = uuid.uuid4().hex
        self.events.write_tool_call_started(record.tool_call_id, record.tool_name, delivery=delivery)
        await self.heartbeat()
        stored = await self.deliveries.confirm(
            call.flow_id, record.tool_call_id, step_execution_id=execution, attempt=attempt, delivery=delivery
        )
        return None if stored[:1] == (delivery,) else CONCURRENT_DELIVERY
