"""A session's stored messages as AI SDK ``UIMessage`` objects, to hydrate a chat page (``GET …/{id}/messages``).

Each turn is its user message, then one assistant message with the turn's
parts, the shape the live stream builds (`dex_agents.ui._parts`): a
``step-start`` per model call, its text and reasoning, and each tool call with
its input and how it ended. The assistant message's ID is the one the turn's
streams use (`assistant_message_id`); the user message's is the ID the page
gave it (the stored client message ID), else ``user-<turn_id>``.

Pydantic AI sessions are rendered by Pydantic AI's own encoder
(``VercelAIAdapter.dump_messages`` on the stored ``ModelMessage`` objects):
inputs, outputs and denials as the model saw them. A steered user prompt
becomes a ``steering-message`` part. Approval IDs are the session's interrupt
IDs, and a call that ran after an approval keeps it. For another framework's
runner the display fields are all there is: texts, and each call's tool name
and outcome without its input.

The notes the session stores for the model (a failed or cancelled turn's) are
not shown; a turn with nothing but them has only its user message.
"""

from collections.abc import Sequence
from itertools import groupby
from typing import Any

from pydantic_ai import ModelMessagesTypeAdapter
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.ui.vercel_ai import VercelAIAdapter

from dex_agents.domain.failure_note import TURN_FAILURE_NOTE_HEADER
from dex_agents.domain.interrupts import interrupt_id_for
from dex_agents.domain.json_values import JsonObject, JsonValue
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.tools import ApprovalStatus, ToolCallStatus, ToolOutcome
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER
from dex_agents.ui._parts import SDK_VERSION

_NOTES = (TURN_FAILURE_NOTE_HEADER, TURN_CANCELLED_NOTE_HEADER)
_DROPPED_KEYS = frozenset({"providerMetadata", "callProviderMetadata"})


def assistant_message_id(turn_id: str) -> str:
    """The ID of a turn's assistant message, the same on every stream of the turn and in the history."""
    return f"assistant-{turn_id}"


def ui_messages(messages: Sequence[AgentMessage], *, pydantic_ai: bool) -> list[JsonObject]:
    """Return ``messages`` (a session's, in sequence order) as ``UIMessage`` JSON objects, turn by turn."""
    result: list[JsonObject] = []
    for turn_id, grouped in groupby(messages, key=lambda message: message.turn_id):
        turn = list(grouped)
        first, rest = turn[0], turn[1:]
        if first.role is MessageRole.USER and not _is_note(first):
            user_id = first.client_message_id or f"user-{turn_id}"
            result.append({"id": user_id, "role": "user", "parts": [{"type": "text", "text": first.text or ""}]})
        else:
            rest = turn
        shown = [message for message in rest if not _is_note(message)]
        parts = _framework_parts(shown, turn_id) if pydantic_ai else _display_parts(shown, turn_id)
        if parts:
            result.append({"id": assistant_message_id(turn_id), "role": "assistant", "parts": parts})
    return result


def _is_note(message: AgentMessage) -> bool:
    return message.role is MessageRole.USER and (message.text or "").startswith(_NOTES)


def _outcomes(messages: Sequence[AgentMessage]) -> dict[str, ToolOutcome]:
    return {outcome.tool_call_id: outcome for message in messages for outcome in message.tool_outcomes}


def _framework_parts(messages: Sequence[AgentMessage], turn_id: str) -> list[JsonObject]:
    """The assistant parts of one turn from its stored Pydantic AI messages, by Pydantic AI's encoder."""
    model_messages: list[ModelMessage] = []
    for message in messages:
        model_messages.extend(ModelMessagesTypeAdapter.validate_json(message.framework_item))
    # A request without tool results is the first turn's opening request (system prompts and the prompt again).
    kept = [
        message
        for message in model_messages
        if not isinstance(message, ModelRequest) or any(isinstance(part, ToolReturnPart) for part in message.parts)
    ]
    outcomes = _outcomes(messages)
    parts: list[JsonObject] = []
    for ui_message in VercelAIAdapter.dump_messages(kept, sdk_version=SDK_VERSION):
        dumped = [_clean(part.model_dump(mode="json", by_alias=True, exclude_none=True)) for part in ui_message.parts]
        if ui_message.role == "assistant":
            parts.append({"type": "step-start"})
            parts.extend(_with_approval(part, turn_id, outcomes) for part in dumped)
        elif ui_message.role == "user":
            texts = [{"type": "text", "text": part["text"]} for part in dumped if part.get("type") == "text"]
            if texts:
                parts.append({"type": "steering-message", "id": f"steered-{ui_message.id}", "parts": texts})
    return parts


def _clean(part: dict[str, Any]) -> JsonObject:
    return {key: value for key, value in part.items() if key not in _DROPPED_KEYS}


def _with_approval(part: JsonObject, turn_id: str, outcomes: dict[str, ToolOutcome]) -> JsonObject:
    """Give a tool part its approval as the live stream showed it: the interrupt ID, and the answer."""
    call = part.get("toolCallId")
    if not isinstance(call, str):
        return part
    outcome = outcomes.get(call)
    if outcome is None or outcome.approval is None:
        return part
    approval: dict[str, JsonValue] = {
        "id": interrupt_id_for(turn_id, call),
        "approved": outcome.approval is ApprovalStatus.APPROVED,
    }
    if outcome.approval is not ApprovalStatus.APPROVED and outcome.rejection_message:
        approval["reason"] = outcome.rejection_message
    return {**part, "approval": approval}


def _display_parts(messages: Sequence[AgentMessage], turn_id: str) -> list[JsonObject]:
    """The assistant parts of one turn from the display fields alone (a runner other than Pydantic AI's).

    A model call is its assistant message's text; its calls are the outcomes the tool results carry.
    """
    parts: list[JsonObject] = []
    for message in messages:
        if message.role is MessageRole.ASSISTANT:
            parts.append({"type": "step-start"})
            if message.text:
                parts.append({"type": "text", "text": message.text})
        elif message.role is MessageRole.TOOL:
            parts.extend(_display_tool_part(outcome, turn_id) for outcome in message.tool_outcomes)
    return parts


def _display_tool_part(outcome: ToolOutcome, turn_id: str) -> JsonObject:
    call = outcome.tool_call_id
    part: JsonObject = {"type": f"tool-{outcome.tool_name}", "toolCallId": call, "input": {}}
    if outcome.status is ToolCallStatus.SUCCEEDED:
        part = {**part, "state": "output-available", "output": None}
    elif outcome.status in (ToolCallStatus.REJECTED, ToolCallStatus.EXPIRED):
        part = {**part, "state": "output-denied"}
    else:
        error = outcome.error or outcome.rejection_message or f"the tool call ended {outcome.status.value}"
        part = {**part, "state": "output-error", "errorText": error}
    return _with_approval(part, turn_id, {call: outcome})
