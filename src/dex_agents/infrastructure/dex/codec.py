"""Serialization of every stored and RPC type: one cattrs converter, one Dex codec registry.

Dex 1.23's automatic codec only knows stdlib dataclasses, does not rebuild
optional nested values and needs every field present. dex-agents values are
attrs classes, so each gets a `dex.JsonCodec` backed by the single converter
built here:

- fields missing from stored JSON take their defaults, so a value written
  before a field with a default was added still reads;
- unknown keys are ignored, so an older reader can read a newer value;
- ``StrEnum`` fields are plain strings and datetimes ISO 8601 text;
- an `AgentEvent`'s typed payload is written as its fields and read back as the
  class `EVENT_PAYLOAD_TYPES` names for the event's ``type``.

The SDK decodes a stored value on every read, and ``RunModel`` reads every
stored message on every model call. The deeply immutable types read by every
Step (`MEMOIZED_WIRE_TYPES`) therefore get a `MemoizingJsonCodec`: a Worker
process decodes each distinct JSON text once and hands out the same frozen
value afterwards, within a budget of JSON characters per type.

Every codec reports the size of what it encodes to the Step attempt's
`WriteMeter` (`dex_agents.infrastructure.dex.frames`), so the binding can
refuse a result too large for one frame before it is sent.

An application builds its Registry with these codecs::

    registry = dex.Registry([flow], codec_registry(), allow_async_handlers=True)
"""

import dataclasses
import functools
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

import cattrs
import dex
from cattrs.gen import make_dict_unstructure_fn
from cattrs.preconf.json import make_converter

from dex_agents.domain.events import EVENT_PAYLOAD_TYPES, AgentEvent, AgentEventType
from dex_agents.domain.history import HistorySummary
from dex_agents.domain.interrupts import (
    AgentInterrupt,
    AgentInterruptResolution,
    ResolveInterruptRequest,
    SubmitToolResultRequest,
)
from dex_agents.domain.json_values import JsonObject
from dex_agents.domain.messages import AgentMessage, AgentUserMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.snapshot import AgentMessagesPage, AgentSnapshot, ListAgentMessagesRequest, MessageIndex
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.tools import AgentToolCall, ToolCallCompleted
from dex_agents.domain.turn_control import CancelTurnRequest, TurnCancelRequest
from dex_agents.domain.usage import AgentUsage
from dex_agents.infrastructure.dex.frames import count_write

T = TypeVar("T")

WIRE_TYPES: tuple[object, ...] = (
    AgentState,
    AgentMessage,
    AgentToolCall,
    list[AgentInterrupt],
    AgentUsage,
    AgentUserMessage,
    list[AgentUserMessage],
    TurnCancelRequest,
    CancelTurnRequest,
    AgentInterruptResolution,
    ToolCallCompleted,
    AgentEvent,
    AgentSessionStartInput,
    ResolveInterruptRequest,
    SubmitToolResultRequest,
    AgentSnapshot,
    ListAgentMessagesRequest,
    AgentMessagesPage,
    MessageIndex,
    HistorySummary,
)
"""Every type dex-agents stores, streams or sends through an RPC."""

MEMOIZED_WIRE_TYPES: tuple[type, ...] = (AgentMessage, AgentState, AgentToolCall, AgentUsage)
"""Frozen types, immutable all the way down, that Steps read again and again: decoded once per JSON text."""

STORED_WITHOUT_DEFAULTS: tuple[type, ...] = (AgentToolCall,)
"""Stored types whose own codec leaves out the fields that equal their defaults; decoding fills them in again.

A tool-call record is written at every change of its call and read by every model Step of its turn, and Dex
hands a Worker any value over 1 KiB as a blob ID that it fetches with a call of its own: without its dozen unset
fields (about 320 characters) a record with ordinary arguments stays inline. Only the record's own codec: a
record inside another value (an `AgentSnapshot` a client reads) keeps every field.
"""

DECODE_MEMO_CHARACTERS = 4 * 1024 * 1024
"""JSON characters a `MemoizingJsonCodec` keeps by default (oldest out first); memory is about three times that."""


class DecodeMemo(Generic[T]):
    """Decoded values by their JSON text, first in first out within a character budget; thread-safe."""

    def __init__(self, max_characters: int = DECODE_MEMO_CHARACTERS) -> None:
        self._values: dict[str, T] = {}
        self._characters = 0
        self._max_characters = max_characters
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._values)

    def get(self, text: str) -> T | None:
        """Return the value decoded from ``text`` earlier, if it is still kept."""
        return self._values.get(text)

    def put(self, text: str, value: T) -> None:
        """Keep ``value`` for ``text``, dropping the oldest entries to stay within the budget."""
        size = len(text)
        if size > self._max_characters:
            return
        with self._lock:
            if text in self._values:
                return
            while self._characters + size > self._max_characters:
                oldest = next(iter(self._values))
                del self._values[oldest]
                self._characters -= len(oldest)
            self._values[text] = value
            self._characters += size


