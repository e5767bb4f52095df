"""Tool effects, policies, tool-call records and their legal transitions.

Effect table (what the session does with a call, by its effect):

| effect               | Step                    | attempts | after exhausted retries | approval |
|----------------------|-------------------------|----------|-------------------------|----------|
| read                 | `CallTool`              | 3        | `failed`                | no       |
| idempotent_write     | `CallTool`              | 3        | `outcome_unknown`       | no       |
| non_idempotent_write | `CallSingleAttemptTool` | 1        | `outcome_unknown`       | yes      |
| unclassified         | `CallSingleAttemptTool` | 1        | `outcome_unknown`       | yes      |

A write that exhausted its attempts may have taken effect, so it is recorded
as ``outcome_unknown``, never ``failed``. Policies resolve in order: an
explicit `ToolPolicy` for the tool name, then the effect the framework reports
(for example MCP ``readOnlyHint``), then the session's default effect.

A record moves through `TOOL_CALL_TRANSITIONS`; `transition` refuses anything
else with `InvalidTransitionError`.
"""

from collections.abc import Mapping
from enum import StrEnum

import attrs

from dex_agents.domain.errors import InvalidTransitionError


class ToolEffect(StrEnum):
    """What running a tool does to the world; decides retries and approval."""

    READ = "read"
    IDEMPOTENT_WRITE = "idempotent_write"
    NON_IDEMPOTENT_WRITE = "non_idempotent_write"
    UNCLASSIFIED = "unclassified"


class ToolStepKind(StrEnum):
    """The Step that runs a tool call."""

    CALL_TOOL = "CallTool"
    CALL_SINGLE_ATTEMPT_TOOL = "CallSingleAttemptTool"


class ToolCallStatus(StrEnum):
    """Where a tool call stands; the last four are final."""

    PENDING = "pending"
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"
    OUTCOME_UNKNOWN = "outcome_unknown"

    @property
    def is_final(self) -> bool:
        """Whether the call has its result (nothing more will run)."""
        return self in FINAL_TOOL_CALL_STATUSES


FINAL_TOOL_CALL_STATUSES: frozenset[ToolCallStatus] = frozenset(
    {
        ToolCallStatus.SUCCEEDED,
        ToolCallStatus.FAILED,
        ToolCallStatus.REJECTED,
        ToolCallStatus.OUTCOME_UNKNOWN,
    }
)
"""Statuses after which nothing more happens to a call."""

_RAN = frozenset({ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED, ToolCallStatus.OUTCOME_UNKNOWN})

TOOL_CALL_TRANSITIONS: Mapping[ToolCallStatus, frozenset[ToolCallStatus]] = {
    ToolCallStatus.PENDING: _RAN,
    ToolCallStatus.AWAITING_APPROVAL: frozenset({ToolCallStatus.APPROVED, ToolCallStatus.REJECTED}),
    ToolCallStatus.APPROVED: _RAN,
    ToolCallStatus.SUCCEEDED: frozenset(),
    ToolCallStatus.FAILED: frozenset(),
    ToolCallStatus.REJECTED: frozenset(),
    ToolCallStatus.OUTCOME_UNKNOWN: frozenset(),
}
"""Legal status changes of a tool-call record."""


def step_kind(effect: ToolEffect) -> ToolStepKind:
    """Return the Step that runs calls of ``effect``."""
    match effect:
        case ToolEffect.READ | ToolEffect.IDEMPOTENT_WRITE:
            return ToolStepKind.CALL_TOOL
        case ToolEffect.NON_IDEMPOTENT_WRITE | ToolEffect.UNCLASSIFIED:
            return ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL


def maximum_attempts(effect: ToolEffect) -> int:
    """Return how many attempts a call of ``effect`` gets."""
    match step_kind(effect):
        case ToolStepKind.CALL_TOOL:
            return 3
        case ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL:
            return 1


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
    return step_kind(effect) is ToolStepKind.CALL_SINGLE_ATTEMPT_TOOL


@attrs.frozen
class ToolPolicy:
    """How the session treats calls of one tool: ``ToolPolicy(ToolEffect.READ)``."""

    effect: ToolEffect
    """What running the tool does."""
    requires_approval: bool | None = attrs.field(default=None, kw_only=True)
    """Whether a person must approve each call; ``None`` uses the effect's default."""


