"""Serialization of every stored and RPC type: one cattrs converter, one Dex codec registry.

Dex 1.23's automatic codec only knows stdlib dataclasses, does not rebuild
optional nested values and needs every field present. dex-agents values are
attrs classes, so each gets a `dex.JsonCodec` backed by the single converter
built here:

- fields missing from stored JSON take their defaults, so a value written
  before a field with a default was added still reads;
- unknown keys are ignored, so an older reader can read a newer value;
- ``StrEnum`` fields are plain strings and datetimes ISO 8601 text.

An application builds its Registry with these codecs::

    registry = dex.Registry([flow], codec_registry(), allow_async_handlers=True)
"""

import functools
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import cattrs
import dex
from cattrs.preconf.json import make_converter

from dex_agents.domain.events import AgentEvent
from dex_agents.domain.interrupts import AgentInterrupt, AgentInterruptResolution, ResolveInterruptRequest
from dex_agents.domain.json_values import JsonObject
from dex_agents.domain.messages import AgentMessage, AgentUserMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.snapshot import AgentMessagesPage, AgentSnapshot, ListAgentMessagesRequest
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.tools import AgentToolCall, ToolCallCompleted
from dex_agents.domain.usage import AgentUsage

T = TypeVar("T")

WIRE_TYPES: tuple[object, ...] = (
    AgentState,
    AgentMessage,
    AgentToolCall,
    list[AgentInterrupt],
    AgentUsage,
    AgentUserMessage,
    AgentInterruptResolution,
    ToolCallCompleted,
    AgentEvent,
    AgentSessionStartInput,
    ResolveInterruptRequest,
    AgentSnapshot,
    ListAgentMessagesRequest,
    AgentMessagesPage,
)
"""Every type dex-agents stores, streams or sends through an RPC."""


def _structure_datetime(value: Any, _type: object) -> datetime:
    return datetime.fromisoformat(value)


def _structure_json_object(value: Any, _type: object) -> JsonObject:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return dict(value)


def _is_json_object(type_hint: object) -> bool:
    return type_hint == JsonObject


@functools.cache
def converter() -> cattrs.Converter:
    """Return the one converter of dex-agents (built on first use)."""
    conv = make_converter()
    conv.register_unstructure_hook(datetime, datetime.isoformat)
    conv.register_structure_hook(datetime, _structure_datetime)
    conv.register_unstructure_hook_func(_is_json_object, dict)
    conv.register_structure_hook_func(_is_json_object, _structure_json_object)
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
    """Return the Dex codec of one wire type, backed by the converter."""
    conv = converter()
    unstructure = conv.get_unstructure_hook(type_hint)
    structure = conv.get_structure_hook(type_hint)
    name = f"dex_agents.{_type_name(type_hint)}"
    return dex.JsonCodec(name, lambda data: structure(data, type_hint), unstructure)


@functools.cache
def codec_registry() -> dex.CodecRegistry:
    """Return the codec registry for Registries that serve dex-agents Flows."""
    return dex.CodecRegistry({type_hint: json_codec(type_hint) for type_hint in WIRE_TYPES})
