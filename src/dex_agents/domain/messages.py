"""Messages of a session: what a framework produces and what the session stores.

A framework message is opaque to the session: ``framework_item`` is text the
framework writes and reads back (the Pydantic AI runner stores one JSON-encoded
``ModelMessage``). The display fields (``text``, ``tool_call_id``,
``tool_name``, ``tool_call_ids``) are a projection for people and UIs.

The session adds two display fields of its own when it stores a message:
``tool_outcomes``, what each tool call the message answers came to (a tool
result of a completed turn, or a failed turn's note), so past outcomes stay
visible after the turn's records are deleted; and ``client_message_id``, the
ID an application gave the user message that started the turn.

Stored messages are numbered from 1 in the order the session appends them;
`message_sequence_key` turns a sequence into the 12-digit key of the
``AGENT_MESSAGES`` map so that keys sort like their numbers.
"""

import json
from collections.abc import Iterable
from enum import StrEnum

import attrs

from dex_agents.domain.tools import ToolOutcome

MESSAGE_SEQUENCE_KEY_DIGITS = 12
"""Digits of a stored message's map key."""

_MAX_SEQUENCE = 10**MESSAGE_SEQUENCE_KEY_DIGITS - 1


def _id_tuple(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(ids)


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
    tool_call_ids: tuple[str, ...] = attrs.field(default=(), converter=_id_tuple)
    """Display: every tool call this message requests or answers, in order; a runner
    may leave it empty, and ``tool_call_id`` then stands for the one call."""

    @property
    def answered_tool_call_ids(self) -> tuple[str, ...]:
        """The tool calls this message names: ``tool_call_ids``, else ``tool_call_id``."""
        if self.tool_call_ids:
            return self.tool_call_ids
        return () if self.tool_call_id is None else (self.tool_call_id,)


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
    tool_outcomes: tuple[ToolOutcome, ...] = ()
    """Display: what each tool call this message answers came to, in the turn's call
    order; set on a completed turn's tool results and on a failed turn's note."""
    client_message_id: str | None = None
    """The application's ID of the user message that started the turn (on that message only)."""

    @classmethod
    def stored(
        cls,
        message: FrameworkMessage,
        *,
        sequence: int,
        turn_id: str,
        tool_outcomes: Iterable[ToolOutcome] = (),
        client_message_id: str | None = None,
    ) -> "AgentMessage":
        """Build the stored form of a framework message at ``sequence``."""
        return cls(
            sequence=sequence,
            turn_id=turn_id,
            role=message.role,
            framework_item=message.framework_item,
            text=message.text,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            tool_outcomes=tuple(tool_outcomes),
            client_message_id=client_message_id,
        )


LARGE_MESSAGE_BYTES = 8 * 1024
"""A stored message estimated larger than this is listed in `AgentState.large_messages`."""

_STORED_OVERHEAD_BYTES = 256
"""Room for a stored message's keys, numbers and the engine's envelope."""

MIN_STORED_BYTES = _STORED_OVERHEAD_BYTES
"""The least `stored_size` of any message."""


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


class MessageDelivery(StrEnum):
    """How a user message sent while a turn runs reaches the model.

    ``queue`` (the default): it waits for the running turn to end and starts the
    next one. ``steer``: it joins the running turn at its next model-call
    boundary (after every tool result of the current model response); sent
    while no turn runs, it starts a turn like a queued message.
    """

    QUEUE = "queue"
    STEER = "steer"


@attrs.frozen(kw_only=True)
class AgentUserMessage:
    """A user message sent to a session (the ``send_user_message`` input)."""

    text: str
    """What the user wrote."""
    client_message_id: str | None = None
    """An ID the application chose to follow the message (`AgentSessionClient.submit_user_message`
    sets a fresh one); stored on the turn's user message, and the ID `withdraw_user_message` takes."""
    delivery: MessageDelivery = attrs.field(default=MessageDelivery.QUEUE, converter=MessageDelivery)
    """``queue`` or ``steer`` (see `MessageDelivery`)."""

    @property
    def message_id(self) -> str | None:
        """The ID `AgentSessionClient.withdraw_user_message` takes: the client message ID."""
        return self.client_message_id

    @property
    def is_blank(self) -> bool:
        """Whether the text holds nothing but white space."""
        return not self.text.strip()
