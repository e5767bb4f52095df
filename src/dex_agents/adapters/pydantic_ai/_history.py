"""Pydantic AI messages as stored session messages, the turn replay and the run state.

Storage: every Pydantic AI `ModelMessage` is one session message whose
``framework_item`` is a JSON array holding that one message, as
``ModelMessagesTypeAdapter.dump_json([message])`` writes it, so
``ModelMessagesTypeAdapter.validate_json(framework_item)`` reads it back.
Display projection:

| Pydantic AI message                   | role          | display fields                          |
|---------------------------------------|---------------|-----------------------------------------|
| a user prompt or turn-failure note    | ``user``      | ``text``                                |
| ``ModelResponse``                     | ``assistant`` | ``text`` from its text parts; ``tool_*`` |
|                                       |               | when it holds exactly one tool call     |
| ``ModelRequest`` with tool returns    | ``tool``      | ``tool_*`` for exactly one tool return  |
| any other ``ModelRequest``            | ``user``      | none                                    |

Replay: each earlier turn is replayed as stored. A turn whose second stored
message is a ``ModelRequest`` holding a user prompt and no display text is the
first turn's opening request with the agent's system prompts; it replays in
place of the turn's user message, which it already contains.

Run state: the turn's messages so far plus the IDs of the calls the last model
response requested, as JSON text (see `RunState`).
"""

import json
from collections.abc import Iterable, Sequence
from itertools import groupby

import attrs
from pydantic_ai import ModelMessagesTypeAdapter
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
)

from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.messages import AgentMessage, FrameworkMessage, MessageRole

UserPrompt = str | Sequence[UserContent]
"""What a `UserPromptPart` holds."""


def dump_message(message: ModelMessage) -> str:
    """Return ``message`` as a ``framework_item``: a JSON array holding that one message."""
    return ModelMessagesTypeAdapter.dump_json([message]).decode()


def load_messages(items: Sequence[str]) -> list[ModelMessage]:
    """Return the messages of ``framework_item`` texts, in order.

    Every item is a JSON array; the arrays are joined and read in one pass.
    """
    bodies = [body for item in items if (body := _array_body(item))]
    return ModelMessagesTypeAdapter.validate_json("[" + ",".join(bodies) + "]")


def _array_body(item: str) -> str:
    text = item.strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise RunnerContractError(f"a Pydantic AI framework_item must be a JSON array, got {text[:60]!r}")
    return text[1:-1].strip()


def user_message(prompt: str) -> FrameworkMessage:
    """Return the stored form of a user prompt (a turn's opening text or a turn-failure note)."""
    request = ModelRequest(parts=[UserPromptPart(prompt)])
    return FrameworkMessage(role=MessageRole.USER, framework_item=dump_message(request), text=prompt)


def framework_message(message: ModelMessage) -> FrameworkMessage:
    """Return the stored form of a message a run produced, with its display projection."""
    item = dump_message(message)
    if isinstance(message, ModelResponse):
        calls = [part for part in message.parts if isinstance(part, ToolCallPart)]
        call = calls[0] if len(calls) == 1 else None
        return FrameworkMessage(
            role=MessageRole.ASSISTANT,
            framework_item=item,
            text=message.text,
            tool_call_id=None if call is None else call.tool_call_id,
            tool_name=None if call is None else call.tool_name,
        )
    returns = [part for part in message.parts if isinstance(part, ToolReturnPart)]
    if not returns:
        return FrameworkMessage(role=MessageRole.USER, framework_item=item)
    answer = returns[0] if len(returns) == 1 else None
    return FrameworkMessage(
        role=MessageRole.TOOL,
        framework_item=item,
        tool_call_id=None if answer is None else answer.tool_call_id,
        tool_name=None if answer is None else answer.tool_name,
    )


def turn_prompt(message: AgentMessage) -> UserPrompt:
    """Return the user prompt of a turn's stored user message.

    Raises:
        RunnerContractError: the message is not a Pydantic AI user prompt.
    """
    for loaded in load_messages([message.framework_item]):
        if isinstance(loaded, ModelRequest):
            for part in loaded.parts:
                if isinstance(part, UserPromptPart):
                    return part.content
    raise RunnerContractError(f"stored message {message.sequence!r} holds no Pydantic AI user prompt")


def is_bare_prompt(message: ModelMessage, prompt: UserPrompt) -> bool:
    """Whether ``message`` is a request holding nothing but ``prompt``: the stored user message says it all."""
    if not isinstance(message, ModelRequest) or len(message.parts) != 1:
        return False
    part = message.parts[0]
    return isinstance(part, UserPromptPart) and part.content == prompt


def replay(messages: Sequence[AgentMessage]) -> list[ModelMessage]:
    """Return the Pydantic AI history of stored messages (whole turns, in sequence order)."""
    kept: list[AgentMessage] = []
    for _turn_id, grouped in groupby(messages, key=lambda message: message.turn_id):
        turn = list(grouped)
        if len(turn) >= 2 and _is_stored_opening_request(turn[1]):
            turn = turn[1:]
        kept.extend(turn)
    return load_messages([message.framework_item for message in kept])


def _is_stored_opening_request(message: AgentMessage) -> bool:
    if message.role is not MessageRole.USER or message.text is not None:
        return False
    return any(
        isinstance(loaded, ModelRequest) and any(isinstance(part, UserPromptPart) for part in loaded.parts)
        for loaded in load_messages([message.framework_item])
    )


def _message_tuple(messages: Iterable[ModelMessage]) -> tuple[ModelMessage, ...]:
    return tuple(messages)


def _id_tuple(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(ids)


@attrs.frozen(kw_only=True)
class RunState:
    """What a model Step hands the next one: the turn's messages and the calls to answer."""

    messages: tuple[ModelMessage, ...] = attrs.field(converter=_message_tuple)
    """Every Pydantic AI message of the turn so far, its opening request first."""
    tool_call_ids: tuple[str, ...] = attrs.field(converter=_id_tuple)
    """The calls the last model response requested, in model order."""

    def encode(self) -> str:
        """Return the state as JSON text: ``{"tool_call_ids": [...], "messages": "<JSON array>"}``."""
        messages = ModelMessagesTypeAdapter.dump_json(list(self.messages)).decode()
        return json.dumps({"tool_call_ids": list(self.tool_call_ids), "messages": messages})

    @classmethod
    def decode(cls, text: str) -> "RunState":
        """Read a state `encode` wrote.

        Raises:
            RunnerContractError: ``text`` is not such a state.
        """
        try:
            loaded = json.loads(text)
            ids = loaded["tool_call_ids"]
            messages = ModelMessagesTypeAdapter.validate_json(loaded["messages"])
        except (ValueError, KeyError, TypeError) as error:
            raise RunnerContractError(f"not a Pydantic AI run state: {text[:60]!r}") from error
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise RunnerContractError(f"not a Pydantic AI run state: {text[:60]!r}")
        return cls(messages=messages, tool_call_ids=ids)
