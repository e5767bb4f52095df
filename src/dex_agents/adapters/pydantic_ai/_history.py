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
turn's opening request as the run sent it (with the first turn's system
prompts, or with the ``instructions`` the model saw); it replays in place of
the turn's user message, which it already contains. An opening request holding
nothing but the prompt is not stored again.

Run state: the turn's messages so far plus the IDs of the calls the last model
response requested, and the turn's usage so far, as JSON text (see `RunState`).

Parse memo: every ``RunModel`` replays all earlier turns, so without a memo a
Worker re-validates the whole stored history on every model Step (about 25 µs
a message: the dominant adapter cost, and the part that grows with the
session). `load_messages` keeps the parsed messages of each ``framework_item``
text in a bounded per-process LRU (`MessageMemo`) and hands out copies:
Pydantic AI assigns fields of history messages during a run (``run_id``,
``instructions``, ``parts``, ``metadata`` of the last request), so each load
returns new message objects with their own ``parts`` list and their own
mutable fields; the parts themselves are shared (Pydantic AI replaces parts,
it does not change them).
"""

import copy
import json
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import TypeVar

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
from pydantic_ai.usage import RunUsage

from dex_agents.adapters.pydantic_ai._usage import dump_run_usage, load_run_usage
from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.messages import AgentMessage, FrameworkMessage, MessageRole

_T = TypeVar("_T")

UserPrompt = str | Sequence[UserContent]
"""What a `UserPromptPart` holds."""


def dump_message(message: ModelMessage) -> str:
    """Return ``message`` as a ``framework_item``: a JSON array holding that one message."""
    return ModelMessagesTypeAdapter.dump_json([message]).decode()


def parse_messages(items: Sequence[str]) -> list[ModelMessage]:
    """Return the messages of ``framework_item`` texts, in order, without the memo.

    Every item is a JSON array; the arrays are joined and read in one pass.
    """
    bodies = [body for item in items if (body := _array_body(item))]
    return ModelMessagesTypeAdapter.validate_json("[" + ",".join(bodies) + "]")


def load_messages(items: Sequence[str]) -> list[ModelMessage]:
    """Return the messages of ``framework_item`` texts, in order: `parse_messages`, through `MESSAGE_MEMO`.

    The result equals `parse_messages` and holds new message objects on every call.
    """
    return MESSAGE_MEMO.load(items)


_MUTABLE_FIELDS = ("metadata", "provider_details", "failed_attempts")
"""Container fields of `ModelRequest` and `ModelResponse` besides ``parts``, copied deeply when set."""


def _shallow(value: _T) -> _T:
    """Return a shallow copy of a plain (``__dict__``) object, bypassing ``__init__`` as `copy.copy` does."""
    if not hasattr(value, "__dict__"):
        return copy.copy(value)
    fresh = object.__new__(type(value))
    fresh.__dict__.update(value.__dict__)
    return fresh


def _fresh(message: ModelMessage) -> ModelMessage:
    """Return a copy of a memoized message that a run may change without changing the memo.

    New message object, new ``parts`` list, new ``usage`` and deep copies of its
    other container fields (``metadata``, ``provider_details``,
    ``failed_attempts``); the parts themselves are shared.
    """
    fresh = _shallow(message)
    if isinstance(fresh, ModelResponse):
        fresh.parts = list(fresh.parts)
        fresh.usage = _shallow(fresh.usage)
    else:
        fresh.parts = list(fresh.parts)
    for name in _MUTABLE_FIELDS:
        if value := getattr(message, name, None):
            setattr(fresh, name, copy.deepcopy(value))
    return fresh


class MessageMemo:
    """A bounded LRU of parsed ``framework_item`` texts, keyed by the exact text.

    Holds at most ``max_items`` texts; the least recently loaded go first. Safe
    because a text always parses to the same messages and `load` never hands out
    the memoized objects themselves (see `_fresh`).
    """

    def __init__(self, max_items: int) -> None:
        """Make an empty memo of at most ``max_items`` texts."""
        self.max_items = max_items
        self._parsed: OrderedDict[str, tuple[ModelMessage, ...]] = OrderedDict()

    def __len__(self) -> int:
        """Return how many texts the memo holds."""
        return len(self._parsed)

    def clear(self) -> None:
        """Forget every text."""
        self._parsed.clear()

    def items(self) -> list[tuple[str, tuple[ModelMessage, ...]]]:
        """Return the memoized texts and their messages, least recently loaded first."""
        return list(self._parsed.items())

    def load(self, items: Sequence[str]) -> list[ModelMessage]:
        """Return the messages of ``items`` as `parse_messages` would, parsing only texts not memoized.

        Raises:
            RunnerContractError: an item is not a JSON array.
            pydantic.ValidationError: an item does not hold Pydantic AI messages.
        """
        parsed = self._parsed
        missing = [item for item in dict.fromkeys(items) if item not in parsed]
        found = self._parse(missing)
        loaded: list[ModelMessage] = []
        for item in items:
            messages = found[item] if item in found else parsed[item]
            parsed[item] = messages
            parsed.move_to_end(item)
            loaded.extend(_fresh(message) for message in messages)
        while len(parsed) > self.max_items:
            parsed.popitem(last=False)
        return loaded

    @staticmethod
    def _parse(items: list[str]) -> dict[str, tuple[ModelMessage, ...]]:
        if not items:
            return {}
        bodies = [_array_body(item) for item in items]
        together = parse_messages(items)
        if len(together) == len(items) and all(bodies):
            # One message per item (the storage form): split the one-pass parse.
            return {item: (message,) for item, message in zip(items, together, strict=True)}
        return {item: tuple(parse_messages([item])) for item in items}


MESSAGE_MEMO_MAX_ITEMS = 20_000
"""How many ``framework_item`` texts a Worker process keeps parsed (~2 KB each for a short message: ~40 MB full)."""

MESSAGE_MEMO = MessageMemo(MESSAGE_MEMO_MAX_ITEMS)
"""The per-process memo `load_messages` reads through."""


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
            tool_call_ids=tuple(part.tool_call_id for part in calls),
        )
    returns = [part for part in message.parts if isinstance(part, ToolReturnPart)]
    if not returns:
        return FrameworkMessage(role=MessageRole.USER, framework_item=item)
    answer = returns[0] if len(returns) == 1 else None
    # A user message steered into the turn travels in the request that carries the tool results.
    steered = [
        part.content for part in message.parts if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    return FrameworkMessage(
        role=MessageRole.TOOL,
        framework_item=item,
        text="\n\n".join(steered) or None,
        tool_call_id=None if answer is None else answer.tool_call_id,
        tool_name=None if answer is None else answer.tool_name,
        tool_call_ids=tuple(part.tool_call_id for part in returns),
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
    """Whether ``message`` is a request holding nothing but ``prompt``: the stored user message says it all.

    A request that carried ``instructions`` is not bare: the model saw them, so the stored turn keeps it.
    """
    if not isinstance(message, ModelRequest) or len(message.parts) != 1 or message.instructions is not None:
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
    usage: RunUsage | None = None
    """The turn's usage up to that response (its tools not yet run); ``None`` in a state written before it was kept."""

    def encode(self) -> str:
        """Return the state as JSON text: ``{"tool_call_ids": [...], "messages": "<JSON array>", "usage": {...}}``."""
        messages = ModelMessagesTypeAdapter.dump_json(list(self.messages)).decode()
        state: dict[str, object] = {"tool_call_ids": list(self.tool_call_ids), "messages": messages}
        if self.usage is not None:
            state["usage"] = dump_run_usage(self.usage)
        return json.dumps(state)

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
            usage = None if loaded.get("usage") is None else load_run_usage(loaded["usage"])
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise RunnerContractError(f"not a Pydantic AI run state: {text[:60]!r}") from error
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise RunnerContractError(f"not a Pydantic AI run state: {text[:60]!r}")
        return cls(messages=messages, tool_call_ids=ids, usage=usage)
