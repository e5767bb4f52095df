"""What the browser is told about each live event: one JSON object per event (`live_update`).

The page's script applies updates without interpreting them much, and only
ever inserts their strings as text (``textContent``), never as HTML:

- ``text`` updates carry a ``block`` key, ``(turn_id, step_execution_id,
  kind)``, and the Step ``attempt``. The script keeps, per block, the highest
  attempt seen: a delta of that attempt is appended, a delta of a higher one
  replaces the block's text (the superseded attempt's partial text goes), and a
  delta of a lower one is dropped. That is the grouping by ``(turn_id,
  step_execution_id, attempt)`` of `dex_agents.domain.events`.
- ``tool`` updates carry the call's ID, tool, effect (when the event says),
  status and the attempt of the Step that wrote it; the script keeps one line
  per call and updates it.
- ``refresh`` is true for events after which the committed state shows
  something new (an approval raised or answered, a call finished, a turn
  committed): the script then fetches the server-rendered panels again.
  ``committed`` (``turn_committed``) also drops the turn's live text: the
  stored messages in the transcript replace it.
- ``lasting`` notes (``turn_cancelled``) stay when their turn commits, so the
  page keeps saying that a person cancelled it and why; a steered message
  (``user_message_steered``) is a note of the turn it joined, which the
  stored user message in the transcript replaces.

`skip_event` decides which events a page that already shows the committed
turns must not draw again.
"""

from typing import assert_never

from dex_agents.domain.events import (
    AgentEvent,
    HistoryCompactedPayload,
    InterruptRaisedPayload,
    InterruptResolvedPayload,
    ReasoningDeltaPayload,
    SteeredLanding,
    TextDeltaPayload,
    ToolCallDeferredPayload,
    ToolCallFinishedPayload,
    ToolCallStartedPayload,
    TurnCancelledPayload,
    TurnCommittedPayload,
    TurnCompletedPayload,
    TurnFailedPayload,
    TurnStartedPayload,
    UsageRecordedPayload,
    UserMessageSteeredPayload,
)
from dex_agents.domain.json_values import JsonValue
from dex_agents.domain.session import turn_number_or_zero
from dex_agents.launch.output import visible


def skip_event(event: AgentEvent, *, shown_turns: int) -> bool:
    """Whether ``event`` belongs to a turn the page already shows committed (turns ``1..shown_turns``)."""
    number = turn_number_or_zero(event.turn_id)
    return 0 < number <= shown_turns


def live_update(event: AgentEvent) -> dict[str, JsonValue]:
    """Return the browser's update for one event (JSON data; every string in it is shown as text).

    Its strings' controls and bidi overrides are visible marks (`dex_agents.launch.output.visible`), as on the pages.
    """
    return {key: visible(value) if isinstance(value, str) else value for key, value in _update(event).items()}


def _update(event: AgentEvent) -> dict[str, JsonValue]:  # noqa: C901 - one case per event type: an exhaustive match
    base: dict[str, JsonValue] = {
        "type": event.type.value,
        "turn": event.turn_id,
        "step": event.step_execution_id,
        "attempt": event.attempt,
        "refresh": False,
    }
    payload = event.payload
    match payload:
        case TextDeltaPayload() | ReasoningDeltaPayload():
            kind = "text" if isinstance(payload, TextDeltaPayload) else "reasoning"
            block = f"{event.turn_id or ''}|{event.step_execution_id}|{kind}"
            return {**base, "kind": "text", "text_kind": kind, "block": block, "text": payload.text}
        case TurnStartedPayload():
            return {**base, "kind": "note", "text": f"{event.turn_id} started"}
        case TurnCompletedPayload():
            return {**base, "kind": "note", "text": f"{event.turn_id} completed"}
        case TurnFailedPayload():
            return {**base, "kind": "note", "text": f"{event.turn_id} failed: {payload.error}", "error": True}
        case TurnCommittedPayload():
            return {**base, "kind": "committed", "refresh": True, "text": f"{event.turn_id} {payload.outcome.value}"}
        case ToolCallDeferredPayload():
            return {
                **base,
                "kind": "tool",
                "call": payload.tool_call_id,
                "tool": payload.tool_name,
                "effect": payload.effect.value,
                "status": "awaiting approval" if payload.requires_approval else "deferred",
                "refresh": True,
            }
        case ToolCallStartedPayload():
            return {
                **base,
                "kind": "tool",
                "call": payload.tool_call_id,
                "tool": payload.tool_name,
                "status": "running",
            }
        case ToolCallFinishedPayload():
            return {
                **base,
                "kind": "tool",
                "call": payload.tool_call_id,
                "tool": payload.tool_name,
                "status": payload.status.value,
                "refresh": True,
            }
        case InterruptRaisedPayload() if payload.kind == "tool_result":
            return {
                **base,
                "kind": "note",
                "text": f"{payload.tool_name} ({payload.tool_call_id}) waits for its result from outside",
                "refresh": True,
            }
        case InterruptRaisedPayload():
            return {
                **base,
                "kind": "note",
                "text": f"{payload.tool_name} ({payload.tool_call_id}) waits for approval: {payload.interrupt_id}",
                "refresh": True,
            }
        case InterruptResolvedPayload() if payload.kind == "tool_result":
            answer = "result submitted" if payload.approved else "no result"
            why = f": {payload.rejection_message}" if payload.rejection_message else ""
            return {**base, "kind": "note", "text": f"{payload.interrupt_id} {answer}{why}", "refresh": True}
        case InterruptResolvedPayload():
            answer = "approved" if payload.approved else "rejected"
            by = f" by {payload.approver}" if payload.approver else ""
            why = f": {payload.rejection_message}" if payload.rejection_message else ""
            return {**base, "kind": "note", "text": f"{payload.interrupt_id} {answer}{by}{why}", "refresh": True}
        case UsageRecordedPayload():
            total = payload.session
            return {
                **base,
                "kind": "usage",
                "text": (
                    f"{total.model_calls} model calls, {total.input_tokens} input tokens, "
                    f"{total.output_tokens} output tokens"
                ),
            }
        case HistoryCompactedPayload():
            return {
                **base,
                "kind": "note",
                "text": f"history compacted: messages {payload.first_sequence}-{payload.through_sequence} summarised",
            }
        case UserMessageSteeredPayload():
            match payload.landed:
                case SteeredLanding.RUNNING_TURN:
                    where = f"joined {event.turn_id}: its next model call sees it"
                case SteeredLanding.NEW_TURN:
                    where = f"starts {event.turn_id} (the turn it was meant for had ended)"
                case _:
                    assert_never(payload.landed)
            return {**base, "kind": "note", "text": f"steered message {where}: {payload.text}", "refresh": True}
        case TurnCancelledPayload():
            why = f": {payload.reason}" if payload.reason else " (no reason given)"
            calls = payload.finished_tool_calls
            ran = f"; {calls} tool call{'s' if calls != 1 else ''} of it had ended"
            return {
                **base,
                "kind": "lasting",
                "style": "cancelled",
                "text": f"{event.turn_id} cancelled by a person{why}{ran}",
                "refresh": True,
            }
        case _:
            assert_never(payload)
