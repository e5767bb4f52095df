"""Event payloads read as the spec's JSON objects: a read-only mapping beside the typed fields.

The key table below is copied from the spec (``dex-agents-core.md``, "Events on
``AgentEvents``"); each payload has at least those keys, and reading them as a
mapping gives the JSON values an independent reader of the wire would see.
"""

import json
from datetime import UTC, datetime

import pytest

from dex_agents import AgentEventType, AgentUsage, ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.domain import events as ev
from dex_agents.domain.events import AgentEventBody

SPEC_PAYLOAD_KEYS = {
    "turn_started": {"sequence"},
    "turn_completed": {"message_count"},
    "turn_failed": {"error"},
    "text_delta": {"text"},
    "reasoning_delta": {"text"},
    "tool_call_started": {"tool_call_id", "tool_name"},
    "tool_call_finished": {"tool_call_id", "tool_name", "status"},
    "tool_call_deferred": {"tool_call_id", "tool_name", "effect", "requires_approval"},
    "interrupt_raised": {"interrupt_id", "tool_call_id", "tool_name", "deadline"},
    "interrupt_resolved": {"interrupt_id", "approved", "rejection_message"},
    "usage_recorded": {"recorded", "session"},
}
"""The spec's payload keys per event type."""

DEADLINE = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
PAYLOADS: dict[str, AgentEventBody] = {
    "turn_started": ev.turn_started(3),
    "turn_completed": ev.turn_completed(4),
    "turn_failed": ev.turn_failed("boom"),
    "text_delta": ev.text_delta("Hel"),
    "reasoning_delta": ev.reasoning_delta("hmm"),
    "tool_call_started": ev.tool_call_started("c1", "refund"),
    "tool_call_finished": ev.tool_call_finished("c1", "refund", ToolCallStatus.SUCCEEDED),
    "tool_call_deferred": ev.tool_call_deferred("c1", "refund", ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)),
    "interrupt_raised": ev.interrupt_raised("turn-1.c1", "c1", "refund", DEADLINE),
    "interrupt_resolved": ev.interrupt_resolved("turn-1.c1", approved=False, rejection_message="no"),
    "usage_recorded": ev.usage_recorded(AgentUsage(model_calls=1, input_tokens=5), AgentUsage(model_calls=2)),
}


@pytest.mark.parametrize("event_type", sorted(SPEC_PAYLOAD_KEYS))
def test_each_payload_reads_as_the_json_object_of_the_spec(event_type: str) -> None:
    payload = PAYLOADS[event_type]
    assert payload.event_type is AgentEventType(event_type)

    assert SPEC_PAYLOAD_KEYS[event_type] <= set(payload.keys())
    assert list(payload) == list(payload.keys())
    assert len(payload) == len(payload.keys())
    for key in SPEC_PAYLOAD_KEYS[event_type]:
        assert key in payload
        assert payload[key] == payload.get(key)
    assert dict(payload.items()) == payload.to_dict()
    assert list(payload.values()) == [payload[key] for key in payload]
    assert json.loads(json.dumps(payload.to_dict())) == payload.to_dict(), "the values are JSON"


def test_mapping_values_are_the_wire_values_and_the_typed_fields_stay() -> None:
    finished = PAYLOADS["tool_call_finished"]
    assert isinstance(finished, ev.ToolCallFinishedPayload)
    assert finished["status"] == "succeeded"
    assert type(finished["status"]) is str
    assert finished.status is ToolCallStatus.SUCCEEDED
    raised = PAYLOADS["interrupt_raised"]
    assert raised["deadline"] == "2026-01-02T03:04:05+00:00"
    usage = PAYLOADS["usage_recorded"]
    recorded = usage["recorded"]
    assert isinstance(recorded, dict)
    assert (recorded["model_calls"], recorded["input_tokens"]) == (1, 5)
    assert PAYLOADS["tool_call_deferred"]["effect"] == "idempotent_write"


def test_an_unknown_key_is_a_key_error_and_get_gives_the_default() -> None:
    payload = PAYLOADS["turn_failed"]
    with pytest.raises(KeyError):
        payload["status"]
    assert payload.get("status") is None
    assert payload.get("status", "none") == "none"
    assert "status" not in payload
    assert 1 not in payload
