"""Tool effects, policies, tool-call records and their legal transitions.

What the session does with a call by its effect (its Step, attempts, outcome
after exhausted retries and default approval) is the effect table of the
`dex_agents` package docstring; `is_single_attempt`,
`status_after_exhausted_retries` and `default_requires_approval` are its
domain rules, and `dex_agents.application.policies.tool_step_name` maps them
onto Steps. A write that exhausted its attempts may have taken effect, so it
is recorded as ``outcome_unknown``, never ``failed``. Policies resolve in
order: an explicit `ToolPolicy` for the tool name, then the effect the
framework reports (for example MCP ``readOnlyHint``), then the session's
default effect.

A single-attempt call whose outcome is unknown and whose policy is
``reconcilable`` goes to ``reconciling`` instead (`AgentToolCall.unknown_outcome`):
its tool's reconcile probe then settles it ``succeeded`` (with the output the
probe found), ``not_applied`` (it did not take effect) or ``outcome_unknown``.

A record moves through `TOOL_CALL_TRANSITIONS`; `transition` refuses anything
else with `InvalidTransitionError`. A call waiting for approval ends
``rejected`` when a person said no and ``expired`` when its deadline passed
unanswered; neither ran. A tool may also ask for approval itself while its Step
runs, before it acts (Pydantic AI's ``ApprovalRequired``): the call moves from
``pending`` to ``awaiting_approval`` (`AgentToolCall.ask_approval`), its
interrupt raised by ``AwaitToolApproval``, and once approved its tool Step
runs again (the tool now told it is approved). A call its turn's cancel reached before it started
ends ``cancelled`` (from ``pending``, ``approved`` or ``queued``); it did not run either.

A call whose result comes from outside the session (an external tool, or a
tool that deferred its own call) moves from ``pending`` or ``approved`` to
``awaiting_result`` (`AgentToolCall.await_result`) and ends ``succeeded``
with the submitted JSON, ``failed`` with the submitted error, ``expired``
when its deadline passed unanswered, or ``cancelled``; its
``result_interrupt_id`` says its result came (or comes) from outside.

A call that must wait for the calls before it in the model's order (a
``sequential`` call, or a call after one: `dex_agents.domain.tool_order`)
starts ``queued``; when its turn comes it moves to ``pending``, or to
``awaiting_approval`` when it needs approval.

When a turn ends, its records are deleted; what each call came to stays on the
stored messages as a `ToolOutcome` (`AgentToolCall.outcome`).

The effects, statuses, their transitions and the effect rules live in
`dex_agents.domain.tool_status`; this module names them all.
"""

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import assert_never

import attrs

from dex_agents.domain.errors import InvalidTransitionError
from dex_agents.domain.tool_status import FINAL_TOOL_CALL_STATUSES as FINAL_TOOL_CALL_STATUSES
from dex_agents.domain.tool_status import TOOL_CALL_TRANSITIONS as TOOL_CALL_TRANSITIONS
from dex_agents.domain.tool_status import ToolCallStatus as ToolCallStatus
from dex_agents.domain.tool_status import ToolEffect as ToolEffect
from dex_agents.domain.tool_status import default_requires_approval as default_requires_approval
from dex_agents.domain.tool_status import is_single_attempt as is_single_attempt
from dex_agents.domain.tool_status import maximum_attempts as maximum_attempts
from dex_agents.domain.tool_status import status_after_exhausted_retries as status_after_exhausted_retries
from dex_agents.domain.usage import AgentUsage
from dex_agents.domain.window import ModelWindow


@attrs.frozen
class ToolPolicy:
    """How the session treats calls of one tool: ``ToolPolicy(effect, requires_approval=None, *, reconcilable=False)``.

    Positional: ``effect`` and ``requires_approval``; ``reconcilable`` is keyword-only.
    """

    effect: ToolEffect
    """What running the tool does."""
    requires_approval: bool | None = None
    """Whether a person must approve each call; ``None`` uses the effect's default."""
    reconcilable: bool = attrs.field(default=False, kw_only=True)
    """Whether the tool has a reconcile probe: a single-attempt call whose outcome is unknown
    is then reconciled (``ReconcileToolCall``) instead of staying ``outcome_unknown``."""


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


def call_digest(tool_name: str, arguments: str) -> str:
    """Return the digest an approval is bound to: SHA-256 of the tool name and the canonical JSON arguments.

    Canonical: keys sorted, no insignificant whitespace, UTF-8; arguments that
    are not JSON are digested as their text.
    """
    try:
        canonical = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        canonical = arguments
    payload = json.dumps([tool_name, canonical], ensure_ascii=False)
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


