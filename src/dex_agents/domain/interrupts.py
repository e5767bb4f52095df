"""Approval interrupts: a tool call waiting for a person's answer.

An interrupt has an optional deadline; once it passes unanswered, the call
ends ``expired`` (not ``rejected``) and the model is told so with
`EXPIRED_REJECTION_MESSAGE`. The deadline is measured by the engine (a Dex
Timer, on the server's clock); an answer that arrives once the expiry is
recorded is refused. An answer may name its ``approver``; the record, its stored
outcome and the ``interrupt_resolved`` event keep the name. An approval is
bound to the digest of the tool name and canonical arguments the interrupt was
raised with (or the one the approver sends): the tool Step runs the call only
when its own digest matches, and fails it clearly otherwise.
"""

from datetime import datetime

import attrs

EXPIRED_REJECTION_MESSAGE = (
    "The tool call did not run: its approval expired (the deadline passed before anyone answered)."
)
"""What the model sees for an ``expired`` call (its record's ``rejection_message``)."""


def interrupt_id_for(turn_id: str, tool_call_id: str) -> str:
    """Return the interrupt ID of a tool call: unique across turns, even when call IDs repeat."""
    return f"{turn_id}.{tool_call_id}"


@attrs.frozen(kw_only=True)
class AgentInterrupt:
    """A tool call waiting for approval (an item of ``PENDING_INTERRUPTS``)."""

    interrupt_id: str
    """Key of the answer in ``INTERRUPT_RESOLUTIONS``."""
    turn_id: str
    """The turn of the call."""
    tool_call_id: str
    """The call waiting for approval."""
    tool_name: str
    """The tool's name."""
    arguments: str
    """The call's arguments as JSON text."""
    raised_at: datetime
    """When the session asked (Worker clock, UTC)."""
    deadline: datetime | None = None
    """About when an unanswered request expires (``raised_at`` plus the deadline, Worker clock, for display),
    or ``None`` for never. The engine's Timer decides (`AgentToolCall.approval_deadline`)."""
    call_digest: str | None = None
    """The digest of the tool name and canonical arguments (`dex_agents.domain.tools.call_digest`) an approval binds."""

    def is_expired(self, now: datetime) -> bool:
        """Whether the deadline has passed at ``now``."""
        return self.deadline is not None and now >= self.deadline


@attrs.frozen(kw_only=True)
class ResolveInterruptRequest:
    """A person's answer to an interrupt (the ``resolve_interrupt`` input)."""

    interrupt_id: str
    """The interrupt answered."""
    approved: bool
    """Whether the call may run."""
    rejection_message: str | None = None
    """Why not; dropped on approval."""
    approver: str | None = None
    """Who answered, for the record (optional)."""
    call_digest: str | None = None
    """The digest of the call the approver saw (the interrupt's ``call_digest``); ``None`` binds the approval to
    the pending interrupt's digest."""


@attrs.frozen(kw_only=True)
class AgentInterruptResolution:
    """An accepted answer, published on ``INTERRUPT_RESOLUTIONS`` under the interrupt ID."""

    interrupt_id: str
    """The interrupt answered."""
    approved: bool
    """Whether the call may run."""
    rejection_message: str | None = None
    """Why not; always ``None`` when approved."""
    approver: str | None = None
    """Who answered, when the answer named someone."""
    call_digest: str | None = None
    """The digest of the call an approval was given for; the tool Step runs only a call with that digest."""

    @classmethod
    def from_request(
        cls, request: ResolveInterruptRequest, interrupt: AgentInterrupt | None = None
    ) -> "AgentInterruptResolution":
        """Build the resolution of ``request`` to ``interrupt``, dropping the message of an approval.

        The approval is bound to the request's digest, else the interrupt's.
        """
        digest = request.call_digest
        if digest is None and interrupt is not None:
            digest = interrupt.call_digest
        return cls(
            interrupt_id=request.interrupt_id,
            approved=request.approved,
            rejection_message=None if request.approved else request.rejection_message,
            approver=request.approver,
            call_digest=digest if request.approved else None,
        )
