"""Tool effects, tool-call statuses and the legal status changes, with the rules each effect follows.

`dex_agents.domain.tools` names them all, beside the policies and the
tool-call records; its docstring is their contract.
"""

from collections.abc import Mapping
from enum import StrEnum


class ToolEffect(StrEnum):
    """What running a tool does to the world; decides retries and approval."""

    READ = "read"
    IDEMPOTENT_WRITE = "idempotent_write"
    NON_IDEMPOTENT_WRITE = "non_idempotent_write"
    UNCLASSIFIED = "unclassified"


class ToolCallStatus(StrEnum):
    """Where a tool call stands; `FINAL_TOOL_CALL_STATUSES` are final.

    ``reconciling``: the outcome was unknown and the tool's reconcile probe is
    asking whether the call took effect. ``not_applied``: the probe found it
    did not take effect (the model may call it again). ``queued``: the call
    waits for the calls before it in the model's order to end. ``awaiting_result``:
    the call waits for its result from outside the session (``submit_tool_result``).
    ``awaiting_approval``: the call waits for a person's answer, asked before its
    tool Step (its policy) or by its tool while the Step ran (from ``pending``).
    """

    QUEUED = "queued"
    PENDING = "pending"
    AWAITING_APPROVAL = "awaiting_approval"
    AWAITING_RESULT = "awaiting_result"
    APPROVED = "approved"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"
    EXPIRED = "expired"
    OUTCOME_UNKNOWN = "outcome_unknown"
    RECONCILING = "reconciling"
    NOT_APPLIED = "not_applied"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        """Whether the call has its result (nothing more will run)."""
        return self in FINAL_TOOL_CALL_STATUSES


FINAL_TOOL_CALL_STATUSES: frozenset[ToolCallStatus] = frozenset(
    {
        ToolCallStatus.SUCCEEDED,
        ToolCallStatus.FAILED,
        ToolCallStatus.REJECTED,
        ToolCallStatus.EXPIRED,
        ToolCallStatus.OUTCOME_UNKNOWN,
        ToolCallStatus.NOT_APPLIED,
        ToolCallStatus.CANCELLED,
    }
)
"""Statuses after which nothing more happens to a call."""

_RAN = frozenset(
    {ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED, ToolCallStatus.OUTCOME_UNKNOWN, ToolCallStatus.RECONCILING}
)
_STARTABLE = _RAN | {ToolCallStatus.CANCELLED, ToolCallStatus.AWAITING_RESULT}

TOOL_CALL_TRANSITIONS: Mapping[ToolCallStatus, frozenset[ToolCallStatus]] = {
    ToolCallStatus.QUEUED: frozenset(
        {
            ToolCallStatus.PENDING,
            ToolCallStatus.AWAITING_APPROVAL,
            ToolCallStatus.AWAITING_RESULT,
            ToolCallStatus.CANCELLED,
        }
    ),
    # A tool that asked for approval while its Step ran (before acting) waits for it like a policy's call.
    ToolCallStatus.PENDING: _STARTABLE | {ToolCallStatus.AWAITING_APPROVAL},
    ToolCallStatus.AWAITING_APPROVAL: frozenset(
        {ToolCallStatus.APPROVED, ToolCallStatus.REJECTED, ToolCallStatus.EXPIRED}
    ),
    ToolCallStatus.AWAITING_RESULT: frozenset(
        {ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED, ToolCallStatus.EXPIRED, ToolCallStatus.CANCELLED}
    ),
    ToolCallStatus.APPROVED: _STARTABLE,
    ToolCallStatus.SUCCEEDED: frozenset(),
    ToolCallStatus.FAILED: frozenset(),
    ToolCallStatus.REJECTED: frozenset(),
    ToolCallStatus.EXPIRED: frozenset(),
    ToolCallStatus.OUTCOME_UNKNOWN: frozenset(),
    ToolCallStatus.RECONCILING: frozenset(
        {ToolCallStatus.SUCCEEDED, ToolCallStatus.NOT_APPLIED, ToolCallStatus.OUTCOME_UNKNOWN}
    ),
    ToolCallStatus.NOT_APPLIED: frozenset(),
    ToolCallStatus.CANCELLED: frozenset(),
}
"""Legal status changes of a tool-call record."""


def is_single_attempt(effect: ToolEffect) -> bool:
    """Whether calls of ``effect`` run exactly once: running one twice could do its work twice."""
    match effect:
        case ToolEffect.READ | ToolEffect.IDEMPOTENT_WRITE:
            return False
        case ToolEffect.NON_IDEMPOTENT_WRITE | ToolEffect.UNCLASSIFIED:
            return True


def maximum_attempts(effect: ToolEffect) -> int:
    """Return how many attempts a call of ``effect`` gets: 1 for a single-attempt effect, else 3."""
    return 1 if is_single_attempt(effect) else 3


def status_after_exhausted_retries(effect: ToolEffect) -> ToolCallStatus:
    """Return the status recorded when every attempt failed.

    Only a read is known not to have changed anything; any write may have
    taken effect before its attempt failed.
    """
    if effect is ToolEffect.READ:
        return ToolCallStatus.FAILED
    return ToolCallStatus.OUTCOME_UNKNOWN


def default_requires_approval(effect: ToolEffect) -> bool:
    """Return whether calls of ``effect`` wait for approval unless a policy says otherwise."""
    return is_single_attempt(effect)
