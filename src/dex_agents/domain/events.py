"""Live events of a session (the ``flow.agent_events`` Stream).

Every event has a type, a typed payload (one frozen class per type, in
`dex_agents.domain.event_payloads`, with exactly the keys of
`EVENT_PAYLOAD_KEYS` on the wire; `EVENT_PAYLOAD_TYPES` maps
each type to its class, and the one converter in
``dex_agents.infrastructure.dex.codec`` reads and writes them), and an
envelope: ``turn_id``, ``step_execution_id`` (shared by every attempt of one
Step execution) and the Step ``attempt``. A UI groups live text by
``(turn_id, step_execution_id, attempt)``: within one Step execution it keeps
only the highest attempt's text. Once ``turn_committed`` arrives the stored
messages replace the turn's live text. Streams are best effort; the snapshot
is the truth.

``turn_completed`` and ``turn_failed`` are written while their Step runs, so
they arrive before the state they announce is committed: a snapshot read right
after them may still show the turn running. ``turn_committed`` is the signal
that the turn's final state is readable: ``AwaitUserMessage`` writes it when
it begins waiting, which the engine only schedules once the Step that ended
the turn has committed. It carries the turn's outcome (``completed`` or
``failed``, with the error) and the session's message count; its envelope's
``turn_id`` is the finished turn. It is written at least once per finished
turn while the stream works (a blank queued message makes the wait run, and
write it, again), and never for a session that has not run a turn yet.

Each payload also reads as the spec's JSON object, a read-only mapping
(``payload["status"]``, ``payload.get("status")``, ``keys``, iteration:
`dex_agents.domain.payload_view.PayloadView`), beside its typed fields.

Size: a Stream message has a limit (real Dex refuses messages over 100 KiB
by default), so `fit_event_body` bounds each event's payload as JSON: a text
or reasoning delta too long for one event is split into several, in order,
losing nothing; in any other event each long text is cut, keeping its start
and a notice of how much was cut.
"""

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol, cast

import attrs

from dex_agents.domain.event_payloads import AgentEventType as AgentEventType
from dex_agents.domain.event_payloads import HistoryCompactedPayload as HistoryCompactedPayload
from dex_agents.domain.event_payloads import InterruptRaisedPayload as InterruptRaisedPayload
from dex_agents.domain.event_payloads import InterruptResolvedPayload as InterruptResolvedPayload
from dex_agents.domain.event_payloads import ReasoningDeltaPayload as ReasoningDeltaPayload
from dex_agents.domain.event_payloads import SteeredLanding as SteeredLanding
from dex_agents.domain.event_payloads import TextDeltaPayload as TextDeltaPayload
from dex_agents.domain.event_payloads import ToolCallDeferredPayload as ToolCallDeferredPayload
from dex_agents.domain.event_payloads import ToolCallFinishedPayload as ToolCallFinishedPayload
from dex_agents.domain.event_payloads import ToolCallStartedPayload as ToolCallStartedPayload
from dex_agents.domain.event_payloads import TurnCancelledPayload as TurnCancelledPayload
from dex_agents.domain.event_payloads import TurnCommittedPayload as TurnCommittedPayload
from dex_agents.domain.event_payloads import TurnCompletedPayload as TurnCompletedPayload
from dex_agents.domain.event_payloads import TurnFailedPayload as TurnFailedPayload
from dex_agents.domain.event_payloads import TurnOutcome as TurnOutcome
from dex_agents.domain.event_payloads import TurnStartedPayload as TurnStartedPayload
from dex_agents.domain.event_payloads import UsageRecordedPayload as UsageRecordedPayload
from dex_agents.domain.event_payloads import UserMessageSteeredPayload as UserMessageSteeredPayload
from dex_agents.domain.json_values import JsonValue
from dex_agents.domain.limits import cap_text, json_text_size
from dex_agents.domain.tools import ToolCallStatus, ToolPolicy, is_approval_required
from dex_agents.domain.usage import AgentUsage

AgentEventBody = (
    TurnStartedPayload
    | TurnCompletedPayload
    | TurnFailedPayload
    | TurnCommittedPayload
    | TextDeltaPayload
    | ReasoningDeltaPayload
    | ToolCallStartedPayload
    | ToolCallFinishedPayload
    | ToolCallDeferredPayload
    | InterruptRaisedPayload
    | InterruptResolvedPayload
    | UsageRecordedPayload
    | HistoryCompactedPayload
    | UserMessageSteeredPayload
    | TurnCancelledPayload
)
"""An event's typed payload, before the writer adds the envelope; its class names its type."""

