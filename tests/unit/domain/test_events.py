"""Event types, exact payload keys, the envelope and the event writer's rules."""

import json
import logging
import threading
from datetime import UTC, datetime

import pytest

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.domain import events as ev
from dex_agents.domain.events import (
    EVENT_PAYLOAD_KEYS,
    EVENT_PAYLOAD_TYPES,
    AgentEvent,
    AgentEventBody,
    AgentEventType,
    TextDeltaPayload,
    TurnOutcome,
)
from dex_agents.domain.json_values import JsonObject
from dex_agents.domain.tools import ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.domain.usage import AgentUsage
from dex_agents.infrastructure.dex.codec import from_json_data, to_json_data
from dex_agents.testing import RecordingEventSink, make_event_writer
from tests.fakes.sinks import FailingEventSink

DEADLINE = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)

# The spec's event list, copied: type and payload keys; plus turn_committed (docs/deviations.md).
SPEC_EVENTS = {
    # The client message ID, the arguments, the output and the error: what a chat UI shows without a read.
    "turn_started": {"sequence", "client_message_id"},
    "turn_completed": {"message_count"},
    "turn_failed": {"error", "client_message_id"},
    "turn_committed": {"outcome", "error", "message_count"},
    "text_delta": {"text"},
    "reasoning_delta": {"text"},
    "tool_call_started": {"tool_call_id", "tool_name", "delivery"},
    "tool_call_finished": {"tool_call_id", "tool_name", "status", "output", "error"},
    "tool_call_deferred": {"tool_call_id", "tool_name", "effect", "requires_approval", "arguments"},
    "interrupt_raised": {"interrupt_id", "tool_call_id", "tool_name", "deadline", "kind"},
    "interrupt_resolved": {"interrupt_id", "approved", "rejection_message", "approver", "kind"},
    "usage_recorded": {"recorded", "session"},
    "history_compacted": {"summary_number", "first_sequence", "through_sequence", "reason"},
    # Steering and cancel (docs/deviations.md).
    "user_message_steered": {"client_message_id", "text", "landed"},
    "turn_cancelled": {"reason", "finished_tool_calls"},
}

BUILT: dict[AgentEventType, AgentEventBody] = {
    AgentEventType.TURN_STARTED: ev.turn_started(1),
    AgentEventType.TURN_COMPLETED: ev.turn_completed(4),
    AgentEventType.TURN_FAILED: ev.turn_failed("model down"),
    AgentEventType.TURN_COMMITTED: ev.turn_committed(failed_with=None, message_count=3),
    AgentEventType.TEXT_DELTA: ev.text_delta("Hel"),
    AgentEventType.REASONING_DELTA: ev.reasoning_delta("think"),
    AgentEventType.TOOL_CALL_STARTED: ev.tool_call_started("c1", "search"),
    AgentEventType.TOOL_CALL_FINISHED: ev.tool_call_finished("c1", "search", ToolCallStatus.SUCCEEDED),
    AgentEventType.TOOL_CALL_DEFERRED: ev.tool_call_deferred("c1", "search", ToolPolicy(ToolEffect.READ)),
    AgentEventType.INTERRUPT_RAISED: ev.interrupt_raised("turn-1.c1", "c1", "refund", DEADLINE),
    AgentEventType.INTERRUPT_RESOLVED: ev.interrupt_resolved("turn-1.c1", approved=False, rejection_message="no"),
    AgentEventType.USAGE_RECORDED: ev.usage_recorded(AgentUsage(model_calls=1), AgentUsage(model_calls=2)),
    AgentEventType.HISTORY_COMPACTED: ev.history_compacted(
        summary_number=1, first_sequence=1, through_sequence=40, reason="policy"
    ),
    AgentEventType.USER_MESSAGE_STEERED: ev.user_message_steered("m1", "stop", ev.SteeredLanding.RUNNING_TURN),
    AgentEventType.TURN_CANCELLED: ev.turn_cancelled("enough", finished_tool_calls=2),
}


def test_the_event_types_and_payload_keys_are_the_specified_ones() -> None:
    assert {event_type.value: set(keys) for event_type, keys in EVENT_PAYLOAD_KEYS.items()} == SPEC_EVENTS
    assert {event_type.value for event_type in AgentEventType} == set(SPEC_EVENTS)


def wire(body: AgentEventBody) -> JsonObject:
    data = to_json_data(body, type(body))
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("event_type", list(AgentEventType))
def test_each_event_builder_writes_exactly_its_payload_keys(event_type: AgentEventType) -> None:
    body = BUILT[event_type]
    assert body.event_type is event_type
    assert type(body) is EVENT_PAYLOAD_TYPES[event_type]
    assert set(wire(body)) == EVENT_PAYLOAD_KEYS[event_type]


