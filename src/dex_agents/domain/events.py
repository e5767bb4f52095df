"""Live events of a session (the ``flow.agent_events`` Stream).

Every event has a type, a payload with exactly the keys of `EVENT_PAYLOAD_KEYS`,
and an envelope: ``turn_id``, ``step_execution_id`` (shared by every attempt of
one Step execution) and the Step ``attempt``. A UI groups live text by
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

Size: a Stream message has a limit (real Dex refuses messages over 100 KiB
by default), so `fit_event_body` bounds each event's payload as JSON: a text
or reasoning delta too long for one event is split into several, in order,
losing nothing; in any other event each long text is cut, keeping its start
and a notice of how much was cut.
"""

import json
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum

import attrs

from dex_agents.domain.json_values import JsonObject, JsonValue
from dex_agents.domain.limits import cap_text, json_text_size
from dex_agents.domain.tools import ToolCallStatus, ToolPolicy, is_approval_required
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


EVENT_PAYLOAD_KEYS: Mapping[AgentEventType, frozenset[str]] = {
    AgentEventType.TURN_STARTED: frozenset({"sequence"}),
    AgentEventType.TURN_COMPLETED: frozenset({"message_count"}),
    AgentEventType.TURN_FAILED: frozenset({"error"}),
    AgentEventType.TURN_COMMITTED: frozenset({"outcome", "error", "message_count"}),
    AgentEventType.TEXT_DELTA: frozenset({"text"}),
    AgentEventType.REASONING_DELTA: frozenset({"text"}),
    AgentEventType.TOOL_CALL_STARTED: frozenset({"tool_call_id", "tool_name"}),
    AgentEventType.TOOL_CALL_FINISHED: frozenset({"tool_call_id", "tool_name", "status"}),
    AgentEventType.TOOL_CALL_DEFERRED: frozenset({"tool_call_id", "tool_name", "effect", "requires_approval"}),
    AgentEventType.INTERRUPT_RAISED: frozenset({"interrupt_id", "tool_call_id", "tool_name", "deadline"}),
    AgentEventType.INTERRUPT_RESOLVED: frozenset({"interrupt_id", "approved", "rejection_message"}),
    AgentEventType.USAGE_RECORDED: frozenset({"recorded", "session"}),
}
"""The exact payload keys of each event type."""


@attrs.frozen(kw_only=True)
class AgentEventBody:
    """An event's type and payload, before the writer adds the envelope."""

    type: AgentEventType
    """The kind of event."""
    payload: JsonObject
    """The event's data, keyed as `EVENT_PAYLOAD_KEYS` says."""


@attrs.frozen(kw_only=True)
class AgentEvent:
    """One message of the ``flow.agent_events`` Stream."""

    type: AgentEventType
    """The kind of event."""
    payload: JsonObject
    """The event's data, keyed as `EVENT_PAYLOAD_KEYS` says for known types."""
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
            type=body.type,
            payload=body.payload,
            turn_id=turn_id,
            step_execution_id=step_execution_id,
            attempt=attempt,
        )


def turn_started(sequence: int) -> AgentEventBody:
    """A turn started; ``sequence`` is its user message's sequence."""
    return AgentEventBody(type=AgentEventType.TURN_STARTED, payload={"sequence": sequence})


def turn_completed(message_count: int) -> AgentEventBody:
    """A turn completed, storing ``message_count`` messages after its user message."""
    return AgentEventBody(type=AgentEventType.TURN_COMPLETED, payload={"message_count": message_count})


def turn_failed(error: str) -> AgentEventBody:
    """A turn failed with ``error``."""
    return AgentEventBody(type=AgentEventType.TURN_FAILED, payload={"error": error})


def turn_committed(*, failed_with: str | None, message_count: int) -> AgentEventBody:
    """A turn's final state is committed: ``completed``, or ``failed`` with ``failed_with``."""
    return AgentEventBody(
        type=AgentEventType.TURN_COMMITTED,
        payload={
            "outcome": "completed" if failed_with is None else "failed",
            "error": failed_with,
            "message_count": message_count,
        },
    )


def text_delta(text: str) -> AgentEventBody:
    """A piece of the model's text."""
    return AgentEventBody(type=AgentEventType.TEXT_DELTA, payload={"text": text})


def reasoning_delta(text: str) -> AgentEventBody:
    """A piece of the model's reasoning."""
    return AgentEventBody(type=AgentEventType.REASONING_DELTA, payload={"text": text})


def tool_call_started(tool_call_id: str, tool_name: str) -> AgentEventBody:
    """A tool call's Step is about to run the tool."""
    return AgentEventBody(
        type=AgentEventType.TOOL_CALL_STARTED,
        payload={"tool_call_id": tool_call_id, "tool_name": tool_name},
    )