EVENT_PAYLOAD_TYPES: Mapping[AgentEventType, type[AgentEventBody]] = {
    cls.event_type: cls
    for cls in (
        TurnStartedPayload,
        TurnCompletedPayload,
        TurnFailedPayload,
        TurnCommittedPayload,
        TextDeltaPayload,
        ReasoningDeltaPayload,
        ToolCallStartedPayload,
        ToolCallFinishedPayload,
        ToolCallDeferredPayload,
        InterruptRaisedPayload,
        InterruptResolvedPayload,
        UsageRecordedPayload,
        HistoryCompactedPayload,
        UserMessageSteeredPayload,
        TurnCancelledPayload,
    )
}
"""The payload class of each event type."""

EVENT_PAYLOAD_KEYS: Mapping[AgentEventType, frozenset[str]] = {
    event_type: frozenset(field.name for field in attrs.fields(cls)) for event_type, cls in EVENT_PAYLOAD_TYPES.items()
}
"""The exact payload keys of each event type (its class's fields)."""


class _BodyFactory(Protocol):
    def __call__(self, **fields: JsonValue) -> AgentEventBody: ...


def event_body(event_type: AgentEventType | str, payload: Mapping[str, JsonValue]) -> AgentEventBody:
    """Return the typed payload of ``event_type`` with the fields of ``payload`` (wire values accepted).

    Raises:
        ValueError: ``event_type`` is not an `AgentEventType` value.
        TypeError: ``payload`` lacks a field or has one the type does not know.
    """
    build = cast(_BodyFactory, EVENT_PAYLOAD_TYPES[AgentEventType(event_type)])
    return build(**payload)


@attrs.frozen(kw_only=True)
class AgentEvent:
    """One message of the ``flow.agent_events`` Stream."""

    type: AgentEventType
    """The kind of event."""
    payload: AgentEventBody = attrs.field(validator=lambda event, _, body: _check_payload(event, body))
    """The event's data, of the class `EVENT_PAYLOAD_TYPES` names for ``type``."""
    turn_id: str | None
    """The turn the event belongs to, if any."""
    step_execution_id: str
    """The Step execution that wrote it (shared by its attempts)."""
    attempt: int
    """The attempt of that Step execution, from 1."""

    @classmethod
    def enveloped(
        cls, body: AgentEventBody, *, turn_id: str | None, step_execution_id: str, attempt: int
    ) -> "AgentEvent":
        """Wrap ``body`` in its envelope."""
        return cls(
            type=body.event_type,
            payload=body,
            turn_id=turn_id,
            step_execution_id=step_execution_id,
            attempt=attempt,
        )


def _check_payload(event: AgentEvent, body: AgentEventBody) -> None:
    if body.event_type is not event.type:
        raise ValueError(f"a {event.type.value} event cannot carry a {type(body).__name__}")


def turn_started(sequence: int, client_message_id: str | None = None) -> TurnStartedPayload:
    """A turn started; ``sequence`` is its user message's sequence, ``client_message_id`` that message's ID."""
    return TurnStartedPayload(sequence=sequence, client_message_id=client_message_id)


def turn_completed(message_count: int) -> TurnCompletedPayload:
    """A turn completed, storing ``message_count`` messages after its user message."""
    return TurnCompletedPayload(message_count=message_count)


def turn_failed(error: str, client_message_id: str | None = None) -> TurnFailedPayload:
    """A turn failed with ``error`` (before its user message, of ID ``client_message_id``, was stored)."""
    return TurnFailedPayload(error=error, client_message_id=client_message_id)


def turn_committed(*, failed_with: str | None, message_count: int, cancelled: bool = False) -> TurnCommittedPayload:
    """A turn's final state is committed: ``completed``, ``cancelled``, or ``failed`` with ``failed_with``."""
    return TurnCommittedPayload(
        outcome=TurnOutcome.of(failed=failed_with is not None, cancelled=cancelled),
        error=failed_with,
        message_count=message_count,
    )


def user_message_steered(client_message_id: str | None, text: str, landed: SteeredLanding) -> UserMessageSteeredPayload:
    """A steered user message landed in the running turn or started a new one."""
    return UserMessageSteeredPayload(client_message_id=client_message_id, text=text, landed=landed)


