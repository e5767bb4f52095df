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

History cache: every ``RunModel`` replays the model's window, so without a
cache a Worker would re-validate every message of it on every model Step
(about 25 µs a message plus the JSON's length: the part that grows with the
window). `replay` and `turn_prompt` read through `HISTORY_CACHE`, a
`HistoryCache` of the parsed messages of each stored message keyed by its
session ID and stored sequence, so a model Step parses only the messages
that are new to this Worker (a restarted Worker starts empty and parses
again). A hit needs the stored ``framework_item`` to be the same text (the
same object, or an equal one), so two sessions never mix and a sequence
whose text differs (a session started again under the same ID) is parsed
again; a compaction changes no stored message, only which ones the window
holds. The cache is bounded by the characters of the texts it keeps (least
recently used out first) and hands out copies: Pydantic AI assigns fields
of history messages during a run (``run_id``, ``instructions``, ``parts``,
``metadata`` of the last request), so each load returns new message objects
with their own ``parts`` list and their own mutable fields; the parts
themselves are shared (Pydantic AI replaces parts, it does not change them).
"""

import copy
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import TypeVar, cast

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
    """Return the messages of ``framework_item`` texts, in order, as new objects (`parse_messages`, no cache)."""
    return parse_messages(items)


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
    """Return a copy of a cached message that a run may change without changing the cache.

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


@attrs.frozen
class _Parsed:
    item: str
    """The ``framework_item`` text the messages were parsed from (a hit needs the same text)."""
    messages: tuple[ModelMessage, ...]
    """The parsed messages, shared: never handed out (see `_fresh`)."""


