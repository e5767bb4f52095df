"""``resolve_interrupt``: answer an approval (locks ``PENDING_INTERRUPTS``).

Answers ``False`` when the interrupt is not pending (answered, cancelled, or
expired: ``AwaitToolApproval`` removes it when the engine's deadline Timer
fires; no Worker clock is asked here), and when the request fails the
client's checks (`id_refusal`, `text_refusal` of the rejection message).
Otherwise removes it from the pending interrupts and publishes the answer
(without a rejection message when approved; an approval bound to the
request's ``call_digest``, else the interrupt's), both in the RPC's one commit, and
answers ``True``. RPCs cannot write live events; ``AwaitToolApproval`` writes
``interrupt_resolved`` when it applies the answer.
"""

import attrs

from dex_agents.application.inputs import id_refusal, text_refusal
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import InterruptStore, ResolutionPublisher
from dex_agents.application.wiring import Wired
from dex_agents.domain.errors import InvalidInputError
from dex_agents.domain.interrupts import AgentInterruptResolution, ResolveInterruptRequest


@attrs.frozen(kw_only=True)
class ResolveInterrupt(Wired):
    """Accepts a person's answer to a pending interrupt."""

    interrupts: InterruptStore
    resolutions: ResolutionPublisher
    options: AgentSessionOptions

    async def execute(self, request: ResolveInterruptRequest) -> bool:
        """Accept the answer; ``False`` when it cannot be accepted."""
        if request_refusal(request, self.options) is not None:
            return False
        pending = self.interrupts.get()
        interrupt = next((i for i in pending if i.interrupt_id == request.interrupt_id), None)
        if interrupt is None:
            return False
        self.interrupts.set([i for i in pending if i.interrupt_id != request.interrupt_id])
        self.resolutions.publish(AgentInterruptResolution.from_request(request, interrupt))
        return True


def request_refusal(request: ResolveInterruptRequest, options: AgentSessionOptions) -> InvalidInputError | None:
    """Return the error refusing ``request`` before it is looked at, or ``None``."""
    refused = id_refusal(request.interrupt_id, field="interrupt_id", what="the interrupt ID", allow_slash=False)
    if refused is None and request.rejection_message is not None:
        refused = text_refusal(
            request.rejection_message,
            options=options,
            field="rejection_message",
            what="the rejection message",
            allow_blank=True,
        )
    if refused is None and request.approver is not None:
        refused = id_refusal(request.approver, field="approver", what="the approver")
    if refused is None and request.call_digest is not None:
        refused = id_refusal(request.call_digest, field="call_digest", what="the call digest", allow_slash=False)
    return refused