def is_approval_required(policy: ToolPolicy) -> bool:
    """Return whether a call under ``policy`` waits for approval."""
    if policy.requires_approval is None:
        return default_requires_approval(policy.effect)
    return policy.requires_approval


def resolve_tool_policy(
    tool_name: str,
    *,
    explicit: Mapping[str, ToolPolicy],
    framework_effect: ToolEffect | None,
    default_effect: ToolEffect,
) -> ToolPolicy:
    """Return the policy for ``tool_name``.

    Order: the explicit policy for the name, then the effect the framework
    reports for the tool, then ``default_effect``.
    """
    policy = explicit.get(tool_name)
    if policy is not None:
        return policy
    if framework_effect is not None:
        return ToolPolicy(effect=framework_effect)
    return ToolPolicy(effect=default_effect)


def idempotency_key(flow_id: str, turn_id: str, tool_call_id: str) -> str:
    """Return ``<flow_id>/<turn_id>/<tool_call_id>``: the same on every attempt of one call."""
    return f"{flow_id}/{turn_id}/{tool_call_id}"


@attrs.frozen(kw_only=True)
class AgentToolCall:
    """The durable record of one tool call of the active turn."""

    tool_call_id: str
    """The framework's ID for the call; unique within the turn."""
    turn_id: str
    """The turn that requested it."""
    tool_name: str
    """The tool's name as the model called it."""
    arguments: str
    """The call's arguments as JSON text."""
    policy: ToolPolicy
    """The resolved policy."""
    deferral_order: int
    """Position in the turn, in model order (0-based); map keys do not keep order."""
    status: ToolCallStatus
    """Where the call stands."""
    output: str | None = None
    """The tool's result text, when ``succeeded``."""
    error: str | None = None
    """What went wrong, when ``failed`` or ``outcome_unknown``."""
    rejection_message: str | None = None
    """The person's reason, when ``rejected``."""
    interrupt_id: str | None = None
    """The approval interrupt, when the call needs approval."""

    @property
    def is_final(self) -> bool:
        """Whether the call has its result."""
        return self.status.is_final

    @property
    def requires_approval(self) -> bool:
        """Whether the call waits for approval before it runs."""
        return is_approval_required(self.policy)

    def approve(self) -> "AgentToolCall":
        """Return the record approved."""
        return transition(self, to=ToolCallStatus.APPROVED)

    def reject(self, rejection_message: str | None) -> "AgentToolCall":
        """Return the record rejected with ``rejection_message``."""
        return transition(self, to=ToolCallStatus.REJECTED, rejection_message=rejection_message)

    def succeed(self, output: str) -> "AgentToolCall":
        """Return the record succeeded with ``output``."""
        return transition(self, to=ToolCallStatus.SUCCEEDED, output=output)

    def fail(self, error: str) -> "AgentToolCall":
        """Return the record failed with ``error``."""
        return transition(self, to=ToolCallStatus.FAILED, error=error)

    def mark_outcome_unknown(self, error: str) -> "AgentToolCall":
        """Return the record with an unknown outcome."""
        return transition(self, to=ToolCallStatus.OUTCOME_UNKNOWN, error=error)

    def after_exhausted_retries(self, error: str) -> "AgentToolCall":
        """Return the record as its effect requires once every attempt failed."""
        return transition(self, to=status_after_exhausted_retries(self.policy.effect), error=error)


def transition(
    record: AgentToolCall,
    *,
    to: ToolCallStatus,
    output: str | None = None,
    error: str | None = None,
    rejection_message: str | None = None,
) -> AgentToolCall:
    """Return ``record`` moved to status ``to``.

    Raises:
        InvalidTransitionError: ``TOOL_CALL_TRANSITIONS`` does not allow the move.
    """
    if to not in TOOL_CALL_TRANSITIONS[record.status]:
        raise InvalidTransitionError(
            f"tool call {record.tool_call_id!r} cannot go from {record.status.value!r} to {to.value!r}"
        )
    return attrs.evolve(record, status=to, output=output, error=error, rejection_message=rejection_message)


@attrs.frozen(kw_only=True)
class ToolCallCompleted:
    """Published on ``TOOL_CALL_RESULTS`` once per tool call, when its record became final."""

    tool_call_id: str
    """The call."""
    turn_id: str
    """Its turn."""
    status: ToolCallStatus
    """Its final status."""
