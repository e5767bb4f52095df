"""The write meter: every value a Step stages is counted, and a result too large for one frame is refused."""

import pytest

from dex_agents import AgentEvent, AgentEventType, AgentMessage, MessageRole, StepResultTooLargeError
from dex_agents.domain import events as ev
from dex_agents.infrastructure.dex.codec import json_codec
from dex_agents.infrastructure.dex.frames import MAX_STEP_RESULT_BYTES, WriteMeter, count_write, metered_writes


def message(text: str) -> AgentMessage:
    return AgentMessage(sequence=1, turn_id="turn-1", role=MessageRole.USER, framework_item=text, text=text)


def test_every_value_encoded_inside_the_block_is_counted_at_its_encoded_size() -> None:
    codec = json_codec(AgentMessage)
    with metered_writes() as meter:
        first = codec.encode(message("héllo"))
        second = codec.encode(message("x" * 1000))
    assert meter.total == len(first.data) + len(second.data)  # type: ignore[arg-type]
    assert meter.largest == len(second.data)  # type: ignore[arg-type]
    assert meter.largest_name == "dex_agents.AgentMessage"


def test_live_events_are_stream_messages_of_their_own_and_not_counted() -> None:
    event = AgentEvent(
        type=AgentEventType.TEXT_DELTA, payload=ev.text_delta("x" * 5000), turn_id="t", step_execution_id="s", attempt=1
    )
    with metered_writes() as meter:
        json_codec(AgentEvent).encode(event)
    assert meter.total == 0


def test_nothing_is_counted_outside_a_metered_block() -> None:
    count_write("x", 10)
    with metered_writes() as meter:
        pass
    assert meter.total == 0


def test_a_result_over_the_limit_is_refused_with_what_was_largest() -> None:
    meter = WriteMeter()
    meter.add("dex_agents.AgentMessage", MAX_STEP_RESULT_BYTES)
    meter.check()
    meter.add("FRAMEWORK_RUN_STATE", 1)
    with pytest.raises(StepResultTooLargeError, match=r"largest value: dex_agents\.AgentMessage, 3,145,728 bytes"):
        meter.check()


def test_a_value_that_is_non_ascii_is_counted_as_its_escaped_json() -> None:
    with metered_writes() as meter:
        json_codec(AgentMessage).encode(message("😀" * 100))
    assert meter.total > 2 * 100 * 12  # two escaped copies of 100 astral characters
