"""Messages of a session: what a framework produces and what the session stores.

A framework message is opaque to the session: ``framework_item`` is text the
framework writes and reads back (the Pydantic AI runner stores one JSON-encoded
``ModelMessage``). The display fields (``text``, ``tool_call_id``,
``tool_name``) are a projection for people and UIs.

Stored messages are numbered from 1 in the order the session appends them;
`message_sequence_key` turns a sequence into the 12-digit key of the
``AGENT_MESSAGES`` map so that keys sort like their numbers.
"""

import json
from enum import StrEnum

import attrs

MESSAGE_SEQUENCE_KEY_DIGITS = 12
"""Digits of a stored message's map key."""

_MAX_SEQUENCE = 10**MESSAGE_SEQUENCE_KEY_DIGITS - 1


class MessageRole(StrEnum):
    """Who a message speaks for; the wire carries the plain string."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


@attrs.frozen(kw_only=True)
class FrameworkMessage:
    """One message as a framework runner hands it to the session."""

    role: MessageRole
    """Whose message it is."""
    framework_item: str
    """The framework's own serialization of the message; the session never reads it."""
    text: str | None = None
    """Display text, if the message has any."""
    tool_call_id: str | None = None
    """Display: the tool call this message requests or answers, when it holds exactly one."""
    tool_name: str | None = None
    """Display: that tool call's tool name."""


@attrs.frozen(kw_only=True)
class AgentMessage:
    """A message stored in the session, with its place in the history."""

    sequence: int
    """Position in the session, from 1."""
    turn_id: str
    """The turn that stored it."""
    role: MessageRole
    """Whose message it is."""
    framework_item: str
    """The framework's own serialization of the message."""
    text: str | None = None
    """Display text, if any."""
    tool_call_id: str | None = None
    """Display: the single tool call this message requests or answers."""
    tool_name: str | None = None
    """Display: that call's tool name."""

    @classmethod
    def stored(cls, message: FrameworkMessage, *, sequence: int, turn_id: str) -> "AgentMessage":
        """Build the stored form of a framework message at ``sequence``."""
        return cls(
            sequence=sequence,
            turn_id=turn_id,
            role=message.role,
            framework_item=message.framework_item,
            text=message.text,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
        )


LARGE_MESSAGE_BYTES = 8 * 1024
"""A stored message estimated larger than this is listed in `AgentState.large_messages`."""

_STORED_OVERHEAD_BYTES = 256
"""Room for a stored message's keys, numbers and the engine's envelope."""


def stored_size(message: "AgentMessage | FrameworkMessage") -> int:
    """Return an upper estimate of ``message``'s stored size in bytes (its texts as escaped JSON, plus overhead)."""
    size = _STORED_OVERHEAD_BYTES
    for text in (message.framework_item, message.text, message.tool_call_id, message.tool_name):
        if text:
            size += len(json.encoder.encode_basestring_ascii(text))
    return size


def message_sequence_key(sequence: int) -> str:
    """Return the ``AGENT_MESSAGES`` key of a message sequence (12 digits, zero-padded).

    Raises:
        ValueError: ``sequence`` is below 1 or needs more than 12 digits.
    """
    if not 1 <= sequence <= _MAX_SEQUENCE:
        raise ValueError(f"message sequence must be in 1..{_MAX_SEQUENCE}, got {sequence!r}")
    return f"{sequence:0{MESSAGE_SEQUENCE_KEY_DIGITS}d}"


@attrs.frozen(kw_only=True)
class AgentUserMessage:
    """A user message sent to a session (the ``send_user_message`` input)."""

    text: str
    """What the user wrote."""

    @property
    def is_blank(self) -> bool:
        """Whether the text holds nothing but white space."""
        return not self.text.strip()
