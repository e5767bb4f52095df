"""Streams: per-Step source, resume positions, newest-first pages, capacity trimming."""

import asyncio
from datetime import timedelta

import dex
import pytest

from tests.integration.devserver.flows import SMALL_EVENTS, STREAM_EVENTS, Flows
from tests.integration.devserver.support import Stack

pytestmark = pytest.mark.integration


async def _emitted(stack: Stack, flows: Flows, flow_id: str, count: int) -> None:
    await stack.client.start_flow(flows.stream, flow_id, count)
    await stack.devserver.wait_until_waiting(flow_id, "Idle-1")


async def test_read_stream_from_a_resume_position(stack: Stack, flows: Flows) -> None:
    await _emitted(stack, flows, "s-read", 5)
    values, token = [], ""
    for _ in range(5):
        message = await stack.client.read_stream("s-read", STREAM_EVENTS, token)
        assert message.source == "#Emit-1"
        values.append(message.value)
        token = message.resume_token
    assert values == [f"event-{i}" for i in range(5)]
    third = await stack.client.read_stream("s-read", STREAM_EVENTS)
    again = await stack.client.read_stream("s-read", STREAM_EVENTS, third.resume_token)
    assert again.value == "event-1"
    with pytest.raises(dex.LongPollTimeoutError):
        await stack.client.read_stream("s-read", STREAM_EVENTS, token, timeout=timedelta(seconds=1))


async def test_read_stream_long_polls_until_a_write(stack: Stack, flows: Flows) -> None:
    await _emitted(stack, flows, "s-poll", 1)
    first = await stack.client.read_stream("s-poll", STREAM_EVENTS)
    waiting = asyncio.ensure_future(
        stack.client.read_stream("s-poll", STREAM_EVENTS, first.resume_token, timeout=timedelta(seconds=10))
    )
    await stack.client.write_stream("s-poll", STREAM_EVENTS, "client#1", "from the client")
    message = await waiting
    assert (message.value, message.source) == ("from the client", "client#1")


async def test_list_stream_messages_newest_first_in_pages(stack: Stack, flows: Flows) -> None:
    await _emitted(stack, flows, "s-list", 5)
    pages, token = [], ""
    while True:
        page = await stack.client.list_stream_messages("s-list", STREAM_EVENTS, 2, token)
        pages.append([m.value for m in page.messages])
        token = page.next_page_token
        if not token:
            break
    assert pages == [["event-4", "event-3"], ["event-2", "event-1"], ["event-0"]]


async def test_streams_are_per_flow_instance(stack: Stack, flows: Flows) -> None:
    await _emitted(stack, flows, "s-a", 1)
    await _emitted(stack, flows, "s-b", 2)
    page = await stack.client.list_stream_messages("s-a", STREAM_EVENTS, 10)
    assert [m.value for m in page.messages] == ["event-0"]


async def test_capacity_trims_the_oldest_messages(stack: Stack, flows: Flows) -> None:
    await _emitted(stack, flows, "s-small", 0)
    page = await stack.client.list_stream_messages("s-small", SMALL_EVENTS, 100)
    kept = [m.value for m in page.messages]
    assert 1 < len(kept) < 10
    assert kept[0].startswith("small-09")
    oldest = await stack.client.read_stream("s-small", SMALL_EVENTS)
    assert oldest.value == kept[-1]
