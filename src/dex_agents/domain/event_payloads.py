"""The event types and their payloads: one frozen class per type.

`dex_agents.domain.events` names them all, beside the envelope (`AgentEvent`),
the payload builders and the size rules; import them from there.
"""

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import ClassVar

import attrs

from dex_agents.domain.payload_view import PayloadView
from dex_agents.domain.snapshot import TurnStatus
from dex_agents.domain.tools import ToolCallStatus, ToolEffect
from dex_agents.domain.usage import AgentUsage


class AgentEventType(StrEnum):
    """The kinds of live event."""

    TURN_STARTED = "turn_started"
    TURN_COMPLETED = "turn_completed"
    TURN_FAILED = "turn_failed"
    TURN_COMMITTED = "turn_committed"
    TEXT_DELTA = "text_delta"
    REASONING_DELTA = "reasoning_delta"
    TOOL_CALL_STARTED = "tool_call_started"
    TOOL_CALL_FINISHED = "tool_call_finished"
    TOOL_CALL_DEFERRED = "tool_call_deferred"
    INTERRUPT_RAISED = "interrupt_raised"
    INTERRUPT_RESOLVED = "interrupt_resolved"
    USAGE_RECORDED = "usage_recorded"
    HISTORY_COMPACTED = "history_compacted"
    USER_MESSAGE_STEERED = "user_message_steered"
    TURN_CANCELLED = "turn_cancelled"


TurnOutcome = TurnStatus
"""How a committed turn ended: the ``turn_committed`` payload's name for `TurnStatus`."""


class SteeredLanding(StrEnum):
    """Where a steered user message landed."""

    RUNNING_TURN = "running_turn"
    """It joined the running turn: the turn's next model call sees it after the tool results."""
    NEW_TURN = "new_turn"
    """The turn it was meant for ended first (or none ran): it starts a turn of its own."""


def _optional_datetime(value: datetime | str | None) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def _usage(value: AgentUsage | Mapping[str, int]) -> AgentUsage:
    return value if isinstance(value, AgentUsage) else AgentUsage(**value)


@attrs.frozen(kw_only=True)
class TurnStartedPayload(PayloadView):
    """A turn started."""

    event_type: ClassVar[AgentEventType] = AgentEventType.TURN_STARTED
    sequence: int
    """The sequence of the turn's user message."""
    client_message_id: str | None = None
    """The application's ID of the user message that started the turn, when it gave one."""


@attrs.frozen(kw_only=True)
class TurnCompletedPayload(PayloadView):
    """A turn completed (written before its state is committed)."""

    event_type: ClassVar[AgentEventType] = AgentEventType.TURN_COMPLETED
    message_count: int
    """The messages the turn stored after its user message."""


@attrs.frozen(kw_only=True)
class TurnFailedPayload(PayloadView):
    """A turn failed (written before its state is committed)."""

    event_type: ClassVar[AgentEventType] = AgentEventType.TURN_FAILED
    error: str
    """Why."""
    client_message_id: str | None = None
    """For a turn that failed before its user message was stored: that message's client message ID, if any."""


@attrs.frozen(kw_only=True)
class TurnCommittedPayload(PayloadView):
    """A turn's final state is committed and readable."""

    event_type: ClassVar[AgentEventType] = AgentEventType.TURN_COMMITTED
    outcome: TurnStatus = attrs.field(converter=TurnStatus)
    """How it ended."""
    error: str | None
    """The error of a failed turn, else ``None``."""
    message_count: int
    """The session's message count."""


@attrs.frozen(kw_only=True)
class TextDeltaPayload(PayloadView):
    """A piece of the model's text."""

    event_type: ClassVar[AgentEventType] = AgentEventType.TEXT_DELTA
    text: str
    """The piece."""


@attrs.frozen(kw_only=True)
class ReasoningDeltaPayload(PayloadView):
    """A piece of the model's reasoning."""

    event_type: ClassVar[AgentEventType] = AgentEventType.REASONING_DELTA
    text: str
    """The piece."""


@attrs.frozen(kw_only=True)
class ToolCallStartedPayload(PayloadView):
    """A tool call's Step is about to run the tool."""

    event_type: ClassVar[AgentEventType] = AgentEventType.TOOL_CALL_STARTED
    tool_call_id: str
    """The call."""
    tool_name: str
    """The tool."""
    delivery: str | None = None
    """The marker of the delivery of the Step attempt that wrote it (single-attempt tools), else ``None``."""


