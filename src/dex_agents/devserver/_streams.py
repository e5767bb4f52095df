"""Streams: per Flow type and name, appended by Steps and Clients, bounded like real Dex.

A message's payload may not exceed the message limit (100 KiB by default); each
message is charged payload + Flow ID + source + idempotency key + a fixed
overhead (512 bytes) against the Stream's capacity. A write that would pass the
capacity is rejected; once a write lifts the Stream past the trim trigger (90 %)
the oldest messages are trimmed down to the trim target (80 %). Real Dex trims
in the background; here the trim follows the write that crossed the trigger.
"""

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass

import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb
from google.protobuf import timestamp_pb2  # type: ignore[import-untyped]

from dex_agents.devserver._config import DevServerConfig
from dex_agents.devserver._errors import ServiceError, invalid_argument
from dex_agents.devserver._journal import NULL_JOURNAL, Journal


@dataclass(eq=False)
class StreamEntry:
    """One retained Stream message.

    Attributes:
        sequence: Position in its Stream (all Flow instances share one sequence).
        flow_id: The Flow instance the message belongs to.
        value: The encoded value.
        source: ``#<step execution id>`` for Step writes, the Client's source otherwise.
        created_at: Fake-clock Unix seconds of the append.
        size: Bytes counted against the Stream's capacity.
    """

    sequence: int
    flow_id: str
    value: pb.Value
    source: str
    created_at: float
    size: int
    journal_seq: int = 0
    """The journal sequence of the append (a reader waits until it is on disk)."""

    def to_proto(self) -> pb.StreamMessage:
        """Return the message as the SDK reads it (the resume token is the sequence)."""
        created = timestamp_pb2.Timestamp()
        created.FromNanoseconds(int(self.created_at * 1e9))
        return pb.StreamMessage(
            value=self.value,
            resume_token=str(self.sequence),
            created_time=created,
            source=self.source,
        )


class _Stream:
    """One Stream: every message oldest first (capacity, trimming), and each Flow instance's own, indexed.

    Reads, pages and listings of one Flow instance look only at its messages, and a
    write wakes only the readers of its instance: a Stream is shared by every
    instance of a Flow type, so scanning it all per read made each read cost what
    the whole Stream holds.
    """

    def __init__(self) -> None:
        self.entries: deque[StreamEntry] = deque()
        self.by_flow: dict[str, deque[StreamEntry]] = {}
        self.bytes = 0
        self.appended: dict[str, asyncio.Future[None]] = {}
        """Per Flow instance, the future its readers wait on; resolved (and replaced) by its next message."""

    def add(self, entry: StreamEntry) -> None:
        self.entries.append(entry)
        self.by_flow.setdefault(entry.flow_id, deque()).append(entry)
        self.bytes += entry.size
        appended = self.appended.pop(entry.flow_id, None)
        if appended is not None and not appended.done():
            appended.set_result(None)

    def trim_oldest(self) -> StreamEntry:
        entry = self.entries.popleft()
        self.bytes -= entry.size
        mine = self.by_flow[entry.flow_id]
        mine.popleft()  # sequences ascend in both, so an instance's oldest is the Stream's oldest of it
        if not mine:
            del self.by_flow[entry.flow_id]
        return entry

    def of(self, flow_id: str) -> "deque[StreamEntry]":
        return self.by_flow.get(flow_id, _EMPTY)

    def first_after(self, flow_id: str, after: int) -> StreamEntry | None:
        found = None
        for entry in reversed(self.of(flow_id)):  # readers follow the tail: usually 0 or 1 steps
            if entry.sequence <= after:
                break
            found = entry
        return found

    def appended_future(self, flow_id: str) -> "asyncio.Future[None]":
        future = self.appended.get(flow_id)
        if future is None:
            future = self.appended[flow_id] = asyncio.get_running_loop().create_future()
        return future


_EMPTY: "deque[StreamEntry]" = deque()


def _token(token: str) -> int:
    if not token:
        return 0
    if not token.isdigit():
        raise invalid_argument(f"malformed Stream token {token!r}")
    return int(token)


def stream_message_too_large(size: int, limit: int) -> ServiceError:
    """A Stream write whose payload is over the message limit (real: ``ErrMessageTooLarge``)."""
    return invalid_argument(f"Stream message of {size} bytes exceeds the {limit}-byte message limit")


def stream_capacity_exceeded(charge: int, used: int, capacity: int) -> ServiceError:
    """A Stream write that would pass the capacity (real: ``ErrCapacityExceeded``)."""
    return ServiceError(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        pb.ERROR_SUB_STATUS_UNCATEGORIZED,
        f"Stream at capacity: {used} + {charge} bytes exceed {capacity}",
    )


