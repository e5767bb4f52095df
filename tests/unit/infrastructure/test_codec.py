"""Every stored and RPC type goes through the SDK codec and back unchanged."""

import json
from datetime import UTC, datetime

import attrs
import cattrs
import dex
import pytest

from dex_agents import (
    AgentEvent,
    AgentInterrupt,
    AgentInterruptResolution,
    AgentMessage,
    AgentMessagesPage,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentState,
    AgentStatus,
    AgentToolCall,
    AgentUsage,
    AgentUserMessage,
    ListAgentMessagesRequest,
    MessageRole,
    ResolveInterruptRequest,
    ToolCallCompleted,
    ToolCallStatus,
    ToolEffect,
    ToolPolicy,
    codec_registry,
)
from dex_agents.domain import events as ev
from dex_agents.domain.history import HistorySummary
from dex_agents.domain.interrupts import SubmitToolResultRequest
from dex_agents.domain.messages import MessageDelivery
from dex_agents.domain.snapshot import MessageIndex
from dex_agents.domain.turn_control import CancelTurnRequest, TurnCancelRequest
from dex_agents.infrastructure.dex.codec import WIRE_TYPES, to_json_data
from tests.builders import make_interrupt

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
RECORD = AgentToolCall(
    tool_call_id="c1",
    turn_id="turn-1",
    tool_name="refund",
    arguments='{"order_id": "7"}',
    policy=ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
    deferral_order=0,
    status=ToolCallStatus.REJECTED,
    rejection_message="not today",
    interrupt_id="turn-1.c1",
)
INTERRUPT = make_interrupt(raised_at=NOW, deadline=NOW)
STATE = AgentState(
    status=AgentStatus.RUNNING_TOOLS,
    turn_count=2,
    active_turn_id="turn-2",
    message_count=5,
    last_turn_error="boom",
    large_messages=((3, 9000),),
)
MESSAGE = AgentMessage(
    sequence=1, turn_id="turn-1", role=MessageRole.TOOL, framework_item="[]", text="x", tool_call_id="c1", tool_name="t"
)
USAGE = AgentUsage(model_calls=1, input_tokens=2, output_tokens=3, cached_input_tokens=4, reasoning_tokens=5)

SAMPLES: list[tuple[object, object]] = [
    (AgentState, STATE),
    (AgentMessage, MESSAGE),
    (AgentToolCall, RECORD),
    (list[AgentInterrupt], [INTERRUPT]),
    (AgentUsage, USAGE),
    (AgentUserMessage, AgentUserMessage(text="hi")),
    (list[AgentUserMessage], [AgentUserMessage(text="steer", client_message_id="m1", delivery=MessageDelivery.STEER)]),
    (TurnCancelRequest, TurnCancelRequest(turn_id="turn-2", reason="stop")),
    (CancelTurnRequest, CancelTurnRequest(reason=None)),
    (AgentInterruptResolution, AgentInterruptResolution(interrupt_id="i", approved=False, rejection_message="no")),
    (ToolCallCompleted, ToolCallCompleted(tool_call_id="c1", turn_id="turn-1", status=ToolCallStatus.SUCCEEDED)),
    (
        AgentEvent,
        AgentEvent.enveloped(
            ev.usage_recorded(USAGE, USAGE + USAGE), turn_id="turn-1", step_execution_id="RunModel-1", attempt=2
        ),
    ),
    (AgentSessionStartInput, AgentSessionStartInput(initial_message=None)),
    (ResolveInterruptRequest, ResolveInterruptRequest(interrupt_id="i", approved=True)),
    (SubmitToolResultRequest, SubmitToolResultRequest(tool_call_id="c1", result='{"ok": true}')),
    (
        AgentSnapshot,
        AgentSnapshot(
            state=STATE,
            messages=(MESSAGE,),
            pending_interrupts=(INTERRUPT,),
            tool_calls=(RECORD,),
            usage=USAGE,
            queued_message_count=3,
        ),
    ),
    (
        AgentSnapshot,
        AgentSnapshot(
            state=None, messages=(), pending_interrupts=(), tool_calls=(), usage=AgentUsage(), queued_message_count=0
        ),
    ),
    (ListAgentMessagesRequest, ListAgentMessagesRequest(after_sequence=3, limit=7)),
    (AgentMessagesPage, AgentMessagesPage(messages=(MESSAGE,), next_after_sequence=None)),
    (MessageIndex, MessageIndex(message_count=9, large_messages=((4, 20_000), (9, 3_000_000)))),
    (HistorySummary, HistorySummary(number=2, through_sequence=40, text="The user asked for refunds.")),
]


