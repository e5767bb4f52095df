"""``AwaitToolApproval``: waits for a person to approve one tool call.

Input: the tool-call ID. While the call's interrupt is pending, waits for its
answer on ``INTERRUPT_RESOLUTIONS`` together with a Timer at the deadline,
rounded up to whole seconds (`plan_wait`). The deadline is on the engine's
clock, never the Worker's: the first wait stores it on the record
(``approval_deadline``: the engine's time as that wait started, plus
``interrupt_deadline``), every wait's Timer is the stored deadline minus the
engine's time as that wait started (Dex: ``first_attempt_at``, which the
server sets), and Dex measures the Timer itself. A Timer that fired is the
deadline: no Worker clock is asked. Then:

- approved: marks the record ``approved`` (with the answer's approver and the
  digest the approval is bound to); next the call's tool Step;
- rejected: records ``rejected``, publishes its result and ends;
- the deadline passed unanswered: records ``expired`` with
  `EXPIRED_REJECTION_MESSAGE` (what the model sees), publishes its result and
  ends; its ``interrupt_resolved`` event says ``approved: false`` with that
  message;
- the turn was cancelled (`TurnCancelRequest`) and the interrupt is still
  pending (raised after the cancel was accepted): removes it and records
  ``rejected`` with `cancel_rejection_message`, without waiting; an interrupt
  the ``cancel_turn`` RPC already answered gets that answer as above;
- the answer was accepted just as the Timer fired: waits again, and the
  answer is applied when it arrives;
- the deadline passed on a retried attempt: waits again, because a retry
  reads the first attempt's (possibly stale) pending interrupts and must not
  write them back; the new execution expires the interrupt.

A record that is already final ends without publishing anything.

A call whose tool asked for approval while its Step ran (``awaiting_approval``
with `AgentToolCall.approval_to_raise`: the runner raised
`ToolApprovalRequestedError`) has its approval interrupt raised here, by its
first execution, under the lock (tool Steps run side by side): the same
interrupt, snapshot entry and ``interrupt_raised`` event as a call whose
policy asks (`approval_interrupt`); then it waits as above, and approved, its
tool Step runs again. A cancel found before the interrupt is raised rejects it
with the cancel's message, as for a pending interrupt.

The same Step waits for a call's result from outside the session (a record
``awaiting_result``: its tool Step found an external tool or a deferred call).
Its first execution raises the ``tool_result`` interrupt (pending interrupts
are rewritten only here, under their lock: tool Steps run side by side) and
writes ``interrupt_raised`` with kind ``tool_result``; then it waits as above,
for ``submit_tool_result``'s answer and a Timer at ``external_result_deadline``
(stored as ``result_deadline``):

- a result: records ``succeeded`` with the JSON text as ``output``;
- an error: records ``failed`` with the error (the model sees it as a retry);
- the deadline passed unanswered: records ``expired`` with
  `EXPIRED_RESULT_MESSAGE`;
- the turn was cancelled (the ``cancel_turn`` RPC's answer, or a cancel
  request found while the interrupt is still pending): records ``cancelled``.

Each of these writes ``interrupt_resolved`` (``approved``: a result came) and
publishes the call's result.
"""

import math
from datetime import datetime, timedelta
from typing import assert_never

import attrs

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import End, Next, WaitAgain
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import (
    CancelRequestStore,
    Clock,
    InterruptStore,
    ToolCallStore,
)
from dex_agents.application.steps._shared import (
    ToolCallFinisher,
    approval_interrupt,
    raised_interrupt,
    tool_call_record,
    tool_step_movement,
)
from dex_agents.application.wiring import Wired
from dex_agents.domain import events as ev
from dex_agents.domain.interrupts import (
    EXPIRED_REJECTION_MESSAGE,
    EXPIRED_RESULT_MESSAGE,
    AgentInterrupt,
    AgentInterruptResolution,
    InterruptKind,
)
from dex_agents.domain.tools import AgentToolCall, ToolCallStatus
from dex_agents.domain.turn_control import cancel_rejection_message


@attrs.frozen(kw_only=True)
class ApprovalWait:
    """What ``AwaitToolApproval`` waits for."""

    interrupt_id: str
    """The answer's key in ``INTERRUPT_RESOLUTIONS``."""
    timer: timedelta | None
    """A Timer (whole seconds) at the deadline, or ``None`` when there is none to wait for."""