def test_event_payloads_carry_plain_json_values_on_the_wire() -> None:
    assert wire(BUILT[AgentEventType.TOOL_CALL_FINISHED])["status"] == "succeeded"
    assert wire(BUILT[AgentEventType.TOOL_CALL_DEFERRED]) == {
        "tool_call_id": "c1",
        "tool_name": "search",
        "effect": "read",
        "requires_approval": False,
        "arguments": None,
    }
    assert wire(BUILT[AgentEventType.INTERRUPT_RAISED])["deadline"] == "2026-01-01T12:05:00+00:00"
    assert wire(ev.interrupt_raised("i", "c1", "refund", None))["deadline"] is None
    assert wire(ev.interrupt_resolved("i", approved=True, rejection_message=None, approver="ada")) == {
        "interrupt_id": "i",
        "approved": True,
        "rejection_message": None,
        "approver": "ada",
        "kind": "approval",
    }
    assert wire(BUILT[AgentEventType.USAGE_RECORDED])["recorded"] == {
        "model_calls": 1,
        "input_tokens": 0,
        "output_tokens": 0,
        "cached_input_tokens": 0,
        "reasoning_tokens": 0,
        "cost_usd": 0.0,
        "tool_calls": 0,
    }


@pytest.mark.parametrize("event_type", list(AgentEventType))
def test_an_event_reads_back_from_its_wire_form_with_its_typed_payload(event_type: AgentEventType) -> None:
    event = AgentEvent.enveloped(BUILT[event_type], turn_id="turn-1", step_execution_id="RunModel-1", attempt=2)
    data = to_json_data(event, AgentEvent)
    assert data == {
        "type": event_type.value,
        "payload": wire(BUILT[event_type]),
        "turn_id": "turn-1",
        "step_execution_id": "RunModel-1",
        "attempt": 2,
    }
    assert from_json_data(json.loads(json.dumps(data)), AgentEvent) == event


def test_a_stored_event_written_as_plain_json_still_reads_and_ignores_unknown_keys() -> None:
    stored = {
        "type": "tool_call_finished",
        "payload": {"tool_call_id": "c1", "tool_name": "refund", "status": "expired", "later": 1},
        "turn_id": "turn-3",
        "step_execution_id": "CallNonIdempotentTool-2",
        "attempt": 1,
    }
    event = from_json_data(stored, AgentEvent)
    assert event.payload == ev.tool_call_finished("c1", "refund", ToolCallStatus.EXPIRED)
    assert (event.type, event.turn_id) == (AgentEventType.TOOL_CALL_FINISHED, "turn-3")


def test_an_event_refuses_a_payload_of_another_type() -> None:
    with pytest.raises(ValueError, match="turn_failed"):
        AgentEvent(
            type=AgentEventType.TURN_FAILED, payload=ev.text_delta("x"), turn_id=None, step_execution_id="s", attempt=1
        )


def test_a_committed_turn_event_says_how_the_turn_ended() -> None:
    completed = ev.turn_committed(failed_with=None, message_count=3)
    assert (completed.outcome, completed.error, completed.message_count) == (TurnOutcome.COMPLETED, None, 3)
    failed = ev.turn_committed(failed_with="model down", message_count=2)
    assert (failed.outcome, failed.error, failed.message_count) == (TurnOutcome.FAILED, "model down", 2)
    assert wire(failed) == {"outcome": "failed", "error": "model down", "message_count": 2}


def test_a_finished_event_tells_an_expired_call_from_a_rejected_one() -> None:
    assert ev.tool_call_finished("c1", "refund", ToolCallStatus.EXPIRED).status is ToolCallStatus.EXPIRED
    assert ev.tool_call_finished("c1", "refund", ToolCallStatus.REJECTED).status is ToolCallStatus.REJECTED


def test_a_deferred_event_reports_whether_the_call_needs_approval() -> None:
    body = ev.tool_call_deferred("c1", "refund", ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE))
    assert body.requires_approval is True
    overridden = ev.tool_call_deferred("c1", "refund", ToolPolicy(ToolEffect.READ, requires_approval=True))
    assert overridden.requires_approval is True


def test_usage_recorded_carries_this_call_and_the_session_total() -> None:
    recorded = AgentUsage(model_calls=1, input_tokens=10, output_tokens=4, cached_input_tokens=2, reasoning_tokens=1)
    body = ev.usage_recorded(recorded, recorded + recorded)
    assert body.recorded == recorded
    assert body.session.input_tokens == 20