def test_every_wire_type_has_a_sample() -> None:
    assert {type_hint for type_hint, _ in SAMPLES} == set(WIRE_TYPES)


@pytest.mark.parametrize(("type_hint", "value"), SAMPLES)
def test_value_round_trips_through_the_sdk_codec_deterministically(type_hint: object, value: object) -> None:
    codec = codec_registry().resolve(type_hint)
    encoded = codec.encode(value)
    assert encoded.kind is dex.WireKind.JSON
    assert codec.decode(encoded) == value
    assert codec.encode(codec.decode(encoded)).data == encoded.data


def test_enums_travel_as_plain_strings_and_datetimes_as_iso_text() -> None:
    data = json.loads(str(codec_registry().resolve(list[AgentInterrupt]).encode([INTERRUPT]).data))
    assert data[0]["raised_at"] == "2026-11-29T12:00:00+00:00"
    record = json.loads(str(codec_registry().resolve(AgentToolCall).encode(RECORD).data))
    assert record["status"] == "rejected"
    assert record["policy"] == {"effect": "idempotent_write", "requires_approval": True, "reconcilable": False}


def test_a_value_stored_before_fields_with_defaults_existed_still_reads() -> None:
    codec = codec_registry().resolve(AgentState)
    old = dex.Value(dex.WireKind.JSON, '{"status": "running_model"}')
    assert codec.decode(old) == AgentState(status=AgentStatus.RUNNING_MODEL)


def test_a_value_written_by_a_newer_version_with_extra_fields_still_reads() -> None:
    codec = codec_registry().resolve(AgentUsage)
    newer = dex.Value(dex.WireKind.JSON, '{"model_calls": 2, "audio_tokens": 9}')
    assert codec.decode(newer) == AgentUsage(model_calls=2)


def test_a_value_missing_a_required_field_is_refused() -> None:
    codec = codec_registry().resolve(AgentUserMessage)
    with pytest.raises(cattrs.BaseValidationError, match="AgentUserMessage"):
        codec.decode(dex.Value(dex.WireKind.JSON, "{}"))


def test_the_codec_registry_is_built_once() -> None:
    assert codec_registry() is codec_registry()


def test_a_tool_call_record_is_stored_without_its_unset_fields_and_reads_back_whole() -> None:
    codec = codec_registry().resolve(AgentToolCall)
    pending = attrs.evolve(RECORD, status=ToolCallStatus.PENDING, rejection_message=None, interrupt_id=None)

    stored = json.loads(str(codec.encode(pending).data))

    assert set(stored) == {"tool_call_id", "turn_id", "tool_name", "arguments", "policy", "deferral_order", "status"}
    assert codec.decode(codec.encode(pending)) == pending


def test_a_tool_call_record_stored_with_every_field_still_reads() -> None:
    every_field = json.dumps(to_json_data(RECORD, AgentToolCall), sort_keys=True)

    assert "approval_deadline" in every_field
    assert codec_registry().resolve(AgentToolCall).decode(dex.Value(dex.WireKind.JSON, every_field)) == RECORD


def test_a_snapshot_keeps_every_field_of_its_tool_call_records() -> None:
    value = AgentSnapshot(
        state=STATE, messages=(), pending_interrupts=(), tool_calls=(RECORD,), usage=USAGE, queued_message_count=0
    )

    snapshot = json.loads(str(codec_registry().resolve(AgentSnapshot).encode(value).data))

    assert snapshot["tool_calls"][0]["approval_deadline"] is None
    assert snapshot["tool_calls"][0]["sequential"] is False