class HistoryCache:
    """Parsed stored messages by (session ID, stored sequence), bounded by the characters of their texts.

    Least recently used out first; a text longer than the whole budget is not
    kept. Thread-safe. `load` never hands out the cached objects themselves.
    """

    def __init__(self, max_characters: int) -> None:
        """Make an empty cache of at most ``max_characters`` characters of ``framework_item`` text."""
        self.max_characters = max_characters
        self._entries: OrderedDict[tuple[str, int], _Parsed] = OrderedDict()
        self._characters = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Return how many stored messages the cache holds."""
        return len(self._entries)

    @property
    def characters(self) -> int:
        """The characters of ``framework_item`` text the cache holds."""
        return self._characters

    def clear(self) -> None:
        """Forget every message (as a restarted Worker starts)."""
        with self._lock:
            self._entries.clear()
            self._characters = 0

    def keys(self) -> list[tuple[str, int]]:
        """Return the (session ID, sequence) of every cached message, least recently used first."""
        with self._lock:
            return list(self._entries)

    def items(self) -> list[tuple[str, tuple[ModelMessage, ...]]]:
        """Return each cached text and its parsed messages (shared: read, never change), least recently used first."""
        with self._lock:
            return [(entry.item, entry.messages) for entry in self._entries.values()]

    def load(self, session_id: str, messages: Sequence[AgentMessage]) -> list[ModelMessage]:
        """Return the Pydantic AI messages of stored ``messages`` as `load_messages` would, as new objects.

        Raises:
            RunnerContractError: a ``framework_item`` is not a JSON array.
            pydantic.ValidationError: a ``framework_item`` does not hold Pydantic AI messages.
        """
        return [_fresh(message) for parsed in self.parsed(session_id, messages) for message in parsed]

    def parsed(self, session_id: str, messages: Sequence[AgentMessage]) -> list[tuple[ModelMessage, ...]]:
        """Return the cached (shared: read, never change) parse of each of ``messages``, parsing the misses."""
        with self._lock:
            found = [self._hit(session_id, message) for message in messages]
        missing = {
            message.sequence: message.framework_item
            for message, hit in zip(messages, found, strict=True)
            if hit is None
        }
        if not missing:
            return cast(list[tuple[ModelMessage, ...]], found)
        fresh = dict(zip(missing, _parse_each(list(missing.values())), strict=True))
        with self._lock:
            for sequence, item in missing.items():
                self._put((session_id, sequence), _Parsed(item, fresh[sequence]))
        return [fresh[message.sequence] if hit is None else hit for message, hit in zip(messages, found, strict=True)]

    def _hit(self, session_id: str, message: AgentMessage) -> tuple[ModelMessage, ...] | None:
        key = (session_id, message.sequence)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.item is not message.framework_item and entry.item != message.framework_item:
            return None  # the sequence holds another text: parsed again and replaced
        self._entries.move_to_end(key)
        return entry.messages

    def _put(self, key: tuple[str, int], entry: _Parsed) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._characters -= len(old.item)
        if len(entry.item) > self.max_characters:
            return
        self._entries[key] = entry
        self._characters += len(entry.item)
        while self._characters > self.max_characters:
            _, evicted = self._entries.popitem(last=False)
            self._characters -= len(evicted.item)


def _parse_each(items: list[str]) -> list[tuple[ModelMessage, ...]]:
    """Return the messages of each text: one pass over all of them when each holds one message (the storage form)."""
    bodies = [_array_body(item) for item in items]
    together = parse_messages(items)
    if len(together) == len(items) and all(bodies):
        return [(message,) for message in together]
    return [tuple(parse_messages([item])) for item in items]


HISTORY_CACHE_CHARACTERS = 32 * 1024 * 1024
"""Characters of ``framework_item`` text a Worker process keeps parsed (memory: a few times that, full)."""

HISTORY_CACHE = HistoryCache(HISTORY_CACHE_CHARACTERS)
"""The per-process cache `replay` and `turn_prompt` read through."""


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
    """Return the stored form of a message a run produced, with its display projection.

    The ``framework_item`` is `dump_message`'s text; a message a live run's run state already wrote takes it
    from `ENCODED_MESSAGES` (the same text).
    """
    item = ENCODED_MESSAGES.item(message) or dump_message(message)
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


def turn_prompt(message: AgentMessage, session_id: str) -> UserPrompt:
    """Return the user prompt of a turn's stored user message (of session ``session_id``).

    Raises:
        RunnerContractError: the message is not a Pydantic AI user prompt.
    """
    (parsed,) = HISTORY_CACHE.parsed(session_id, [message])
    for loaded in parsed:
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


def replay(messages: Sequence[AgentMessage], session_id: str) -> list[ModelMessage]:
    """Return the Pydantic AI history of stored messages of session ``session_id`` (whole turns, in sequence order)."""
    parsed = HISTORY_CACHE.parsed(session_id, messages)
    kept: list[tuple[ModelMessage, ...]] = []
    index = 0
    for _turn_id, grouped in groupby(messages, key=lambda message: message.turn_id):
        size = len(list(grouped))
        turn = parsed[index : index + size]
        if size >= 2 and _is_stored_opening_request(messages[index + 1], turn[1]):
            turn = turn[1:]
        kept.extend(turn)
        index += size
    return [_fresh(message) for messages_of in kept for message in messages_of]


def _is_stored_opening_request(message: AgentMessage, parsed: Sequence[ModelMessage]) -> bool:
    if message.role is not MessageRole.USER or message.text is not None:
        return False
    return any(
        isinstance(loaded, ModelRequest) and any(isinstance(part, UserPromptPart) for part in loaded.parts)
        for loaded in parsed
    )


class EncodedMessages:
    """Each message's part of a run state's text, by message object, bounded by characters (oldest out first).

    A run that serves many model Steps (a live run) hands the same message
    objects to every Step's run state, which would otherwise serialise the
    whole turn again at every Step. Only messages before the state's last
    ``ModelRequest`` are taken from here: Pydantic AI fills in fields of the
    request it is about to send (and of the newest one in its history), never
    of older ones, so those are written afresh every time. An entry holds its
    message, so its ``id`` is not reused while it is kept; it also holds the
    message's ``framework_item`` (`dump_message`), which the turn's end stores
    (`item`). Thread-safe.
    """

    def __init__(self, max_characters: int) -> None:
        """Make an empty cache of at most ``max_characters`` characters."""
        self.max_characters = max_characters
        self._bodies: OrderedDict[int, tuple[ModelMessage, str, str]] = OrderedDict()
        self._characters = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Return how many messages the cache holds."""
        return len(self._bodies)

    def clear(self) -> None:
        """Forget every message."""
        with self._lock:
            self._bodies.clear()
            self._characters = 0

    def bodies(self, messages: Sequence[ModelMessage]) -> list[str]:
        """Return each message as its JSON text escaped as inside a JSON string (``json.dumps`` without quotes)."""
        settled = max((index for index, message in enumerate(messages) if isinstance(message, ModelRequest)), default=0)
        bodies: list[str] = []
        for index, message in enumerate(messages):
            with self._lock:
                kept = self._bodies.get(id(message)) if index < settled else None
            if kept is not None and kept[0] is message:
                bodies.append(kept[2])
                continue
            item = dump_message(message)
            body = json.dumps(item[1:-1])[1:-1]
            bodies.append(body)
            if index < settled:
                self._put(message, item, body)
        return bodies

    def item(self, message: ModelMessage) -> str | None:
        """Return the ``framework_item`` (`dump_message`) of ``message`` as a run state last wrote it, if kept.

        Only a message that was before a run state's last ``ModelRequest`` is kept (see the class docstring),
        so the text is the one `dump_message` gives it now.
        """
        with self._lock:
            kept = self._bodies.get(id(message))
        if kept is not None and kept[0] is message:
            return kept[1]
        return None

    def _put(self, message: ModelMessage, item: str, body: str) -> None:
        size = len(item) + len(body)
        if size > self.max_characters:
            return
        with self._lock:
            old = self._bodies.pop(id(message), None)
            if old is not None:
                self._characters -= len(old[1]) + len(old[2])
            self._bodies[id(message)] = (message, item, body)
            self._characters += size
            while self._characters > self.max_characters:
                _, (_, evicted_item, evicted_body) = self._bodies.popitem(last=False)
                self._characters -= len(evicted_item) + len(evicted_body)


