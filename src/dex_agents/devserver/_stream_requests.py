"""The Client's Stream requests: ``WriteStream``, ``ReadStream`` (long-polling) and ``ListStreamMessages``."""

from collections.abc import Callable

import attrs
from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._clock import ServerClock
from dex_agents.devserver._config import DevServerConfig
from dex_agents.devserver._errors import invalid_argument, long_poll_timeout
from dex_agents.devserver._journal import Journal
from dex_agents.devserver._streams import Streams


@attrs.frozen(kw_only=True)
class StreamRequests:
    """Answers the Client's Stream requests from the server's `Streams`."""

    streams: Streams
    config: DevServerConfig
    clock: ServerClock
    journal: Journal
    """Answers wait until what they return is on disk."""
    require_run: Callable[[str], object]
    """Raises the not-found error of a Flow ID with no run."""
    cap_wait: Callable[[float], float]
    """Caps a requested long poll at the server's maximum."""

    async def write(self, request: pb.WriteStreamRequest) -> None:
        """Append a Client message to a Stream (``WriteStream``); answered once it is on disk."""
        if not request.source:
            raise invalid_argument("a Stream write needs a source")
        entry = self.streams.append(
            request.flow_type,
            request.stream_name,
            request.stream_capacity_bytes,
            request.flow_id,
            request.value,
            request.source,
            self.clock.now(),
        )
        self.journal.flush()
        await self.journal.durable(entry.journal_seq)

    async def read(self, request: pb.ReadStreamRequest) -> pb.ReadStreamResponse:
        """Return the next message after the resume token (``ReadStream``), long-polling."""
        if self.config.stream_read_requires_flow:
            self.require_run(request.flow_id)
        wait = self.cap_wait(request.wait_time_seconds or self.config.default_long_poll.total_seconds())
        entry = await self.streams.read(
            request.flow_type, request.stream_name, request.flow_id, request.resume_token, wait
        )
        if entry is None:
            raise long_poll_timeout(f"no Stream message after {request.resume_token!r}")
        await self.journal.durable(entry.journal_seq, sync=False)
        return pb.ReadStreamResponse(message=entry.to_proto())

    async def list(self, request: pb.ListStreamMessagesRequest) -> pb.ListStreamMessagesResponse:
        """Return a newest-first page of retained messages (``ListStreamMessages``)."""
        if request.page_size < 1:
            raise invalid_argument("page_size must be positive")
        if self.config.stream_read_requires_flow:
            self.require_run(request.flow_id)
        entries, token = self.streams.page(
            request.flow_type,
            request.stream_name,
            request.flow_id,
            request.page_size,
            request.before_page_token,
        )
        if entries:
            await self.journal.durable(max(entry.journal_seq for entry in entries), sync=False)
        return pb.ListStreamMessagesResponse(messages=[entry.to_proto() for entry in entries], next_page_token=token)
