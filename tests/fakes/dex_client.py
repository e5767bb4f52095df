"""A Dex ``AsyncClient`` stand-in that serves one `InMemorySessionHost`: its RPCs and its live events as a Stream.

`AgentSessionClient` drives it exactly as it drives Dex: RPCs by name, the
event Stream by resume token (the index after an event) with long polls. A
read that finds nothing new blocks until the session writes an event or the
long poll ends (`dex.LongPollTimeoutError`). `wait_for_reader` lets a test
wait, without sleeping, until a reader has taken every event and blocks again.
"""

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import dex
import grpc  # type: ignore[import-untyped]

from dex_agents.domain.events import AgentEvent
from dex_agents.domain.interrupts import ResolveInterruptRequest
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.snapshot import ListAgentMessagesRequest, MessageIndex
from dex_agents.domain.turn_control import CancelTurnRequest
from dex_agents.testing import RecordingEventSink
from dex_agents.testing.memory import InMemorySessionHost

_CREATED = datetime(2026, 1, 1, tzinfo=UTC)


class NotifyingEventSink(RecordingEventSink):
    """A `RecordingEventSink` that wakes blocked Stream readers (single event loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Condition()
        self._notifying: set[asyncio.Task[None]] = set()

    def emit(self, event: AgentEvent) -> None:
        super().emit(event)
        task = asyncio.get_running_loop().create_task(self._notify())
        self._notifying.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._notifying.discard)

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()


class FakeSessionDexClient:
    """Serves one `InMemorySessionHost` under any flow ID."""

    def __init__(self, session: InMemorySessionHost) -> None:
        self.session = session
        self.sink = NotifyingEventSink()
        session.sink = self.sink
        self.rpc_calls: list[str] = []
        self._blocked_at: int | None = None
        self._reader = asyncio.Condition()

    async def invoke_rpc(self, rpc_method: Any, flow_id: str, *args: object, options: object = None) -> object:
        name = rpc_method.__name__
        self.rpc_calls.append(name)
        session = self.session
        match name:
            case "send_user_message":
                message = args[0]
                assert isinstance(message, AgentUserMessage)
                return await session.send_user_message(
                    message.text, client_message_id=message.client_message_id, delivery=message.delivery
                )
            case "withdraw_user_message":
                message_id = args[0]
                assert isinstance(message_id, str)
                return await session.withdraw_user_message(message_id)
            case "cancel_turn":
                cancel = args[0]
                assert isinstance(cancel, CancelTurnRequest)
                return await session.cancel_turn(cancel.reason)
            case "resolve_interrupt":
                request = args[0]
                assert isinstance(request, ResolveInterruptRequest)
                return await session.resolve_interrupt(
                    request.interrupt_id,
                    approved=request.approved,
                    rejection_message=request.rejection_message,
                    approver=request.approver,
                )
            case "get_agent_message_count":
                state = session.state.value
                return 0 if state is None else state.message_count
            case "get_agent_message_index":
                return MessageIndex.of(session.state.value)
            case "get_agent_snapshot":
                return await session.get_agent_snapshot()
            case "list_agent_messages":
                request = args[0]
                assert isinstance(request, ListAgentMessagesRequest)
                return await session.list_agent_messages(after_sequence=request.after_sequence, limit=request.limit)
            case _:
                raise AssertionError(f"no fake for RPC {name}")

    def _message(self, index: int) -> "dex.StreamMessage[AgentEvent]":
        return dex.StreamMessage(
            value=self.sink.events[index], resume_token=str(index + 1), created_time=_CREATED, source="#fake"
        )

    async def wait_for_attribute_match(self, flow_id: str, *args: object) -> object:
        """Refuse as a server that does not serve ``WaitForAttribute`` does: the client waits on events."""
        raise dex.DexServiceError(
            grpc.StatusCode.UNIMPLEMENTED,
            dex.ErrorSubStatus.UNCATEGORIZED,
            "WaitForAttribute is not served",
            "wait_for_attribute_match",
            flow_id,
        )

    async def list_stream_messages(
        self, flow_id: str, stream: object, page_size: int, before_page_token: str = ""
    ) -> "dex.StreamMessagesPage[AgentEvent]":
        newest = len(self.sink.events) if not before_page_token else int(before_page_token)
        indexes = list(range(newest - 1, max(newest - page_size, 0) - 1, -1))
        token = str(indexes[-1]) if indexes and indexes[-1] > 0 else ""
        return dex.StreamMessagesPage(messages=[self._message(i) for i in indexes], next_page_token=token)

    async def read_stream(
        self, flow_id: str, stream: object, resume_token: str = "", timeout: timedelta | None = None
    ) -> "dex.StreamMessage[AgentEvent]":
        index = int(resume_token or 0)
        if index >= len(self.sink.events):
            async with self._reader:
                self._blocked_at = index
                self._reader.notify_all()
            try:
                async with self.sink.changed:
                    await asyncio.wait_for(
                        self.sink.changed.wait_for(lambda: index < len(self.sink.events)),
                        None if timeout is None else timeout.total_seconds(),
                    )
            except TimeoutError:
                raise dex.LongPollTimeoutError(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    dex.ErrorSubStatus.WORKER_API_ERROR,
                    "no event",
                    "ReadStream",
                    flow_id,
                ) from None
            finally:
                self._blocked_at = None
        return self._message(index)

    async def wait_for_reader(self) -> None:
        """Wait until a reader has taken every event written so far and blocks for the next."""
        async with self._reader:
            await self._reader.wait_for(lambda: self._blocked_at == len(self.sink.events))
