"""sagent history entries as stored session messages, and the session's tool state in them.

Storage: every sagent history entry is one session message whose
``framework_item`` is a JSON object, ``{"sagent": 1, "type": ..., ...}``,
holding every field of the entry, so `decode_entry` gives back an equal
dataclass (`encode_entry` / `decode_entry` round-trip exactly):

| entry              | ``type``       | fields                                                     | role          |
|--------------------|----------------|------------------------------------------------------------|---------------|
| ``UserMessage``    | ``user``       | text, attachments                                          | ``user``      |
| ``AgentSendMessage`` | ``agent_send`` | source, text, attachments                                | ``user``      |
| ``AssistantMessage`` | ``assistant`` | text, thinking blocks, thought signature, tool calls      | ``assistant`` |
|                    |                | (id, name, args, thought signature)                        |               |
| ``ToolResult``     | ``tool_result`` | call ID, content, kind, is_error, attachments, diff,     | ``tool``      |
|                    |                | diff file path, hint, summary                              |               |

Each also keeps sagent's ``id``, ``parent_id``, ``timestamp`` and ``hidden``
(the ``id`` comes from a process-wide counter and is never used to match
entries); attachments are base64. Display projection, as for Pydantic AI:
``text`` for user and assistant messages, ``tool_call_id``/``tool_name`` when
an assistant message holds exactly one call (``tool_call_ids`` lists all of
them), and the answered call's ID (and name, when known) on a tool result.

Tool state: the session's sagent ``ToolState`` (read cache, working
directory, recent files, invoked skills and rules) rides in the
``framework_item`` of the last message of each turn that ran tools, under
``"tool_state"`` (sagent's own ``serialize_tool_state`` form); decoding the
entry ignores it. `latest_tool_state` finds the newest one.
"""

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from sagent.types.runtime import (
    AgentSendMessage,
    AssistantMessage,
    BytesMessage,
    ToolCall,
    ToolResult,
    ToolResultKind,
    UserMessage,
)

from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.messages import AgentMessage, FrameworkMessage, MessageRole

HistoryEntry = UserMessage | AgentSendMessage | AssistantMessage | ToolResult
"""A sagent history entry the session stores."""

FORMAT_KEY = "sagent"
"""The key (and version) that marks a sagent ``framework_item``."""

FORMAT_VERSION = 1

TOOL_STATE_KEY = "tool_state"
"""Where a ``framework_item`` carries the session's tool state."""


def _attachments(items: Sequence[BytesMessage]) -> list[dict[str, str]]:
    return [{"data": base64.b64encode(item.data).decode(), "descriptor": item.descriptor} for item in items]


def _read_attachments(raw: object) -> tuple[BytesMessage, ...]:
    items = cast(list[dict[str, str]], raw or [])
    return tuple(BytesMessage(base64.b64decode(item["data"]), item["descriptor"]) for item in items)


def _base(entry: HistoryEntry) -> dict[str, Any]:
    return {
        FORMAT_KEY: FORMAT_VERSION,
        "id": entry.id,
        "parent_id": entry.parent_id,
        "timestamp": entry.timestamp,
        "hidden": entry.hidden,
    }


def entry_json(entry: HistoryEntry) -> dict[str, Any]:
    """Return ``entry`` as a JSON-ready object (every field)."""
    body = _base(entry)
    match entry:
        case UserMessage():
            body.update(type="user", text=entry.text, attachments=_attachments(entry.attachments))
        case AgentSendMessage():
            body.update(
                type="agent_send", source=entry.source, text=entry.text, attachments=_attachments(entry.attachments)
            )
        case AssistantMessage():
            body.update(
                type="assistant",
                text=entry.text,
                thinking_blocks=[dict(block) for block in entry.thinking_blocks],
                thought_signature=entry.thought_signature,
                tool_calls=[
                    {
                        "id": call.id,
                        "name": call.name,
                        "args": dict(call.args),
                        "thought_signature": call.thought_signature,
                    }
                    for call in entry.tool_calls
                ],
            )
        case ToolResult():
            body.update(
                type="tool_result",
                call_id=entry.call_id,
                content=entry.content,
                result_kind=entry.kind.value,
                is_error=entry.is_error,
                attachments=_attachments(entry.attachments),
                diff=entry.diff,
                diff_file_path=entry.diff_file_path,
                hint=entry.hint,
                summary=entry.summary,
            )
        case _:
            raise RunnerContractError(f"not a sagent history entry: {type(entry).__name__}")
    return body