ENCODED_MESSAGES_CHARACTERS = 32 * 1024 * 1024
"""Characters a Worker process keeps by message object: each message's run-state text and its ``framework_item``
(so about 16 Mi characters of run-state text)."""

ENCODED_MESSAGES = EncodedMessages(ENCODED_MESSAGES_CHARACTERS)
"""The per-process cache `RunState.encode` writes through."""


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
    output_call_ids: tuple[str, ...] = attrs.field(default=(), converter=_id_tuple)
    """The output tool calls of that response the model Step's run did not process (it ran without them):
    the resumed run processes them with the calls' results, as a plain run does under ``end_strategy``
    ``'graceful'`` or ``'exhaustive'``."""

    def encode(self) -> str:
        """Return the state as JSON text: ``{"tool_call_ids": [...], "messages": "<JSON array>", "usage": {...}}``.

        ``"output_call_ids": [...]`` follows when there are any.

        The text is ``json.dumps`` of that object, with the messages as
        ``ModelMessagesTypeAdapter.dump_json`` writes them; each message's part
        of it comes from `ENCODED_MESSAGES` when that holds the same message
        object (see `EncodedMessages`).
        """
        head = json.dumps({"tool_call_ids": list(self.tool_call_ids)})[:-1]
        messages = '"[' + ",".join(ENCODED_MESSAGES.bodies(self.messages)) + ']"'
        usage = "" if self.usage is None else f', "usage": {json.dumps(dump_run_usage(self.usage))}'
        outputs = f', "output_call_ids": {json.dumps(list(self.output_call_ids))}' if self.output_call_ids else ""
        return f'{head}, "messages": {messages}{usage}{outputs}}}'

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
            outputs = loaded.get("output_call_ids", [])
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise RunnerContractError(f"not a Pydantic AI run state: {text[:60]!r}") from error
        for listed in (ids, outputs):
            if not isinstance(listed, list) or not all(isinstance(i, str) for i in listed):
                raise RunnerContractError(f"not a Pydantic AI run state: {text[:60]!r}")
        return cls(messages=messages, tool_call_ids=ids, usage=usage, output_call_ids=outputs)