def message_charge(payload_bytes: int, flow_id: str, source: str, overhead: int, idempotency_key: str = "") -> int:
    """Bytes one Stream message counts against its Stream's capacity."""
    return payload_bytes + len(flow_id.encode()) + len(source.encode()) + len(idempotency_key.encode()) + overhead


class Streams:
    """All Streams of the server, keyed by (Flow type, Stream name)."""

    def __init__(self, config: DevServerConfig | None = None, journal: Journal = NULL_JOURNAL) -> None:
        self._config = config or DevServerConfig()
        self._streams: dict[tuple[str, str], _Stream] = {}
        self._sequence = itertools.count(1)
        self._journal = journal
        self._dropped = False

    def drop(self, dropped: Journal) -> None:
        """Answer every long-polling read with nothing: the server reads its data dir again into new Streams.

        Later appends here are journaled to ``dropped`` (they are kept nowhere).

        The readers' next polls read those; left waiting here, they would wait on
        Streams nothing writes to any more.
        """
        self._dropped = True
        self._journal = dropped
        for stream in self._streams.values():
            for appended in stream.appended.values():
                if not appended.done():
                    appended.set_result(None)
            stream.appended.clear()

    def restore(self, flow_type: str, name: str, entry: StreamEntry) -> None:
        """Put back a message read from the data dir (oldest first), without journaling it again."""
        self._stream(flow_type, name).add(entry)
        self._sequence = itertools.count(entry.sequence + 1)

    def _stream(self, flow_type: str, name: str) -> _Stream:
        return self._streams.setdefault((flow_type, name), _Stream())

    def append(
        self,
        flow_type: str,
        name: str,
        capacity_bytes: int,
        flow_id: str,
        value: pb.Value,
        source: str,
        now: float,
    ) -> StreamEntry:
        """Append one message, then trim the oldest ones once past the trim trigger.

        Raises:
            ServiceError: ``INVALID_ARGUMENT`` when the payload is over the message
                limit, ``RESOURCE_EXHAUSTED`` when the write would pass the capacity.
        """
        config = self._config
        payload = value.ByteSize()
        if payload > config.stream_max_message_bytes:
            raise stream_message_too_large(payload, config.stream_max_message_bytes)
        stream = self._stream(flow_type, name)
        charge = message_charge(payload, flow_id, source, config.stream_message_overhead_bytes)
        if capacity_bytes > 0 and stream.bytes + charge > capacity_bytes:
            raise stream_capacity_exceeded(charge, stream.bytes, capacity_bytes)
        entry = StreamEntry(next(self._sequence), flow_id, value, source, now, charge)
        self._journal.stream_message(flow_type, name, entry)
        stream.add(entry)
        if capacity_bytes > 0 and stream.bytes > capacity_bytes * config.stream_trim_trigger:
            while stream.entries and stream.bytes > capacity_bytes * config.stream_trim_target:
                self._journal.stream_trimmed(stream.trim_oldest().sequence)
        return entry

    def entries(self, flow_type: str, name: str, flow_id: str) -> list[StreamEntry]:
        """Return the retained messages of one Flow instance, oldest first."""
        return list(self._stream(flow_type, name).of(flow_id))

    async def read(
        self, flow_type: str, name: str, flow_id: str, resume_token: str, wait_seconds: float
    ) -> StreamEntry | None:
        """Return the first retained message after ``resume_token``, long-polling for it."""
        after = _token(resume_token)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        stream = self._stream(flow_type, name)
        while True:
            if self._dropped:
                return None
            entry = stream.first_after(flow_id, after)
            if entry is not None:
                return entry
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            # asyncio.wait, not wait_for: no task per long poll, and a reader that goes away
            # (cancelled) leaves the future its instance's other readers share untouched.
            done, _ = await asyncio.wait((stream.appended_future(flow_id),), timeout=remaining)
            if not done:
                return None

    def page(
        self, flow_type: str, name: str, flow_id: str, page_size: int, before_token: str
    ) -> tuple[list[StreamEntry], str]:
        """Return up to ``page_size`` messages older than the token, newest first."""
        before = _token(before_token) or None
        older = [
            entry
            for entry in reversed(self._stream(flow_type, name).of(flow_id))
            if before is None or entry.sequence < before
        ]
        page = older[:page_size]
        next_token = str(page[-1].sequence) if len(older) > len(page) else ""
        return page, next_token
