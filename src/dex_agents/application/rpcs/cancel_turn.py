"""``cancel_turn``: ask the active turn to stop (locks ``PENDING_INTERRUPTS``).

Answers ``False`` when no turn runs (or the reason is refused by
`text_refusal`). Otherwise, in the RPC's one commit: stores a
`TurnCancelRequest` for the active turn, and answers every pending approval
of that turn ``rejected`` with `cancel_rejection_message` (removed from the
pending interrupts, the answer published for ``AwaitToolApproval``); answers
``True``. The request is durable: whichever Worker runs the turn's next
Steps acts on it, once.

The pending interrupts are written only when the cancel answered one: the
list is read when the RPC starts, and ``RunModel`` raises interrupts without
taking its lock, so writing back an unchanged list could drop an interrupt
raised meanwhile (its approval would then wait with nothing pending). Such an
interrupt stays pending; its approval Step rejects it as cancelled if its wait
starts after this commit, else when its deadline passes (or when answered).

What the request does is up to the Steps, at safe boundaries: a tool Step
that has not started records ``cancelled``; an approval Step whose interrupt
was raised after this commit rejects it the same way; a running tool
finishes and keeps its result; the next ``RunModel`` ends the turn before it
calls the model (`TurnCloser.end_if_cancelled`). A ``RunModel`` already calling the
model when the request commits is not stopped: its snapshot predates the
request, so the cancel takes effect when that call returns (a final answer
completes the turn; tool calls requested then are cancelled before they run).
"""

import attrs

from dex_agents.application.inputs import text_refusal
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import CancelRequestStore, InterruptStore, ResolutionPublisher, SessionStateStore
from dex_agents.application.wiring import Wired
from dex_agents.domain.interrupts import AgentInterruptResolution
from dex_agents.domain.turn_control import CancelTurnRequest, TurnCancelRequest, cancel_rejection_message


@attrs.frozen(kw_only=True)
class CancelTurn(Wired):
    """Records a request to cancel the active turn and rejects its pending approvals."""

    session_state: SessionStateStore
    interrupts: InterruptStore
    resolutions: ResolutionPublisher
    cancel_request: CancelRequestStore
    options: AgentSessionOptions

    async def execute(self, request: CancelTurnRequest) -> bool:
        """Request the cancel; ``False`` when no turn runs or the reason is refused."""
        if request.reason is not None and text_refusal(
            request.reason, options=self.options, field="reason", what="the cancel reason", allow_blank=True
        ):
            return False
        state = self.session_state.get()
        if state is None or state.active_turn_id is None:
            return False
        turn_id = state.active_turn_id
        self.cancel_request.set(TurnCancelRequest(turn_id=turn_id, reason=request.reason))
        message = cancel_rejection_message(request.reason)
        pending = self.interrupts.get()
        answered = [i for i in pending if i.turn_id == turn_id]
        for interrupt in answered:
            self.resolutions.publish(
                AgentInterruptResolution(interrupt_id=interrupt.interrupt_id, approved=False, rejection_message=message)
            )
        if answered:
            # Written only when something was removed: ``RunModel`` adds interrupts without this lock, and a
            # list read before its commit, written back after it, would lose the interrupts it raised.
            self.interrupts.set([i for i in pending if i.turn_id != turn_id])
        return True