def turn_cancelled(reason: str | None, *, finished_tool_calls: int) -> TurnCancelledPayload:
    """A turn ended because a person cancelled it."""
    return TurnCancelledPayload(reason=reason, finished_tool_calls=finished_tool_calls)


def text_delta(text: str) -> TextDeltaPayload:
    """A piece of the model's text."""
    return TextDeltaPayload(text=text)


def reasoning_delta(text: str) -> ReasoningDeltaPayload:
    """A piece of the model's reasoning."""
    return ReasoningDeltaPayload(text=text)


def tool_call_started(tool_call_id: str, tool_name: str, *, delivery: str | None = None) -> ToolCallStartedPayload:
    """A tool call's Step is about to run the tool (in the delivery ``delivery``, when marked)."""
    return ToolCallStartedPayload(tool_call_id=tool_call_id, tool_name=tool_name, delivery=delivery)


def tool_call_finished(
    tool_call_id: str,
    tool_name: str,
    status: ToolCallStatus,
    *,
    output: str | None = None,
    error: str | None = None,
) -> ToolCallFinishedPayload:
    """A tool call's record became final (once per call, rejections included), with its output or error."""
    return ToolCallFinishedPayload(
        tool_call_id=tool_call_id, tool_name=tool_name, status=status, output=output, error=error
    )


def tool_call_deferred(
    tool_call_id: str, tool_name: str, policy: ToolPolicy, *, arguments: str | None = None
) -> ToolCallDeferredPayload:
    """The model asked for a tool call (with ``arguments``, JSON text); the session will run it in its own Step."""
    return ToolCallDeferredPayload(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        effect=policy.effect,
        requires_approval=is_approval_required(policy),
        arguments=arguments,
    )


def interrupt_raised(
    interrupt_id: str, tool_call_id: str, tool_name: str, deadline: datetime | None, *, kind: str = "approval"
) -> InterruptRaisedPayload:
    """A tool call waits for approval (or, ``kind`` ``tool_result``, its result) until ``deadline`` (or without one)."""
    return InterruptRaisedPayload(
        interrupt_id=interrupt_id, tool_call_id=tool_call_id, tool_name=tool_name, deadline=deadline, kind=kind
    )


def interrupt_resolved(
    interrupt_id: str,
    *,
    approved: bool,
    rejection_message: str | None,
    approver: str | None = None,
    kind: str = "approval",
) -> InterruptResolvedPayload:
    """An approval was answered (by ``approver``, when named) or expired; or a call's result came (``kind``)."""
    return InterruptResolvedPayload(
        interrupt_id=interrupt_id, approved=approved, rejection_message=rejection_message, approver=approver, kind=kind
    )


def usage_recorded(recorded: AgentUsage, session: AgentUsage) -> UsageRecordedPayload:
    """A model call's usage was added to the session total."""
    return UsageRecordedPayload(recorded=recorded, session=session)


def history_compacted(
    *, summary_number: int, first_sequence: int, through_sequence: int, reason: str
) -> HistoryCompactedPayload:
    """A compaction covered ``first_sequence..through_sequence``."""
    return HistoryCompactedPayload(
        summary_number=summary_number, first_sequence=first_sequence, through_sequence=through_sequence, reason=reason
    )


_ENVELOPE_BYTES = 512
"""Room kept for the envelope (type, turn, Step execution, attempt) and the JSON around the payload."""

_JSON_BYTES_PER_CHARACTER = 12
"""The most a character can take as escaped JSON text: an astral character is two six-character escapes."""

_LONG_TEXT = 64
"""Texts up to this many characters are never cut."""


