"""The storage form of Pydantic AI messages, and the Worker's caches of them parsed and encoded.

Storage: every Pydantic AI `ModelMessage` is one session message whose
``framework_item`` is a JSON array holding that one message, as
``ModelMessagesTypeAdapter.dump_json([message])`` writes it (`dump_message`),
so ``ModelMessagesTypeAdapter.validate_json(framework_item)`` reads it back
(`parse_messages`).

History cache: every ``RunModel`` replays the model's window, so without a
cache a Worker would re-validate every message of it on every model Step
(about 25 µs a message plus the JSON's length: the part that grows with the
window). `_history.replay` and `_history.turn_prompt` read through `_history.HISTORY_CACHE`, a
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

`EncodedMessages` keeps each settled message's part of a run state's text by
message object, so a live run serving many model Steps does not serialise the
whole turn again at every Step (`dex_agents.adapters.pydantic_ai._history.RunState`).
"""

import copy
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TypeVar, cast

import attrs
from pydantic_ai import ModelMessagesTypeAdapter
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse

from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.messages import AgentMessage

_T = TypeVar("_T")


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


def fresh_copy(message: ModelMessage) -> ModelMessage:
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


def _array_body(item: str) -> str:
    text = item.strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise RunnerContractError(f"a Pydantic AI framework_item must be a JSON array, got {text[:60]!r}")
    return text[1:-1].strip()


@attrs.frozen
class _Parsed:
    item: str
    """The ``framework_item`` text the messages were parsed from (a hit needs the same text)."""
    messages: tuple[ModelMessage, ...]
    """The parsed messages, shared: never handed out (see `fresh_copy`)."""


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
        return [fresh_copy(message) for parsed in self.parsed(session_id, messages) for message in parsed]

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
