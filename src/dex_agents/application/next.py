"""Engine-neutral "what next" values returned by the Step use cases.

A host engine maps them onto its own decisions: `GoTo` one Step, `GoToMany`
Steps in parallel, `WaitAgain` (run the same waiting Step again with a new
input, because what arrived did not settle it), or `End` this branch.
"""

from collections.abc import Iterable
from enum import StrEnum

import attrs

from dex_agents.domain.history import ModelWindow


class StepName(StrEnum):
    """The Steps of the session Flow; the values are the engine's Step types."""

    START_AGENT_SESSION = "StartAgentSession"
    AWAIT_USER_MESSAGE = "AwaitUserMessage"
    RUN_MODEL = "RunModel"
    AWAIT_TOOL_APPROVAL = "AwaitToolApproval"
    CALL_TOOL = "CallTool"
    CALL_SINGLE_ATTEMPT_TOOL = "CallSingleAttemptTool"
    RECORD_TOOL_FAILURE = "RecordToolFailure"
    RECORD_TOOL_OUTCOME_UNKNOWN = "RecordToolOutcomeUnknown"
    RECONCILE_TOOL_CALL = "ReconcileToolCall"
    RESUME_TURN = "ResumeTurn"
    RECORD_TURN_FAILURE = "RecordTurnFailure"
    RECORD_RESUME_FAILURE = "RecordResumeFailure"
    RECORD_START_FAILURE = "RecordStartFailure"
    COMPACT_HISTORY = "CompactHistory"
    RECORD_COMPACTION_FAILURE = "RecordCompactionFailure"


StepInput = str | int | None
"""A Step's input: a tool-call ID, an expected result count, or nothing."""


@attrs.frozen(kw_only=True)
class GoTo:
    """Run ``step`` next with ``input``."""

    step: StepName
    """The next Step."""
    input: StepInput = None
    """Its input."""
    window: ModelWindow | None = None
    """The stored messages (and summary) the Step reads, for a host that loads per movement; ``None``: none."""


def _movements(movements: Iterable[GoTo]) -> tuple[GoTo, ...]:
    return tuple(movements)


@attrs.frozen(kw_only=True)
class GoToMany:
    """Run every movement in parallel."""

    movements: tuple[GoTo, ...] = attrs.field(converter=_movements)
    """The Steps to start; at least one."""

    def __attrs_post_init__(self) -> None:
        if not self.movements:
            raise ValueError("GoToMany needs at least one movement")


@attrs.frozen(kw_only=True)
class WaitAgain:
    """Run the same waiting Step again with ``input``: what arrived did not settle it."""

    input: StepInput = None
    """The waiting Step's new input."""


@attrs.frozen(kw_only=True)
class End:
    """This branch of the session is done."""


Next = GoTo | GoToMany | WaitAgain | End
"""What a Step use case decides."""