def fit_event_body(body: AgentEventBody, max_bytes: int) -> tuple[AgentEventBody, ...]:
    """Return ``body`` as events whose payloads each take at most ``max_bytes`` as JSON, envelope included.

    Text and reasoning deltas are split into consecutive deltas; other events
    keep their fields and have their long texts cut with a notice.
    """
    budget = max(max_bytes - _ENVELOPE_BYTES, 64)
    if isinstance(body, TextDeltaPayload | ReasoningDeltaPayload):
        if len(body.text) * _JSON_BYTES_PER_CHARACTER > budget:
            return tuple(attrs.evolve(body, text=piece) for piece in _split(body.text, budget))
        return (body,)
    if _longest_bound(body) <= budget or _json_size(_json_data(body)) <= budget:
        return (body,)
    texts = _long_texts(body)
    # JSON takes at most 6 bytes a UTF-8 byte (a control character as \\u00XX).
    share = max(budget // max(len(texts), 1) // 6, 256)
    capped = _evolve(body, **{name: cap_text(text, share, what="this event text") for name, text in texts.items()})
    if _json_size(_json_data(capped)) > budget:  # fields that alone overflow: keep them, empty their texts
        capped = _evolve(body, **dict.fromkeys(texts, ""))
    return (capped,)


class _Evolve(Protocol):
    def __call__(self, inst: AgentEventBody, /, **changes: str) -> AgentEventBody: ...


_evolve = cast(_Evolve, attrs.evolve)
"""`attrs.evolve` for a body whose changed text fields are known only at run time."""


def _long_texts(body: AgentEventBody) -> dict[str, str]:
    texts = {field.name: getattr(body, field.name) for field in attrs.fields(type(body))}
    return {name: text for name, text in texts.items() if isinstance(text, str) and len(text) > _LONG_TEXT}


def _json_value(_instance: object, _field: object, value: object) -> object:
    return value.isoformat() if isinstance(value, datetime) else value


def _json_data(body: AgentEventBody) -> JsonValue:
    """``body`` as JSON data, for measuring only (the codec's converter writes the wire form)."""
    data: JsonValue = attrs.asdict(body, value_serializer=_json_value)
    return data


def _split(text: str, budget: int) -> list[str]:
    pieces: list[str] = []
    start = 0
    while start < len(text):
        size = max(budget - 2, 1)  # the quotes
        while True:
            piece = text[start : start + size]
            if json_text_size(piece) <= budget or size == 1:
                break
            size //= 2
        pieces.append(piece)
        start += len(piece)
    return pieces


def _json_size(value: JsonValue) -> int:
    return len(json.dumps(value, separators=(",", ":")))


_DATETIME_JSON_BYTES = 40
"""At most what a datetime takes as JSON: an ISO 8601 text with microseconds and offset, quoted."""


def _longest_bound(value: object) -> int:
    """An upper bound of the JSON size of ``value`` (an event body or a part of it), cheap for small bodies.

    Read from the attrs fields directly, without building the JSON data first; every live event
    is measured, so the fields' names are read once per class (`_field_bounds`).
    """
    if isinstance(value, str):
        return len(value) * _JSON_BYTES_PER_CHARACTER + 2
    kind = type(value)
    if value is None or kind is int or kind is float or kind is bool:
        return 32
    fields = _field_bounds(kind)
    if fields is not None:
        total = 2
        for name, bound in fields:
            total += bound + _longest_bound(getattr(value, name))
        return total
    if isinstance(value, Mapping):
        return sum(len(str(k)) * _JSON_BYTES_PER_CHARACTER + 4 + _longest_bound(v) for k, v in value.items()) + 2
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(_longest_bound(v) + 1 for v in value) + 2
    if isinstance(value, datetime):
        return _DATETIME_JSON_BYTES
    return 32


_FIELD_BOUNDS: dict[type, tuple[tuple[str, int], ...] | None] = {}
"""`_field_bounds` by class (a handful of event body and value classes)."""


def _field_bounds(kind: type) -> tuple[tuple[str, int], ...] | None:
    """Each attrs field of ``kind`` with the most its name and punctuation take as JSON; ``None``: not attrs."""
    if kind in _FIELD_BOUNDS:
        return _FIELD_BOUNDS[kind]
    fields = getattr(kind, "__attrs_attrs__", None)
    bounds = (
        None
        if fields is None
        else tuple((field.name, len(field.name) * _JSON_BYTES_PER_CHARACTER + 4) for field in fields)
    )
    _FIELD_BOUNDS[kind] = bounds
    return bounds


def started_deliveries(
    events: Iterable[AgentEvent], tool_call_id: str, *, step_execution_id: str, attempt: int
) -> tuple[str, ...]:
    """Return the delivery markers of one Step attempt's ``tool_call_started`` events for a call, in order."""
    return tuple(
        event.payload.delivery
        for event in events
        if isinstance(event.payload, ToolCallStartedPayload)
        and event.payload.delivery is not None
        and event.payload.tool_call_id == tool_call_id
        and event.step_execution_id == step_execution_id
        and event.attempt == attempt
    )
