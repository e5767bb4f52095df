"""The types every Step reads decode each distinct JSON text once, and still decode exactly as before."""

import threading
from datetime import datetime
from enum import Enum
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

import attrs
import cattrs
import dex
import pytest

from dex_agents import AgentMessage, AgentState, AgentStatus, AgentToolCall, AgentUsage, MessageRole, codec_registry
from dex_agents.infrastructure.dex.codec import (
    MEMOIZED_WIRE_TYPES,
    WIRE_TYPES,
    DecodeMemo,
    MemoizingJsonCodec,
    converter,
)

MESSAGE = AgentMessage(sequence=7, turn_id="turn-2", role=MessageRole.ASSISTANT, framework_item='{"a": 1}', text="hi")


def json_value(text: str) -> dex.Value:
    return dex.Value(dex.WireKind.JSON, text)


def fresh_codec(max_characters: int = 1_000_000) -> MemoizingJsonCodec[AgentMessage]:
    structure = converter().get_structure_hook(AgentMessage)
    return MemoizingJsonCodec(
        "test.AgentMessage",
        lambda data: structure(data, AgentMessage),
        converter().get_unstructure_hook(AgentMessage),
        memo=DecodeMemo(max_characters),
    )


@pytest.mark.parametrize("type_hint", MEMOIZED_WIRE_TYPES)
def test_the_registry_memoizes_exactly_the_memoized_types(type_hint: type) -> None:
    assert isinstance(codec_registry().resolve(type_hint), MemoizingJsonCodec)


@pytest.mark.parametrize("type_hint", [t for t in WIRE_TYPES if t not in MEMOIZED_WIRE_TYPES])
def test_other_wire_types_are_decoded_on_every_read(type_hint: object) -> None:
    assert not isinstance(codec_registry().resolve(type_hint), MemoizingJsonCodec)


def _frozen(cls: type, field: str) -> bool:
    try:
        setattr(object.__new__(cls), field, None)
    except attrs.exceptions.FrozenInstanceError:
        return True
    return False


def _immutable(type_hint: Any, seen: set[object]) -> bool:
    if type_hint in seen or type_hint in (str, int, bool, float, NoneType, datetime):
        return True
    origin = get_origin(type_hint)
    if origin in (Union, UnionType):
        return all(_immutable(arg, seen) for arg in get_args(type_hint))
    if origin is tuple:
        return all(arg is Ellipsis or _immutable(arg, seen) for arg in get_args(type_hint))
    if isinstance(type_hint, type) and issubclass(type_hint, Enum):
        return True
    if isinstance(type_hint, type) and attrs.has(type_hint):
        seen.add(type_hint)
        fields = attrs.fields(type_hint)
        return _frozen(type_hint, fields[0].name) and all(_immutable(field.type, seen) for field in fields)
    return False


@pytest.mark.parametrize("type_hint", MEMOIZED_WIRE_TYPES)
def test_memoized_types_are_frozen_all_the_way_down(type_hint: type) -> None:
    attrs.resolve_types(type_hint)
    assert _immutable(type_hint, set()), f"{type_hint.__name__} holds something mutable: readers would share it"


def test_the_same_text_decodes_to_the_same_object() -> None:
    codec = fresh_codec()
    text = str(codec.encode(MESSAGE).data)
    first = codec.decode(json_value(text))
    assert first == MESSAGE
    assert codec.decode(json_value(text)) is first


def test_a_decoded_value_equals_what_the_plain_converter_builds() -> None:
    codec = codec_registry().resolve(AgentToolCall)
    text = (
        '{"arguments": "{}", "deferral_order": 0, "policy": {"effect": "read"}, "status": "pending",'
        ' "tool_call_id": "c1", "tool_name": "t", "turn_id": "turn-1"}'
    )
    for _ in range(2):
        assert codec.decode(json_value(text)) == converter().structure(
            {
                "arguments": "{}",
                "deferral_order": 0,
                "policy": {"effect": "read"},
                "status": "pending",
                "tool_call_id": "c1",
                "tool_name": "t",
                "turn_id": "turn-1",
            },
            AgentToolCall,
        )


def test_old_and_new_shapes_still_read_when_memoized() -> None:
    state = codec_registry().resolve(AgentState)
    usage = codec_registry().resolve(AgentUsage)
    for _ in range(2):
        assert state.decode(json_value('{"status": "running_model"}')) == AgentState(status=AgentStatus.RUNNING_MODEL)
        assert usage.decode(json_value('{"model_calls": 2, "audio_tokens": 9}')) == AgentUsage(model_calls=2)


def test_a_text_that_fails_to_decode_fails_on_every_read() -> None:
    codec = fresh_codec()
    for _ in range(2):
        with pytest.raises(cattrs.BaseValidationError):
            codec.decode(json_value('{"sequence": 1}'))
    assert len(codec.memo) == 0


def test_a_value_of_another_wire_kind_is_refused_even_when_its_text_is_known() -> None:
    codec = fresh_codec()
    text = str(codec.encode(MESSAGE).data)
    codec.decode(json_value(text))
    with pytest.raises(TypeError, match="requires a JSON value"):
        codec.decode(dex.Value(dex.WireKind.STRING, text))


def test_encoding_is_the_plain_json_codecs() -> None:
    plain = dex.JsonCodec("x", lambda data: data, converter().get_unstructure_hook(AgentMessage))
    assert codec_registry().resolve(AgentMessage).encode(MESSAGE) == plain.encode(MESSAGE)


def test_the_oldest_texts_leave_first_when_the_budget_is_spent() -> None:
    texts = [str(fresh_codec().encode(attrs.evolve(MESSAGE, sequence=n)).data) for n in range(1, 4)]
    codec = fresh_codec(max_characters=len(texts[0]) + len(texts[1]) + 5)
    first, second, third = (codec.decode(json_value(text)) for text in texts)
    assert len(codec.memo) == 2
    assert codec.decode(json_value(texts[2])) is third
    assert codec.decode(json_value(texts[1])) is second
    again = codec.decode(json_value(texts[0]))
    assert again == first
    assert again is not first


def test_a_text_larger_than_the_budget_is_decoded_but_not_kept() -> None:
    codec = fresh_codec(max_characters=10)
    text = str(codec.encode(MESSAGE).data)
    assert codec.decode(json_value(text)) == MESSAGE
    assert len(codec.memo) == 0


def test_threads_decoding_at_once_all_get_the_right_values() -> None:
    codec = fresh_codec(max_characters=2_000)
    messages = [attrs.evolve(MESSAGE, sequence=n) for n in range(1, 60)]
    texts = [str(codec.encode(message).data) for message in messages]
    failures: list[str] = []

    def read() -> None:
        for _ in range(20):
            for message, text in zip(messages, texts, strict=True):
                if codec.decode(json_value(text)) != message:
                    failures.append(text)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(codec.memo) <= 2_000 // len(texts[0])
