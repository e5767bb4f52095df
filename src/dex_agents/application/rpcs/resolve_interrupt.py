"""``resolve_interrupt``: answer an approval (locks ``PENDING_INTERRUPTS``).

Answers ``False`` when the interrupt is not pending or its deadline has passed.
Otherwise removes it from the pending interrupts and publishes the answer
(without a rejection message when approved), both in the RPC's one commit, and
answers ``True``. RPCs cannot write live events; ``AwaitToolApproval`` writes
``interrupt_resolved`` when it applies the answer.
"""

from dex_agents.application.ports import Clock, InterruptStore, ResolutionPublisher
from dex_agents.domain.interrupts import AgentInterruptResolution, ResolveInterruptRequest


class ResolveInterrupt:
    """Accepts a person's answer to a pending interrupt."""

    def __init__(self, *, interrupts: InterruptStore, resolutions: ResolutionPublisher, clock: Clock) -> None:
        self._interrupts = interrupts
        self._resolutions = resolutions
        self._clock = clock

    async def execute(self, request: ResolveInterruptRequest) -> bool:
        """Accept the answer; ``False`` when it cannot be accepted."""
        pending = self._interrupts.get()
        interrupt = next((i for i in pending if i.interrupt_id == request.interrupt_id), None)
        if interrupt is None or interrupt.is_expired(self._clock.now()):
            return False
        self._interrupts.set([i for i in pending if i.interrupt_id != request.interrupt_id])
        self._resolutions.publish(AgentInterruptResolution.from_request(request))
        return True