def tool_call_finished(tool_call_id: str, tool_name: str, status: ToolCallStatus) -> AgentEventBody:
    """A tool call's record became final (once per call, rejections included)."""
    return AgentEventBody(
        type=AgentEventType.TOOL_CALL_FINISHED,
        payload={"tool_call_id": tool_call_id, "tool_name": tool_name, "status": status.value},
    )


def tool_call_deferred(tool_call_id: str, tool_name: str, policy: ToolPolicy) -> AgentEventBody:
    """The model asked for a tool call; the session will run it in its own Step."""
    return AgentEventBody(
        type=AgentEventType.TOOL_CALL_DEFERRED,
        payload={
            "tool_call_id": tool_call_id,
            "tool_name": tool_name,
            "effect": policy.effect.value,
            "requires_approval": is_approval_required(policy),
        },
    )


def interrupt_raised(interrupt_id: str, tool_call_id: str, tool_name: str, deadline: datetime | None) -> AgentEventBody:
    """A tool call waits for approval until ``deadline`` (ISO text, or null)."""
    return AgentEventBody(
        type=AgentEventType.INTERRUPT_RAISED,
        payload={
            "interrupt_id": interrupt_id,
            "tool_call_id": tool_call_id,
            "tool_name": tool_name,
            "deadline": None if deadline is None else deadline.isoformat(),
        },
    )


def interrupt_resolved(interrupt_id: str, *, approved: bool, rejection_message: str | None) -> AgentEventBody:
    """An approval was answered (or expired)."""
    return AgentEventBody(
        type=AgentEventType.INTERRUPT_RESOLVED,
        payload={
            "interrupt_id": interrupt_id,
            "approved": approved,
            "rejection_message": rejection_message,
        },
    )


def usage_recorded(recorded: AgentUsage, session: AgentUsage) -> AgentEventBody:
    """A model call's usage was added to the session total."""
    return AgentEventBody(
        type=AgentEventType.USAGE_RECORDED,
        payload={"recorded": usage_payload(recorded), "session": usage_payload(session)},
    )


def usage_payload(usage: AgentUsage) -> dict[str, JsonValue]:
    """Return ``usage`` as an event payload object."""
    return {
        "model_calls": usage.model_calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
    }


_ENVELOPE_BYTES = 512
"""Room kept for the envelope (type, turn, Step execution, attempt) and the JSON around the payload."""

_JSON_BYTES_PER_CHARACTER = 12
"""The most a character can take as escaped JSON text (an astral character: two ``\\uXXXX`` escapes)."""


def fit_event_body(body: AgentEventBody, max_bytes: int) -> tuple[AgentEventBody, ...]:
    """Return ``body`` as events whose payloads each take at most ``max_bytes`` as JSON, envelope included.

    Text and reasoning deltas are split into consecutive deltas; other events
    keep their keys and have their long texts cut with a notice.
    """
    budget = max(max_bytes - _ENVELOPE_BYTES, 64)
    if body.type in (AgentEventType.TEXT_DELTA, AgentEventType.REASONING_DELTA):
        text = body.payload.get("text")
        if isinstance(text, str) and len(text) * _JSON_BYTES_PER_CHARACTER > budget:
            return tuple(AgentEventBody(type=body.type, payload={"text": piece}) for piece in _split(text, budget))
        return (body,)
    if _longest_bound(body.payload) <= budget or _json_size(body.payload) <= budget:
        return (body,)
    capped = _cap_strings(body.payload, budget)
    if not isinstance(capped, Mapping) or _json_size(capped) > budget:
        capped = dict.fromkeys(body.payload)  # keys that alone overflow: keep the shape, drop values
    return (AgentEventBody(type=body.type, payload=dict(capped)),)


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


def _longest_bound(value: JsonValue) -> int:
    """An upper bound of ``value``'s JSON size, cheap for the usual small payloads."""
    if isinstance(value, str):
        return len(value) * _JSON_BYTES_PER_CHARACTER + 2
    if isinstance(value, Mapping):
        return sum(len(k) * _JSON_BYTES_PER_CHARACTER + 4 + _longest_bound(v) for k, v in value.items()) + 2
    if isinstance(value, (list, tuple)):
        return sum(_longest_bound(v) + 1 for v in value) + 2
    return 32


def _cap_strings(value: JsonValue, budget: int) -> JsonValue:
    strings = _count_long_strings(value)
    # JSON takes at most 6 bytes a UTF-8 byte (a control character as \\u00XX).
    share = max(budget // max(strings, 1) // 6, 256)
    return _capped(value, share)


def _count_long_strings(value: JsonValue) -> int:
    if isinstance(value, str):
        return 1 if len(value) > 64 else 0
    if isinstance(value, Mapping):
        return sum(_count_long_strings(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_count_long_strings(v) for v in value)
    return 0


def _capped(value: JsonValue, share: int) -> JsonValue:
    if isinstance(value, str):
        return cap_text(value, share, what="this event text") if len(value) > 64 else value
    if isinstance(value, Mapping):
        return {key: _capped(item, share) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_capped(item, share) for item in value]
    return value
