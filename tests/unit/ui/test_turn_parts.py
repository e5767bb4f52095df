"""`TurnParts`: a turn's events as the chunks of one AI SDK assistant message, deterministic for replays."""

import json

import pytest

from dex_agents.domain import events as ev
from dex_agents.domain.events import AgentEvent, AgentEventBody
from dex_agents.domain.tools import ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.ui._parts import TurnParts, call_input, encode
from dex_agents.ui._requests import AnswerApprovals, ChatRequestError, SendText, parse_chat_request

TURN = "turn-1"


def event(body: AgentEventBody, step: str = "run-1", attempt: int = 1, turn: str | None = TURN) -> AgentEvent:
    return AgentEvent.enveloped(body, turn_id=turn, step_execution_id=step, attempt=attempt)


def wire(parts: TurnParts, *events: AgentEvent) -> list[dict[str, object]]:
    return [json.loads(encode(chunk).removeprefix("data: ")) for e in events for chunk in parts.feed(e)]


def types(chunks: list[dict[str, object]]) -> list[object]:
    return [chunk["type"] for chunk in chunks]


def test_a_model_call_is_a_step_with_its_text_and_the_tool_calls_it_asked_for() -> None:
    parts = TurnParts(TURN)
    chunks = wire(
        parts,
        event(ev.reasoning_delta("thinking")),
        event(ev.text_delta("Let me ")),
        event(ev.text_delta("look.")),
        event(ev.tool_call_deferred("c1", "find", ToolPolicy(ToolEffect.READ), arguments='{"id": "7"}')),
        event(ev.tool_call_started("c1", "find"), step="tool-1"),
        event(ev.text_delta("a tool's own text"), step="tool-1"),
        event(ev.tool_call_finished("c1", "find", ToolCallStatus.SUCCEEDED, output="found"), step="tool-1"),
        event(ev.text_delta("Done."), step="run-2"),
        event(ev.turn_committed(failed_with=None, message_count=5), step="await", turn=TURN),
    )
    assert types(chunks) == [
        "start-step",
        "reasoning-start", "reasoning-delta", "reasoning-end",
        "text-start", "text-delta", "text-delta", "text-end",
        "tool-input-available", "tool-output-available",
        "finish-step", "start-step", "text-start", "text-delta", "text-end",
        "finish-step", "finish",
    ]  # fmt: skip
    assert chunks[8] == {"type": "tool-input-available", "toolCallId": "c1", "toolName": "find", "input": {"id": "7"}}
    assert chunks[9] == {"type": "tool-output-available", "toolCallId": "c1", "output": "found"}
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
    assert len({chunk["id"] for chunk in chunks if "id" in chunk}) == 3  # part IDs are unique in the message
    assert parts.finished
    assert parts.feed(event(ev.turn_committed(failed_with=None, message_count=5))) == []


def test_a_retried_model_call_withdraws_its_superseded_attempt_and_drops_late_writes_of_it() -> None:
    parts = TurnParts(TURN)
    chunks = wire(
        parts,
        event(ev.text_delta("partial"), attempt=1),
        event(ev.text_delta("again"), attempt=2),
        event(ev.text_delta("late write of attempt 1"), attempt=1),
        event(ev.text_delta(" fine"), attempt=2),
    )
    assert types(chunks) == [
        "start-step",
        "text-start",
        "text-delta",
        "reset-step",
        "text-start",
        "text-delta",
        "text-delta",
    ]
    assert [chunk.get("delta") for chunk in chunks if chunk["type"] == "text-delta"] == ["partial", "again", " fine"]


def test_an_approval_is_requested_answered_and_a_rejection_is_denied_output() -> None:
    parts = TurnParts(TURN)
    policy = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)
    asked = wire(
        parts,
        event(ev.tool_call_deferred("c1", "refund", policy, arguments='{"order": 7}')),
        event(ev.interrupt_raised("turn-1.c1", "c1", "refund", None)),
        event(ev.tool_call_deferred("c2", "read", ToolPolicy(ToolEffect.READ))),
    )
    assert types(asked)[-2:] == ["tool-approval-request", "tool-input-available"]
    assert asked[2] == {"type": "tool-approval-request", "approvalId": "turn-1.c1", "toolCallId": "c1"}
    while_c2_runs = parts.waiting_for_approval
    wire(parts, event(ev.tool_call_finished("c2", "read", ToolCallStatus.SUCCEEDED, output="ok"), step="t2"))
    assert (while_c2_runs, parts.waiting_for_approval) == (False, True)
    assert [type(chunk).__name__ for chunk in parts.close_step()] == ["FinishStepChunk"]
    answered = wire(
        parts,
        event(ev.interrupt_resolved("turn-1.c1", approved=False, rejection_message="Too costly"), step="a1"),
        event(ev.tool_call_finished("c1", "refund", ToolCallStatus.REJECTED, error="Too costly"), step="a1"),
    )
    assert answered == [
        {"type": "tool-approval-response", "approvalId": "turn-1.c1", "approved": False, "reason": "Too costly"},
        {"type": "tool-output-denied", "toolCallId": "c1"},
    ]
    assert not parts.waiting_for_approval