@attrs.frozen(kw_only=True)
class ToolCallFinishedPayload(PayloadView):
    """A tool call's record became final (once per call, rejections included)."""

    event_type: ClassVar[AgentEventType] = AgentEventType.TOOL_CALL_FINISHED
    tool_call_id: str
    """The call."""
    tool_name: str
    """The tool."""
    status: ToolCallStatus = attrs.field(converter=ToolCallStatus)
    """Its final status."""
    output: str | None = None
    """The tool's result text, when ``succeeded`` (cut beyond the event size limit)."""
    error: str | None = None
    """Why it did not succeed: the record's error, or its rejection message (``rejected``, ``expired``,
    ``cancelled``); ``None`` when it succeeded."""


@attrs.frozen(kw_only=True)
class ToolCallDeferredPayload(PayloadView):
    """The model asked for a tool call; the session will run it in its own Step."""

    event_type: ClassVar[AgentEventType] = AgentEventType.TOOL_CALL_DEFERRED
    tool_call_id: str
    """The call."""
    tool_name: str
    """The tool."""
    effect: ToolEffect = attrs.field(converter=ToolEffect)
    """The effect of its policy."""
    requires_approval: bool
    """Whether it waits for approval first."""
    arguments: str | None = None
    """The call's arguments as JSON text (cut beyond the event size limit)."""


@attrs.frozen(kw_only=True)
class InterruptRaisedPayload(PayloadView):
    """A tool call waits for approval, or (``kind`` ``tool_result``) for its result from outside."""

    event_type: ClassVar[AgentEventType] = AgentEventType.INTERRUPT_RAISED
    interrupt_id: str
    """The interrupt to answer."""
    tool_call_id: str
    """The call."""
    tool_name: str
    """The tool."""
    deadline: datetime | None = attrs.field(converter=_optional_datetime)
    """When the approval (or the wait for the result) expires (ISO text on the wire), or ``None``."""
    kind: str = "approval"
    """What it waits for: ``approval`` (answer with ``resolve_interrupt``) or ``tool_result``
    (answer with ``submit_tool_result``); an `InterruptKind` value."""


@attrs.frozen(kw_only=True)
class InterruptResolvedPayload(PayloadView):
    """An approval was answered (or expired); for ``kind`` ``tool_result``, a call's result came (or expired)."""

    event_type: ClassVar[AgentEventType] = AgentEventType.INTERRUPT_RESOLVED
    interrupt_id: str
    """The interrupt."""
    approved: bool
    """The answer."""
    rejection_message: str | None
    """Why it was rejected, if it was."""
    approver: str | None = None
    """Who answered, when the answer named someone."""
    kind: str = "approval"
    """The interrupt's kind (an `InterruptKind` value): for ``tool_result``, ``approved`` says a result (not an
    error) came, and ``rejection_message`` holds the error, or why there is none."""


@attrs.frozen(kw_only=True)
class UsageRecordedPayload(PayloadView):
    """A model call's usage was added to the session total."""

    event_type: ClassVar[AgentEventType] = AgentEventType.USAGE_RECORDED
    recorded: AgentUsage = attrs.field(converter=_usage)
    """This model call's usage."""
    session: AgentUsage = attrs.field(converter=_usage)
    """The session's total after it."""


@attrs.frozen(kw_only=True)
class HistoryCompactedPayload(PayloadView):
    """A compaction stored a new summary; the model now reads it in place of the covered messages.

    The messages stay stored: snapshots and pages still return them.
    """

    event_type: ClassVar[AgentEventType] = AgentEventType.HISTORY_COMPACTED
    summary_number: int
    """Which compaction of the session this is, from 1."""
    first_sequence: int
    """The first message this compaction covered (the first after the previous summary)."""
    through_sequence: int
    """The last message it covered; the summary covers ``1..through_sequence``."""
    reason: str
    """Why it ran: ``policy`` (over the context budget) or ``overflow`` (the provider refused the context)."""


@attrs.frozen(kw_only=True)
class UserMessageSteeredPayload(PayloadView):
    """A steered user message was taken: by the running turn, or to start a new one."""

    event_type: ClassVar[AgentEventType] = AgentEventType.USER_MESSAGE_STEERED
    client_message_id: str | None
    """The message's client message ID."""
    text: str
    """What the user wrote (cut when long)."""
    landed: SteeredLanding = attrs.field(converter=SteeredLanding)
    """Where it landed; the envelope's ``turn_id`` is that turn."""


@attrs.frozen(kw_only=True)
class TurnCancelledPayload(PayloadView):
    """A turn ended because a person cancelled it (written before its state is committed)."""

    event_type: ClassVar[AgentEventType] = AgentEventType.TURN_CANCELLED
    reason: str | None
    """Why, as the person said it."""
    finished_tool_calls: int
    """Tool calls of the turn that had ended (ran, rejected or cancelled) when it stopped."""