@attrs.frozen(kw_only=True)
class AwaitToolApproval(Wired):
    """Applies a person's answer, or the deadline, to one tool call."""

    tool_calls: ToolCallStore
    interrupts: InterruptStore
    tool_call_finisher: ToolCallFinisher
    events: AgentEventWriter
    options: AgentSessionOptions
    cancel_request: CancelRequestStore
    clock: Clock

    def plan_wait(self, tool_call_id: str, *, engine_now: datetime) -> ApprovalWait | None:
        """Return what to wait for, or ``None`` when the call needs no waiting.

        ``engine_now`` is the engine's time as this wait starts (Dex: the
        server-set ``first_attempt_at`` of ``wait_for``). The first wait of a
        call with a deadline stores it on its record (`AgentToolCall.waiting_deadline`:
        ``approval_deadline``, or ``result_deadline`` for a result from outside).
        """
        record = self._record(tool_call_id)
        match record.status:
            case ToolCallStatus.AWAITING_APPROVAL if not record.approval_to_raise:
                limit = self.options.interrupt_deadline
            case ToolCallStatus.AWAITING_RESULT if record.result_raised:
                limit = self.options.external_result_deadline
            case _:
                return None  # none to wait for, or execute raises the interrupt first, under the lock
        interrupt_id = record.waiting_interrupt_id
        assert interrupt_id is not None
        interrupt = self._pending(interrupt_id)
        if interrupt is not None and self._cancelled(record):
            return None  # execute rejects (or cancels) it at once
        if interrupt is None or limit is None:
            return ApprovalWait(interrupt_id=interrupt_id, timer=None)
        deadline = record.waiting_deadline
        if deadline is None:
            deadline = engine_now + limit
            self.tool_calls.put(record.with_waiting_deadline(deadline))
        seconds = math.ceil((deadline - engine_now).total_seconds())
        return ApprovalWait(interrupt_id=interrupt_id, timer=timedelta(seconds=max(0, seconds)))

    async def execute(
        self,
        tool_call_id: str,
        *,
        resolution: AgentInterruptResolution | None,
        timer_fired: bool,
        attempt: int = 1,
    ) -> Next:
        """Apply what the wait delivered; ``attempt`` is this ``execute`` call's attempt, from 1."""
        record = self._record(tool_call_id)
        if record.is_final:
            return End()
        if record.status is ToolCallStatus.APPROVED:
            return tool_step_movement(record)
        if record.status is ToolCallStatus.AWAITING_RESULT:
            return self._execute_result_wait(record, resolution=resolution, timer_fired=timer_fired, attempt=attempt)
        assert record.interrupt_id is not None
        if record.approval_to_raise:
            return self._raise_asked_approval(record, attempt=attempt)
        if resolution is not None:
            return self._apply(record, resolution)
        interrupt = self._pending(record.interrupt_id)
        cancelled = interrupt is not None and self._cancelled(record)
        if interrupt is None or not (timer_fired or cancelled):
            return WaitAgain(input=tool_call_id)
        if attempt > 1:
            # A retry reads the first attempt's snapshot, but the lock on the pending
            # interrupts is held per attempt: an answer or expiry committed in between
            # is missing from it, and writing the list back would resurrect that
            # interrupt. A new execution reads the list afresh and expires this one.
            return WaitAgain(input=tool_call_id)
        self.interrupts.set([i for i in self.interrupts.get() if i.interrupt_id != interrupt.interrupt_id])
        cancel = self.cancel_request.get()
        if cancelled and cancel is not None:
            rejection = AgentInterruptResolution(
                interrupt_id=interrupt.interrupt_id,
                approved=False,
                rejection_message=cancel_rejection_message(cancel.reason),
            )
            return self._apply(record, rejection)
        expired = AgentInterruptResolution(
            interrupt_id=interrupt.interrupt_id, approved=False, rejection_message=EXPIRED_REJECTION_MESSAGE
        )
        return self._apply(record, expired, expired=True)

    def _execute_result_wait(
        self, record: AgentToolCall, *, resolution: AgentInterruptResolution | None, timer_fired: bool, attempt: int
    ) -> Next:
        interrupt_id = record.result_interrupt_id
        assert interrupt_id is not None
        if resolution is not None:
            return self._apply_result(record, resolution)
        if attempt > 1:
            return WaitAgain(input=record.tool_call_id)  # as for approvals: never write a stale list back
        cancel = self.cancel_request.get()
        cancelled = cancel is not None and cancel.applies_to(record.turn_id)
        if not record.result_raised:
            if cancelled and cancel is not None:
                return self.tool_call_finisher.finish(record.cancel(cancel_rejection_message(cancel.reason)))
            self._raise_result_interrupt(record, interrupt_id)
            return WaitAgain(input=record.tool_call_id)
        interrupt = self._pending(interrupt_id)
        if interrupt is None or not (timer_fired or cancelled):
            return WaitAgain(input=record.tool_call_id)
        self.interrupts.set([i for i in self.interrupts.get() if i.interrupt_id != interrupt_id])
        if cancelled and cancel is not None:
            ending = AgentInterruptResolution(
                interrupt_id=interrupt_id, approved=False, rejection_message=cancel_rejection_message(cancel.reason)
            )
        else:
            ending = AgentInterruptResolution(
                interrupt_id=interrupt_id,
                approved=False,
                kind=InterruptKind.TOOL_RESULT,
                rejection_message=EXPIRED_RESULT_MESSAGE,
            )
        return self._apply_result(record, ending)

    def _raise_asked_approval(self, record: AgentToolCall, *, attempt: int) -> Next:
        """Raise the approval interrupt the call's tool asked for (or reject it when the turn was cancelled)."""
        if attempt > 1:
            return WaitAgain(input=record.tool_call_id)  # as for approvals: never write a stale list back
        cancel = self.cancel_request.get()
        if cancel is not None and cancel.applies_to(record.turn_id):
            return self.tool_call_finisher.finish(record.reject(cancel_rejection_message(cancel.reason)))
        raised = attrs.evolve(record, approval_to_raise=False)
        interrupt = approval_interrupt(raised, now=self.clock.now(), options=self.options, events=self.events)
        self.interrupts.set([*self.interrupts.get(), interrupt])
        self.tool_calls.put(raised)
        return WaitAgain(input=record.tool_call_id)

    def _raise_result_interrupt(self, record: AgentToolCall, interrupt_id: str) -> None:
        interrupt = raised_interrupt(
            record,
            interrupt_id,
            kind=InterruptKind.TOOL_RESULT,
            limit=self.options.external_result_deadline,
            now=self.clock.now(),
            events=self.events,
        )
        self.interrupts.set([*self.interrupts.get(), interrupt])
        self.tool_calls.put(attrs.evolve(record, result_raised=True))

    def _apply_result(self, record: AgentToolCall, resolution: AgentInterruptResolution) -> Next:
        """Apply a ``tool_result`` answer: a result, an error, the expiry, or a cancel's rejection."""
        match resolution.kind:
            case InterruptKind.TOOL_RESULT if resolution.error is None and resolution.result is not None:
                finished = record.succeed(resolution.result, attempt=record.attempts)
            case InterruptKind.TOOL_RESULT if resolution.error is not None:
                finished = record.fail(resolution.error, attempt=record.attempts)
            case InterruptKind.TOOL_RESULT:
                finished = record.expire(resolution.rejection_message or EXPIRED_RESULT_MESSAGE)
            case InterruptKind.APPROVAL:
                # cancel_turn answers every pending interrupt of the turn as a rejection.
                finished = record.cancel(resolution.rejection_message or cancel_rejection_message(None))
            case _:
                assert_never(resolution.kind)
        self.events.write(
            ev.interrupt_resolved(
                resolution.interrupt_id,
                approved=finished.status is ToolCallStatus.SUCCEEDED,
                rejection_message=finished.error if finished.error is not None else finished.rejection_message,
                kind=InterruptKind.TOOL_RESULT.value,
            )
        )
        return self.tool_call_finisher.finish(finished)

    def _apply(self, record: AgentToolCall, resolution: AgentInterruptResolution, *, expired: bool = False) -> Next:
        self.events.write(
            ev.interrupt_resolved(
                resolution.interrupt_id,
                approved=resolution.approved,
                rejection_message=resolution.rejection_message,
                approver=resolution.approver,
            )
        )
        if resolution.approved:
            approved = record.approve(resolution.approver, digest=resolution.call_digest)
            if record.result_interrupt_id is not None:
                # An external call: nothing runs here; it now waits for its result (raised on the next execution).
                self.tool_calls.put(approved.await_result(record.result_interrupt_id, attempt=0))
                return WaitAgain(input=record.tool_call_id)
            self.tool_calls.put(approved)
            return tool_step_movement(approved)
        finished = (
            record.expire(EXPIRED_REJECTION_MESSAGE)
            if expired
            else record.reject(resolution.rejection_message, resolution.approver)
        )
        return self.tool_call_finisher.finish(finished)

    def _cancelled(self, record: AgentToolCall) -> bool:
        cancel = self.cancel_request.get()
        return cancel is not None and cancel.applies_to(record.turn_id)

    def _record(self, tool_call_id: str) -> AgentToolCall:
        return tool_call_record(self.tool_calls, tool_call_id)

    def _pending(self, interrupt_id: str) -> AgentInterrupt | None:
        return next((i for i in self.interrupts.get() if i.interrupt_id == interrupt_id), None)
