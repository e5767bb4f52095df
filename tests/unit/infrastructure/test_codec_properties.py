"""Property: every value of every wire type goes through its SDK codec and back unchanged, deterministically.

The values are drawn from the wire types' own attrs fields (`wire_values`), so
a field added to a wire type is covered without touching this file.
"""

import enum
import types
import typing
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs
import dex
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dex_agents import AgentEvent, codec_registry
from dex_agents.domain.json_values import JsonObject
from dex_agents.domain.session import size_pairs
from dex_agents.infrastructure.dex.codec import WIRE_TYPES

PROPERTY_SETTINGS = settings(
    max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
"""Enough examples to find a field the codec loses, few enough for the unit tier's seconds."""

_texts = st.text(max_size=12)
_json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _texts
json_objects: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    _texts,
    st.recursive(
        _json_scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3),
        max_leaves=6,
    ),
    max_size=4,
)
"""JSON objects as decoded JSON looks: dicts, lists and scalars (finite floats)."""

_size_pairs = st.lists(st.tuples(st.integers(1, 10**9), st.integers(0, 10**12)), max_size=3).map(size_pairs)


def wire_values(hint: object) -> st.SearchStrategy[Any]:
    """Return a strategy for values of the type ``hint``, built field by field for attrs classes."""
    if hint == JsonObject:
        return json_objects
    if hint is AgentEvent:  # its type follows from its payload's class
        return st.builds(
            lambda payload, turn_id, step_execution_id, attempt: AgentEvent(
                type=payload.event_type,
                payload=payload,
                turn_id=turn_id,
                step_execution_id=step_execution_id,
                attempt=attempt,
            ),
            wire_values(attrs.fields(AgentEvent).payload.type),
            st.none() | _texts,
            _texts,
            st.integers(1, 1000),
        )
    if isinstance(hint, type) and attrs.has(hint):
        return st.builds(hint, **{field.name: _field_values(field) for field in attrs.fields(hint) if field.init})
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(hint)
    simple: dict[object, st.SearchStrategy[Any]] = {
        str: _texts,
        int: st.integers(-(2**53), 2**53),
        bool: st.booleans(),
        float: st.floats(allow_nan=False, allow_infinity=False),
        type(None): st.none(),
        datetime: st.datetimes(timezones=st.just(UTC)),
    }
    if hint in simple:
        return simple[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return st.one_of([wire_values(arg) for arg in args])
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(wire_values(args[0]), max_size=3).map(tuple)
    if origin is tuple:
        return st.tuples(*(wire_values(arg) for arg in args))
    if origin in (list, Sequence):
        return st.lists(wire_values(args[0]), max_size=3)
    if origin in (dict, Mapping):
        return st.dictionaries(wire_values(args[0]), wire_values(args[1]), max_size=3)
    raise TypeError(f"no strategy for {hint!r}: extend wire_values")


def _field_values(field: "attrs.Attribute[Any]") -> st.SearchStrategy[Any]:
    converter: object = field.converter
    if converter is size_pairs:
        return _size_pairs
    return wire_values(field.type)


@pytest.mark.parametrize("type_hint", WIRE_TYPES, ids=lambda hint: getattr(hint, "__name__", repr(hint)))
def test_every_value_of_a_wire_type_round_trips_through_its_codec_deterministically(type_hint: object) -> None:
    codec = codec_registry().resolve(type_hint)

    @PROPERTY_SETTINGS
    @given(wire_values(type_hint))
    def round_trips(value: object) -> None:
        encoded = codec.encode(value)
        assert encoded.kind is dex.WireKind.JSON
        decoded = codec.decode(encoded)
        assert decoded == value
        assert codec.encode(decoded).data == encoded.data

    round_trips()