def encode_entry(entry: HistoryEntry, *, tool_state: Mapping[str, object] | None = None) -> str:
    """Return ``entry`` as a ``framework_item``, with the session's ``tool_state`` when given."""
    body = entry_json(entry)
    if tool_state is not None:
        body[TOOL_STATE_KEY] = dict(tool_state)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _load(item: str) -> dict[str, Any]:
    try:
        body = json.loads(item)
    except ValueError as error:
        raise RunnerContractError(f"not a sagent framework_item: {item[:60]!r}") from error
    if not isinstance(body, dict) or body.get(FORMAT_KEY) != FORMAT_VERSION:
        raise RunnerContractError(f"not a sagent framework_item: {item[:60]!r}")
    return body


def entry_from_json(body: Mapping[str, Any]) -> HistoryEntry:
    """Read an object `entry_json` wrote.

    Raises:
        RunnerContractError: it is not one.
    """
    try:
        common: dict[str, Any] = {
            "id": body["id"],
            "parent_id": body["parent_id"],
            "timestamp": body["timestamp"],
            "hidden": body["hidden"],
        }
        match body["type"]:
            case "user":
                return UserMessage(text=body["text"], attachments=_read_attachments(body["attachments"]), **common)
            case "agent_send":
                return AgentSendMessage(
                    source=body["source"],
                    text=body["text"],
                    attachments=_read_attachments(body["attachments"]),
                    **common,
                )
            case "assistant":
                return AssistantMessage(
                    text=body["text"],
                    thinking_blocks=tuple(body["thinking_blocks"]),
                    thought_signature=body["thought_signature"],
                    tool_calls=tuple(
                        ToolCall(
                            id=call["id"],
                            name=call["name"],
                            args=call["args"],
                            thought_signature=call["thought_signature"],
                        )
                        for call in body["tool_calls"]
                    ),
                    **common,
                )
            case "tool_result":
                return ToolResult(
                    call_id=body["call_id"],
                    content=body["content"],
                    kind=ToolResultKind(body["result_kind"]),
                    is_error=body["is_error"],
                    attachments=_read_attachments(body["attachments"]),
                    diff=body["diff"],
                    diff_file_path=body["diff_file_path"],
                    hint=body["hint"],
                    summary=body["summary"],
                    **common,
                )
            case other:
                raise RunnerContractError(f"unknown sagent entry type {other!r}")
    except (KeyError, TypeError, ValueError) as error:
        raise RunnerContractError(f"not a sagent history entry: {error}") from error


def decode_entry(item: str) -> HistoryEntry:
    """Return the entry of a ``framework_item`` `encode_entry` wrote.

    Raises:
        RunnerContractError: ``item`` is not one.
    """
    return entry_from_json(_load(item))


def decode_entries(items: Iterable[str]) -> list[HistoryEntry]:
    """Return the entries of ``framework_item`` texts, in order."""
    return [decode_entry(item) for item in items]


def stored_tool_state(item: str) -> dict[str, object] | None:
    """Return the tool state a ``framework_item`` carries, or ``None``."""
    state = _load(item).get(TOOL_STATE_KEY)
    return cast(dict[str, object], state) if isinstance(state, dict) else None


def latest_tool_state(messages: Sequence[AgentMessage]) -> dict[str, object] | None:
    """Return the newest tool state stored in ``messages``, or ``None`` (a session whose turns ran no tools)."""
    for message in reversed(messages):
        if TOOL_STATE_KEY in message.framework_item:
            state = stored_tool_state(message.framework_item)
            if state is not None:
                return state
    return None


def framework_message(
    entry: HistoryEntry,
    *,
    tool_names: Mapping[str, str] | None = None,
    tool_state: Mapping[str, object] | None = None,
) -> FrameworkMessage:
    """Return the stored form of ``entry`` with its display projection.

    ``tool_names`` maps call IDs to tool names, for a tool result's ``tool_name``.
    """
    item = encode_entry(entry, tool_state=tool_state)
    match entry:
        case UserMessage() | AgentSendMessage():
            return FrameworkMessage(role=MessageRole.USER, framework_item=item, text=entry.text)
        case AssistantMessage():
            calls = entry.tool_calls
            one = calls[0] if len(calls) == 1 else None
            return FrameworkMessage(
                role=MessageRole.ASSISTANT,
                framework_item=item,
                text=entry.text or None,
                tool_call_id=None if one is None else one.id,
                tool_name=None if one is None else one.name,
                tool_call_ids=tuple(call.id for call in calls),
            )
        case ToolResult():
            return FrameworkMessage(
                role=MessageRole.TOOL,
                framework_item=item,
                tool_call_id=entry.call_id,
                tool_name=(tool_names or {}).get(entry.call_id),
                tool_call_ids=(entry.call_id,),
            )
        case _:
            raise RunnerContractError(f"not a sagent history entry: {type(entry).__name__}")