def test_an_event_body_builds_from_its_wire_form_and_refuses_unknown_fields() -> None:
    assert (
        ev.event_body("interrupt_raised", wire(BUILT[AgentEventType.INTERRUPT_RAISED]))
        == BUILT[AgentEventType.INTERRUPT_RAISED]
    )
    assert (
        ev.event_body("usage_recorded", wire(BUILT[AgentEventType.USAGE_RECORDED]))
        == BUILT[AgentEventType.USAGE_RECORDED]
    )
    with pytest.raises(TypeError):
        ev.event_body("text_delta", {"text": "x", "colour": "red"})


def test_the_writer_puts_turn_step_execution_and_attempt_on_every_event() -> None:
    sink = RecordingEventSink()
    writer = make_event_writer(sink, turn_id="turn-3", step_execution_id="RunModel-9", attempt=2)
    writer.write_text_delta("Hel")
    writer.write_reasoning_delta("hmm")
    writer.write_tool_call_started("c1", "search")
    writer.write_tool_call_finished("c1", "search", ToolCallStatus.FAILED)
    writer.write_event(AgentEventType.TURN_COMPLETED, {"message_count": 2})
    assert sink.types == (
        AgentEventType.TEXT_DELTA,
        AgentEventType.REASONING_DELTA,
        AgentEventType.TOOL_CALL_STARTED,
        AgentEventType.TOOL_CALL_FINISHED,
        AgentEventType.TURN_COMPLETED,
    )
    assert {(e.turn_id, e.step_execution_id, e.attempt) for e in sink.events} == {("turn-3", "RunModel-9", 2)}
    assert sink.events[0].payload == ev.text_delta("Hel")
    assert sink.events[3].payload == ev.tool_call_finished("c1", "search", ToolCallStatus.FAILED)
    assert sink.events[4].payload == ev.turn_completed(2)


def test_the_writer_can_name_the_turn_an_event_starts() -> None:
    sink = RecordingEventSink()
    writer = make_event_writer(sink, turn_id=None)
    writer.write(ev.turn_started(1), turn_id="turn-1")
    writer.write(ev.text_delta("x"))
    assert [e.turn_id for e in sink.events] == ["turn-1", None]


def test_write_event_takes_a_type_by_its_wire_name_and_refuses_unknown_types() -> None:
    sink = RecordingEventSink()
    writer = make_event_writer(sink)
    writer.write_event("text_delta", {"text": "x"})
    assert sink.events[0].type is AgentEventType.TEXT_DELTA
    with pytest.raises(ValueError, match="not_an_event"):
        writer.write_event("not_an_event", {})


def test_the_writer_drops_every_write_after_close() -> None:
    sink = RecordingEventSink()
    writer = make_event_writer(sink)
    writer.write_text_delta("kept")
    writer.close()
    writer.write_text_delta("dropped")
    writer.write_tool_call_started("c1", "search")
    writer.write_event(AgentEventType.TEXT_DELTA, {"text": "dropped"})
    assert writer.closed
    assert [e.payload for e in sink.events] == [ev.text_delta("kept")]


def test_the_writer_survives_a_failing_sink_and_logs_the_dropped_event(caplog: pytest.LogCaptureFixture) -> None:
    sink = FailingEventSink()
    writer = AgentEventWriter(sink, turn_id="turn-1", step_execution_id="s", attempt=1)
    with caplog.at_level(logging.WARNING, logger="dex_agents.application.event_writer"):
        writer.write_text_delta("a")
        writer.write_text_delta("b")
    assert sink.attempts == 2
    assert "dropped live event text_delta" in caplog.text


def test_the_writer_and_recording_sink_keep_every_event_written_from_many_threads() -> None:
    sink = RecordingEventSink()
    writer = make_event_writer(sink)
    threads_count, per_thread = 8, 200
    start = threading.Barrier(threads_count)

    def write(thread: int) -> None:
        start.wait()
        for index in range(per_thread):
            writer.write_text_delta(f"{thread}:{index}")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    texts = [p.text for p in sink.payloads(TextDeltaPayload)]
    assert len(texts) == len(set(texts)) == threads_count * per_thread
    for thread_number in range(threads_count):
        mine = [t for t in texts if t.startswith(f"{thread_number}:")]
        assert mine == [f"{thread_number}:{index}" for index in range(per_thread)]


@pytest.mark.parametrize("event_type", list(AgentEventType))
def test_the_cheap_size_bound_of_every_event_body_is_at_least_its_json_size_on_the_wire(
    event_type: AgentEventType,
) -> None:
    # fit_event_body trusts the bound to skip measuring: it must never be below the codec's JSON.
    body = BUILT[event_type]
    assert ev._longest_bound(body) >= len(json.dumps(wire(body), separators=(",", ":")))
