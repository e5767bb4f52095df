"""Interrupts: a tool call waiting for a person's answer, or for its result from outside.

An interrupt has a kind (`InterruptKind`). An ``approval`` waits for a yes or
no before the call runs. A ``tool_result`` waits for the call's result from
outside the session: the call's tool is an external tool (Pydantic AI's
``ExternalToolset``), or it raised ``CallDeferred`` in its Step. The answer is
``submit_tool_result`` (a `SubmitToolResultRequest`): a JSON result or an
error text. A ``tool_result`` interrupt has its own ID (`result_interrupt_id_for`),
so a call that was approved first keeps both answers apart; its deadline is
``result_deadline`` and, once it passes unanswered, the call ends ``expired``
with `EXPIRED_RESULT_MESSAGE`.

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
from enum import StrEnum

import attrs

EXPIRED_REJECTION_MESSAGE = (
    "The tool call did not run: its approval expired (the deadline passed before anyone answered)."
)
"""What the model sees for an ``expired`` call (its record's ``rejection_message``)."""


EXPIRED_RESULT_MESSAGE = "The tool call has no result: nobody submitted one before its deadline passed."
"""What the model sees for a call whose ``tool_result`` interrupt expired."""


class InterruptKind(StrEnum):
    """What an interrupt waits for."""

    APPROVAL = "approval"
    """A person's approval before the call runs (``resolve_interrupt``)."""
    TOOL_RESULT = "tool_result"
    """The call's result from outside the session (``submit_tool_result``)."""


def result_interrupt_id_for(turn_id: str, tool_call_id: str) -> str:
    """Return the ID of a call's ``tool_result`` interrupt: apart from its approval's (`interrupt_id_for`)."""
    return f"{turn_id}.{tool_call_id}.result"


def interrupt_id_for(turn_id: str, tool_call_id: str) -> str:
    """Return the interrupt ID of a tool call: unique across turns, even when call IDs repeat."""
    return f"{turn_id}.{tool_call_id}"


@attrs.frozen(kw_only=True)
class AgentInterrupt:
    """A tool call waiting for approval or for its result (an item of ``PENDING_INTERRUPTS``)."""

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
    kind: InterruptKind = InterruptKind.APPROVAL
    """What the interrupt waits for: an approval (``resolve_interrupt``) or a result (``submit_tool_result``)."""

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
    kind: InterruptKind = InterruptKind.APPROVAL
    """The kind of interrupt answered. For ``tool_result``, ``approved`` says whether a result (not an error)
    came, and ``result`` or ``error`` holds it."""
    result: str | None = None
    """The submitted result as JSON text (a ``tool_result`` answer without an error)."""
    error: str | None = None
    """The submitted error text (a ``tool_result`` answer that is an error)."""

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


@attrs.frozen(kw_only=True)
class SubmitToolResultRequest:
    """The result of a call waiting for it (the ``submit_tool_result`` input): exactly one of ``result``, ``error``."""

    tool_call_id: str
    """The call of the active turn that waits for its result."""
    result: str | None = None
    """The result as JSON text: what the model sees as the tool's return value."""
    error: str | None = None
    """An error text instead: the model sees it as Pydantic AI's retry feedback (``ModelRetry``)."""

    def resolution(self, interrupt: AgentInterrupt) -> AgentInterruptResolution:
        """Return the answer to ``interrupt`` that ``submit_tool_result`` publishes."""
        return AgentInterruptResolution(
            interrupt_id=interrupt.interrupt_id,
            approved=self.error is None,
            kind=InterruptKind.TOOL_RESULT,
            result=self.result if self.error is None else None,
            error=self.error,
        )


class SubmitToolResultAnswer(StrEnum):
    """What ``submit_tool_result`` did; the client raises for everything but ``accepted``."""

    ACCEPTED = "accepted"
    """The result was published; the call's wait applies it."""
    REFUSED = "refused"
    """The request failed the input checks (the client checks them first)."""
    UNKNOWN_CALL = "unknown_call"
    """The active turn has no such call."""
    NOT_YET_WAITING = "not_yet_waiting"
    """The call is about to wait for its result (its interrupt is not raised yet): try again shortly."""
    ALREADY_ANSWERED = "already_answered"
    """The call has its result already (submitted, expired, or cancelled)."""
    NOT_AWAITING_RESULT = "not_awaiting_result"
    """The call does not wait for a result (it waits for approval, or runs its own tool)."""
