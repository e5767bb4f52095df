"""Streams: per Flow type and name, appended by Steps and Clients, trimmed by capacity."""

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass

from dex.dexpb import dex_pb2 as pb
from google.protobuf import timestamp_pb2  # type: ignore[import-untyped]

from dex_agents.testing.fake_dex._errors import invalid_argument


@dataclass(frozen=True)
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
    def __init__(self) -> None:
        self.entries: deque[StreamEntry] = deque()
        self.bytes = 0
        self.appended = asyncio.Event()


def _token(token: str) -> int:
    if not token:
        return 0
    if not token.isdigit():
        raise invalid_argument(f"malformed Stream token {token!r}")
    return int(token)


class Streams:
    """All Streams of the server, keyed by (Flow type, Stream name)."""

    def __init__(self) -> None:
        self._streams: dict[tuple[str, str], _Stream] = {}
        self._sequence = itertools.count(1)

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
        """Append one message, then drop the oldest ones while over capacity."""
        stream = self._stream(flow_type, name)
        entry = StreamEntry(next(self._sequence), flow_id, value, source, now, value.ByteSize() + len(source))
        stream.entries.append(entry)
        stream.bytes += entry.size
        while capacity_bytes > 0 and stream.bytes > capacity_bytes and len(stream.entries) > 1:
            stream.bytes -= stream.entries.popleft().size
        appended, stream.appended = stream.appended, asyncio.Event()
        appended.set()
        return entry

    def entries(self, flow_type: str, name: str, flow_id: str) -> list[StreamEntry]:
        """Return the retained messages of one Flow instance, oldest first."""
        return [e for e in self._stream(flow_type, name).entries if e.flow_id == flow_id]

    async def read(
        self, flow_type: str, name: str, flow_id: str, resume_token: str, wait_seconds: float
    ) -> StreamEntry | None:
        """Return the first retained message after ``resume_token``, long-polling for it."""
        after = _token(resume_token)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        stream = self._stream(flow_type, name)
        while True:
            for entry in stream.entries:
                if entry.flow_id == flow_id and entry.sequence > after:
                    return entry
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            try:
                await asyncio.wait_for(stream.appended.wait(), remaining)
            except TimeoutError:
                return None

    def page(
        self, flow_type: str, name: str, flow_id: str, page_size: int, before_token: str
    ) -> tuple[list[StreamEntry], str]:
        """Return up to ``page_size`` messages older than the token, newest first."""
        before = _token(before_token) or None
        older = [
            entry
            for entry in reversed(self._stream(flow_type, name).entries)
            if entry.flow_id == flow_id and (before is None or entry.sequence < before)
        ]
        page = older[:page_size]
        next_token = str(page[-1].sequence) if len(older) > len(page) else ""
        return page, next_token