@dataclasses.dataclass(frozen=True)
class MeteredJsonCodec(dex.JsonCodec[T]):
    """A `dex.JsonCodec` that reports the size of each value it encodes to the Step's `WriteMeter`."""

    def encode(self, value: T) -> dex.Value:
        """Encode ``value`` as the plain codec does, and count its size."""
        encoded = super().encode(value)
        count_write(self.type_name, len(cast(str, encoded.data)))  # ASCII JSON: characters are bytes
        return encoded


@dataclasses.dataclass(frozen=True)
class MemoizingJsonCodec(MeteredJsonCodec[T]):
    """A `dex.JsonCodec` that decodes each distinct JSON text once and then returns the same value.

    Only for frozen types whose fields are immutable all the way down: every
    reader shares the decoded object. Encoding is the plain `dex.JsonCodec`'s.
    A text that fails to decode is not kept, so it fails again on every read.
    """

    memo: DecodeMemo[T] = dataclasses.field(default_factory=DecodeMemo, compare=False, repr=False)

    def decode(self, value: dex.Value) -> T:
        """Return the value of ``value``'s JSON text, decoding it only the first time it is seen."""
        text = value.data
        if value.kind is not dex.WireKind.JSON or not isinstance(text, str):
            return super().decode(value)  # raises the SDK's TypeError
        decoded = self.memo.get(text)
        if decoded is None:
            decoded = super().decode(value)
            self.memo.put(text, decoded)
        return decoded


def _structure_datetime(value: Any, _type: object) -> datetime:
    return datetime.fromisoformat(value)


def _structure_json_object(value: Any, _type: object) -> JsonObject:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return dict(value)


def _is_json_object(type_hint: object) -> bool:
    return type_hint == JsonObject


def _structure_event(conv: cattrs.Converter) -> Callable[[Any, object], AgentEvent]:
    def structure(value: Any, _type: object) -> AgentEvent:
        event_type = AgentEventType(value["type"])
        return AgentEvent(
            type=event_type,
            payload=conv.structure(value["payload"], EVENT_PAYLOAD_TYPES[event_type]),
            turn_id=conv.structure(value.get("turn_id"), str | None),  # type: ignore[arg-type]
            step_execution_id=conv.structure(value["step_execution_id"], str),
            attempt=conv.structure(value["attempt"], int),
        )

    return structure


@functools.cache
def converter() -> cattrs.Converter:
    """Return the one converter of dex-agents (built on first use)."""
    conv = make_converter()
    conv.register_unstructure_hook(datetime, datetime.isoformat)
    conv.register_structure_hook(datetime, _structure_datetime)
    conv.register_unstructure_hook_func(_is_json_object, dict)
    conv.register_structure_hook_func(_is_json_object, _structure_json_object)
    conv.register_structure_hook(AgentEvent, _structure_event(conv))
    return conv


def to_json_data(value: object, type_hint: object) -> Any:
    """Return ``value`` as JSON-compatible data."""
    return converter().unstructure(value, unstructure_as=type_hint)


def from_json_data(data: Any, type_hint: Callable[..., T] | type[T] | object) -> Any:
    """Return the value of ``type_hint`` that ``data`` describes.

    Raises:
        cattrs.BaseValidationError: ``data`` does not describe such a value.
    """
    return converter().structure(data, type_hint)  # type: ignore[arg-type]


def _type_name(type_hint: object) -> str:
    return getattr(type_hint, "__name__", None) or repr(type_hint)


def json_codec(type_hint: object) -> "dex.JsonCodec[Any]":
    """Return the Dex codec of one wire type, backed by the converter (memoizing for `MEMOIZED_WIRE_TYPES`)."""
    conv = converter()
    if type_hint in STORED_WITHOUT_DEFAULTS:
        unstructure: Callable[[Any], Any] = make_dict_unstructure_fn(type_hint, conv, _cattrs_omit_if_default=True)
    else:
        unstructure = conv.get_unstructure_hook(type_hint)
    structure = conv.get_structure_hook(type_hint)
    name = f"dex_agents.{_type_name(type_hint)}"
    codec: type[dex.JsonCodec[Any]] = MeteredJsonCodec
    if type_hint in MEMOIZED_WIRE_TYPES:
        codec = MemoizingJsonCodec
    elif type_hint is AgentEvent:
        codec = dex.JsonCodec  # an event is a Stream message of its own, not part of the Step's result
    return codec(name, lambda data: structure(data, type_hint), unstructure)


@functools.cache
def codec_registry() -> dex.CodecRegistry:
    """Return the codec registry for Registries that serve dex-agents Flows."""
    return dex.CodecRegistry({type_hint: json_codec(type_hint) for type_hint in WIRE_TYPES})