def idempotency_key(flow_id: str, turn_id: str, tool_call_id: str) -> str:
    """Return ``<flow_id>/<turn_id>/<tool_call_id>``: the same on every attempt of one call."""
    return f"{flow_id}/{turn_id}/{tool_call_id}"


class ApprovalStatus(StrEnum):
    """How a call's approval ended."""

    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"


@attrs.frozen(kw_only=True)
class ToolOutcome:
    """What one tool call came to: a display field of the stored messages that answer it.

    Kept after the turn ends (the records are deleted then), so an application
    reads every past call's outcome from the snapshot or a message page.
    """

    tool_call_id: str
    """The call."""
    tool_name: str
    """The tool's name."""
    status: ToolCallStatus
    """Its final status."""
    effect: ToolEffect
    """The effect its policy gave it."""
    attempts: int
    """Attempts that ran (see `AgentToolCall.attempts`); 0 when it never ran."""
    approval: ApprovalStatus | None = None
    """How its approval ended; ``None`` when it needed none."""
    approver: str | None = None
    """Who answered the approval, when the answer named someone."""
    error: str | None = None
    """What went wrong, when ``failed`` or ``outcome_unknown``."""
    rejection_message: str | None = None
    """Why it did not run, when ``rejected``, ``expired`` or ``cancelled``."""


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
    """The person's reason, when ``rejected``; why it did not run when ``expired`` or ``cancelled``."""
    interrupt_id: str | None = None
    """The approval interrupt, when the call needs approval."""
    attempts: int = 0
    """Attempts of the tool Step that ran the call: the attempt that ended it, or
    after a failure route the effect's maximum (the engine does not say how many
    ran); 0 while nothing ran and for a call that never ran."""
    approver: str | None = None
    """Who answered the approval, when the answer named someone."""
    approved_digest: str | None = None
    """The `call_digest` the approval was given for; the tool Step runs the call only when it is this call's."""
    approval_deadline: datetime | None = None
    """When the approval expires, on the engine's clock: set by ``AwaitToolApproval`` when it first waits
    (the engine's time then plus ``interrupt_deadline``); ``None`` without a deadline or before that wait."""
    framework_state: str | None = None
    """Runner-owned text: `DeferredToolCall.framework_state` until the tool Step ends, then the
    ``framework_state`` of its `ToolExecutionResult` or `ToolExecutionError` when it gives one."""
    sequential: bool = False
    """Whether the call runs alone: the calls before it end first, and the calls after it start once it ended."""
    usage: AgentUsage | None = None
    """The framework's model usage while the tool ran (a sub-agent's), as its tool Step reported it."""
    result_interrupt_id: str | None = None
    """The ``tool_result`` interrupt of a call whose result comes from outside the session; set when it starts
    waiting, kept once it ends (the result, then ``output`` as JSON text, came from ``submit_tool_result``)."""
    result_raised: bool = False
    """Whether the ``tool_result`` interrupt was raised (``AwaitToolApproval`` raises it under the lock on the
    pending interrupts, since tool Steps run side by side)."""
    result_deadline: datetime | None = None
    """When the wait for an outside result ends, on the engine's clock (as ``approval_deadline``, with
    ``external_result_deadline``); ``None`` without a deadline or before the wait started."""
    approval_to_raise: bool = False
    """Whether the call's tool asked for approval while its Step ran (`ask_approval`) and the interrupt is not
    raised yet: ``AwaitToolApproval`` raises it under the lock on the pending interrupts, then clears this."""
    history_window: ModelWindow | None = None
    """The model's window when the call was asked for, for a call whose tool Step reads the turn's history
    (`DeferredToolCall.reads_history`): its tool Step loads these messages, the summary and the run state;
    ``None``: it loads none of them."""
    resumes_turn: bool = False
    """Whether the Step that ends the call resumes the turn itself, with no ``ResumeTurn`` joining its result:
    the model's response asked for this one call, and it started ``pending``. Cleared when it waits for an answer."""

    @property
    def has_external_result(self) -> bool:
        """Whether the call's result comes from outside the session (``submit_tool_result``)."""
        return self.result_interrupt_id is not None

    @property
    def waiting_interrupt_id(self) -> str | None:
        """The interrupt the call waits for now: its result's while ``awaiting_result``, else its approval's."""
        if self.status is ToolCallStatus.AWAITING_RESULT:
            return self.result_interrupt_id
        return self.interrupt_id

    @property
    def waiting_deadline(self) -> datetime | None:
        """The deadline of the wait the call is in now: its result's while ``awaiting_result``, else its approval's."""
        if self.status is ToolCallStatus.AWAITING_RESULT:
            return self.result_deadline
        return self.approval_deadline

    def with_waiting_deadline(self, deadline: datetime) -> "AgentToolCall":
        """Return the record with ``deadline`` as its `waiting_deadline`."""
        if self.status is ToolCallStatus.AWAITING_RESULT:
            return attrs.evolve(self, result_deadline=deadline)
        return attrs.evolve(self, approval_deadline=deadline)

    @property
    def digest(self) -> str:
        """This call's `call_digest` (tool name and canonical arguments)."""
        return call_digest(self.tool_name, self.arguments)

    @property
    def is_final(self) -> bool:
        """Whether the call has its result."""
        return self.status.is_final

    @property
    def requires_approval(self) -> bool:
        """Whether the call waits for approval before it runs."""
        return is_approval_required(self.policy)

    @property
    def approval(self) -> "ApprovalStatus | None":
        """How the approval ended (``approved`` once it ran), or ``None`` when none was asked or it is open."""
        if self.interrupt_id is None:
            return None
        match self.status:
            case ToolCallStatus.REJECTED:
                return ApprovalStatus.REJECTED
            case ToolCallStatus.EXPIRED:
                # An expired wait for an outside result follows an approval that was given.
                return ApprovalStatus.APPROVED if self.has_external_result else ApprovalStatus.EXPIRED
            case ToolCallStatus.AWAITING_APPROVAL | ToolCallStatus.PENDING | ToolCallStatus.QUEUED:
                return None
            case ToolCallStatus.CANCELLED:
                approved = self.approver is not None or self.approved_digest is not None or self.has_external_result
                return ApprovalStatus.APPROVED if approved else None
            case (
                ToolCallStatus.APPROVED
                | ToolCallStatus.AWAITING_RESULT
                | ToolCallStatus.SUCCEEDED
                | ToolCallStatus.FAILED
                | ToolCallStatus.OUTCOME_UNKNOWN
                | ToolCallStatus.RECONCILING
                | ToolCallStatus.NOT_APPLIED
            ):
                return ApprovalStatus.APPROVED
            case _:
                assert_never(self.status)

    def approve(self, approver: str | None = None, *, digest: str | None = None) -> "AgentToolCall":
        """Return the record approved (by ``approver``, when named) for the call of ``digest``."""
        return attrs.evolve(transition(self, to=ToolCallStatus.APPROVED), approver=approver, approved_digest=digest)

    def approval_mismatch(self) -> str | None:
        """Return why an approved call must not run (its approval was for another call), or ``None``."""
        if self.interrupt_id is None or self.approved_digest == self.digest:
            return None
        return (
            f"The tool call did not run: its approval was given for a different call "
            f"(digest {self.approved_digest}), not this {self.tool_name} call with these arguments "
            f"(digest {self.digest})."
        )

    def reject(self, rejection_message: str | None, approver: str | None = None) -> "AgentToolCall":
        """Return the record rejected with ``rejection_message`` (by ``approver``, when named)."""
        rejected = transition(self, to=ToolCallStatus.REJECTED, rejection_message=rejection_message)
        return attrs.evolve(rejected, approver=approver)

    def expire(self, message: str) -> "AgentToolCall":
        """Return the record expired: its approval deadline passed unanswered; ``message`` is what the model sees."""
        return transition(self, to=ToolCallStatus.EXPIRED, rejection_message=message)

    def cancel(self, message: str) -> "AgentToolCall":
        """Return the record ``cancelled`` before it started: its turn was cancelled; ``message`` is the reason."""
        return transition(self, to=ToolCallStatus.CANCELLED, rejection_message=message)

    def ask_approval(self, interrupt_id: str, *, attempt: int = 1) -> "AgentToolCall":
        """Return the ``pending`` record waiting for approval its tool asked for on ``attempt``, before acting.

        The approval interrupt (``interrupt_id``) is still to be raised (`approval_to_raise`).
        """
        asking = transition(self, to=ToolCallStatus.AWAITING_APPROVAL)
        return attrs.evolve(
            asking, interrupt_id=interrupt_id, attempts=attempt, approval_to_raise=True, resumes_turn=False
        )

    def await_result(self, interrupt_id: str, *, attempt: int = 1) -> "AgentToolCall":
        """Return the record waiting for its result from outside, under the ``tool_result`` interrupt ID.

        ``attempt``: the tool Step attempt that deferred it (0 when no tool Step ran: an external call).
        """
        waiting = transition(self, to=ToolCallStatus.AWAITING_RESULT)
        return attrs.evolve(waiting, result_interrupt_id=interrupt_id, attempts=attempt, resumes_turn=False)

    def succeed(self, output: str, *, attempt: int = 1) -> "AgentToolCall":
        """Return the record succeeded with ``output`` on ``attempt``."""
        return transition(self, to=ToolCallStatus.SUCCEEDED, output=output, attempts=attempt)

    def fail(self, error: str, *, attempt: int = 1) -> "AgentToolCall":
        """Return the record failed with ``error`` on ``attempt``."""
        return transition(self, to=ToolCallStatus.FAILED, error=error, attempts=attempt)

    def mark_outcome_unknown(self, error: str) -> "AgentToolCall":
        """Return the record with an unknown outcome after its attempts (the effect's maximum) failed."""
        unknown = transition(self, to=ToolCallStatus.OUTCOME_UNKNOWN, error=error)
        return attrs.evolve(unknown, attempts=maximum_attempts(self.policy.effect))

    def unknown_outcome(self, error: str) -> "AgentToolCall":
        """Return the record after its single attempt ended with an unknown outcome.

        ``reconciling`` (keeping ``error``) when its policy is reconcilable and it is not
        being reconciled already; otherwise ``outcome_unknown``. Attempts: the effect's maximum.
        """
        if self.policy.reconcilable and self.status is not ToolCallStatus.RECONCILING:
            reconciling = transition(self, to=ToolCallStatus.RECONCILING, error=error)
            return attrs.evolve(reconciling, attempts=maximum_attempts(self.policy.effect))
        return self.mark_outcome_unknown(error)

    def reconciled_succeeded(self, output: str) -> "AgentToolCall":
        """Return the reconciling record ``succeeded`` with the ``output`` its probe found."""
        return transition(self, to=ToolCallStatus.SUCCEEDED, output=output, attempts=self.attempts)

    def reconciled_not_applied(self) -> "AgentToolCall":
        """Return the reconciling record ``not_applied``: its probe found the call did not take effect."""
        return transition(self, to=ToolCallStatus.NOT_APPLIED, error=self.error)

    def after_exhausted_retries(self, error: str) -> "AgentToolCall":
        """Return the record as its effect requires once every attempt failed."""
        final = transition(self, to=status_after_exhausted_retries(self.policy.effect), error=error)
        return attrs.evolve(final, attempts=maximum_attempts(self.policy.effect))

    def outcome(self) -> "ToolOutcome":
        """Return what the call came to, for the stored messages.

        Raises:
            ValueError: the record is not final.
        """
        if not self.is_final:
            raise ValueError(f"tool call {self.tool_call_id!r} has no outcome yet (status {self.status.value!r})")
        return ToolOutcome(
            tool_call_id=self.tool_call_id,
            tool_name=self.tool_name,
            status=self.status,
            effect=self.policy.effect,
            attempts=self.attempts,
            approval=self.approval,
            approver=self.approver,
            error=self.error,
            rejection_message=self.rejection_message,
        )


def transition(
    record: AgentToolCall,
    *,
    to: ToolCallStatus,
    output: str | None = None,
    error: str | None = None,
    rejection_message: str | None = None,
    attempts: int | None = None,
) -> AgentToolCall:
    """Return ``record`` moved to status ``to`` (with ``attempts`` when given, in the same copy).

    Raises:
        InvalidTransitionError: ``TOOL_CALL_TRANSITIONS`` does not allow the move.
    """
    if to not in TOOL_CALL_TRANSITIONS[record.status]:
        raise InvalidTransitionError(
            f"tool call {record.tool_call_id!r} cannot go from {record.status.value!r} to {to.value!r}"
        )
    if attempts is None:
        return attrs.evolve(record, status=to, output=output, error=error, rejection_message=rejection_message)
    return attrs.evolve(
        record, status=to, output=output, error=error, rejection_message=rejection_message, attempts=attempts
    )


@attrs.frozen(kw_only=True)
class ToolCallCompleted:
    """Published on ``TOOL_CALL_RESULTS`` once per tool call, when its record became final."""

    tool_call_id: str
    """The call."""
    turn_id: str
    """Its turn."""
    status: ToolCallStatus
    """Its final status."""