def test_a_call_waiting_for_its_result_shows_no_approval_and_lets_the_stream_end() -> None:
    parts = TurnParts(TURN)
    read = ToolPolicy(ToolEffect.READ)
    asked = wire(
        parts,
        event(ev.tool_call_deferred("c1", "inventory", read, arguments='{"sku": "A-7"}')),
        event(ev.interrupt_raised("turn-1.c1.result", "c1", "inventory", None, kind="tool_result"), step="w1"),
    )
    assert "tool-approval-request" not in types(asked)
    assert parts.waiting_for_approval  # nothing the chat can give: the stream ends with finish tool-calls
    answered = wire(
        parts,
        event(
            ev.interrupt_resolved("turn-1.c1.result", approved=True, rejection_message=None, kind="tool_result"),
            step="w1",
        ),
        event(ev.tool_call_finished("c1", "inventory", ToolCallStatus.SUCCEEDED, output="3"), step="w1"),
    )
    assert types(answered) == ["tool-output-available"]
    assert not parts.waiting_for_approval


def test_a_failed_turn_ends_with_an_error_and_a_failed_call_with_its_error_text() -> None:
    parts = TurnParts(TURN)
    chunks = wire(
        parts,
        event(ev.tool_call_deferred("c1", "write", ToolPolicy(ToolEffect.IDEMPOTENT_WRITE))),
        event(ev.tool_call_finished("c1", "write", ToolCallStatus.OUTCOME_UNKNOWN, error="3 attempts"), step="t"),
        event(ev.turn_committed(failed_with="the model failed", message_count=1), step="await"),
        event(ev.text_delta("another turn"), turn="turn-2"),
    )
    assert chunks[2] == {"type": "tool-output-error", "toolCallId": "c1", "errorText": "3 attempts"}
    assert chunks[-2:] == [
        {"type": "error", "errorText": "the model failed"},
        {"type": "finish", "finishReason": "error"},
    ]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [('{"a": 1}', {"a": 1}), ("[1]", {"INVALID_JSON": "[1]"}), ("{oops", {"INVALID_JSON": "{oops"}), (None, {})],
)
def test_call_input_is_a_json_object_as_pydantic_ai_shows_arguments(arguments: str | None, expected: object) -> None:
    assert call_input(arguments) == expected


def body(**fields: object) -> bytes:
    return json.dumps({"id": "s1", "trigger": "submit-message", **fields}).encode()


def test_a_user_message_body_is_read_from_its_last_message_only() -> None:
    old = {"role": "user", "parts": [{"type": "text", "text": "old"}]}
    last = {
        "id": "m2",
        "role": "user",
        "parts": [{"type": "text", "text": "a"}, {"type": "file"}, {"type": "text", "text": "b"}],
    }
    assert parse_chat_request(body(messages=[old, last])) == SendText(session_id="s1", text="a\nb", message_id="m2")


def test_an_approval_body_carries_each_approval_responded_part() -> None:
    parts = [
        {"type": "tool-a", "state": "output-available"},
        {
            "type": "tool-b",
            "state": "approval-responded",
            "approval": {"id": "turn-1.b", "approved": False, "reason": "no"},
        },
    ]
    request = parse_chat_request(body(messages=[{"role": "assistant", "parts": parts}]))
    assert isinstance(request, AnswerApprovals)
    assert [(a.approval_id, a.approved, a.reason) for a in request.answers] == [("turn-1.b", False, "no")]


@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b'"text"',
        json.dumps({"messages": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}]}).encode(),
        body(messages=[]),
        body(messages=[{"role": "user", "parts": [{"type": "text", "text": "  "}]}]),
        body(trigger="regenerate-message", messages=[{"role": "user", "parts": [{"type": "text", "text": "x"}]}]),
        body(messages=[{"role": "assistant", "parts": [{"type": "text", "text": "x"}]}]),
        body(
            messages=[
                {
                    "role": "assistant",
                    "parts": [{"state": "approval-responded", "approval": {"id": "i", "approved": 1}}],
                }
            ]
        ),
        body(messages=["not an object"]),
    ],
)
def test_refused_bodies_say_why_with_a_4xx(raw: bytes) -> None:
    with pytest.raises(ChatRequestError) as refused:
        parse_chat_request(raw)
    assert refused.value.status == 400
    assert refused.value.message
