"""The `DeliveryLedger` of the Dex binding: ``tool_call_started`` read back from the event Stream.

`DexDeliveryLedger` reads the session's ``flow.agent_events`` Stream through an
``AsyncClient`` the Worker holds (``list_stream_messages``, newest first, back to
the call's ``tool_call_deferred``), so what it returns is what the server
stored, not what the Step queued. The Worker binds the Client when it is built
(`AgentContainer` does it for every Flow it serves; `AgentSessionFlow.bind_client`
names one). Unbound, the ledger builds its own for the server of the
``dex.AsyncWorker`` that serves the Flow in this process
(`dex_agents.infrastructure.dex.own_worker`), so a Worker built by hand needs
no extra line; when there is no such Worker, the call is recorded ``failed``
with an error naming the fix (`DeliveryLedgerUnavailableError`): the tool never
runs unconfirmed.

`UncheckedDeliveries` is the explicit opt-out (``AgentSessionFlow(...,
confirm_deliveries=False)``): no read-back, today's narrower guarantee (an
engine that redelivers an attempt after the tool's effect runs it again).
"""

import asyncio
import weakref
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import dex

from dex_agents.domain.errors import DeliveryUnconfirmedError
from dex_agents.domain.events import AgentEvent, ToolCallDeferredPayload, started_deliveries
from dex_agents.infrastructure.dex.own_worker import OwnWorkerClient, OwnWorkerNotFoundError, worker_client

DEFAULT_CONFIRM_TIMEOUT = timedelta(seconds=30)
"""How long a Step waits to read its ``tool_call_started`` back before its attempt fails."""

STREAM_PAGE_SIZE = 200
"""Stream messages per ``list_stream_messages`` page."""

_FIRST_POLL_SECONDS = 0.002
_LAST_POLL_SECONDS = 0.2


class DexDeliveryLedger:
    """Reads single-attempt tool Steps' ``tool_call_started`` events back through a Worker-held Client."""

    def __init__(
        self,
        stream: "dex.Stream[AgentEvent]",
        *,
        confirm_timeout: timedelta = DEFAULT_CONFIRM_TIMEOUT,
        flow: "dex.Flow[Any] | None" = None,
    ) -> None:
        """Read ``stream``; ``flow`` is the Flow whose Worker's server an unbound ledger reads from."""
        self._stream = stream
        self._confirm_timeout = confirm_timeout
        self._client_factory: Callable[[], dex.AsyncClient] | None = None
        self._client: dex.AsyncClient | None = None
        self._flow = None if flow is None else weakref.ref(flow)
        self._own: OwnWorkerClient | None = None

    def bind(self, client_factory: Callable[[], dex.AsyncClient]) -> None:
        """Read through a Client ``client_factory`` builds on first use (on the Worker's event loop)."""
        self._client_factory = client_factory
        self._client = None

    async def close(self) -> None:
        """Close the Clients this ledger built, if any."""
        client, self._client = self._client, None
        own, self._own = self._own, None
        for built in (client, None if own is None else own.client):
            if built is not None:
                await built.close()

    async def _reader(self) -> dex.AsyncClient:
        if self._client is None and self._client_factory is not None:
            self._client = self._client_factory()
        if self._client is not None:
            return self._client
        if self._own is not None and not self._own.current:
            stale, self._own = self._own, None
            await stale.client.close()
        if self._own is None:
            flow = None if self._flow is None else self._flow()
            if flow is None:
                raise OwnWorkerNotFoundError(
                    "this ledger knows no Flow to find a Worker for: call AgentSessionFlow.bind_client"
                )
            self._own = worker_client(flow, flow.get_flow_type())
        return self._own.client

    async def started(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int
    ) -> tuple[str, ...]:
        """Return the delivery markers of this Step attempt's stored ``tool_call_started`` events, oldest first."""
        client = await self._reader()
        newest_first: list[AgentEvent] = []
        token = ""
        while True:
            page = await client.list_stream_messages(flow_id, self._stream, STREAM_PAGE_SIZE, token)
            for message in page.messages:
                event: AgentEvent = message.value
                if isinstance(event.payload, ToolCallDeferredPayload) and event.payload.tool_call_id == tool_call_id:
                    token = ""  # every start of this call's Step comes after the call was deferred
                    break
                newest_first.append(event)
            else:
                token = page.next_page_token
            if not token:
                break
        return started_deliveries(
            reversed(newest_first), tool_call_id, step_execution_id=step_execution_id, attempt=attempt
        )

    async def confirm(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int, delivery: str
    ) -> tuple[str, ...]:
        """Poll until ``delivery``'s ``tool_call_started`` is stored; return the markers oldest first.

        Raises:
            DeliveryUnconfirmedError: not stored within the confirm timeout.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._confirm_timeout.total_seconds()
        pause = _FIRST_POLL_SECONDS
        while True:
            stored = await self.started(flow_id, tool_call_id, step_execution_id=step_execution_id, attempt=attempt)
            if delivery in stored:
                return stored
            if loop.time() >= deadline:
                raise DeliveryUnconfirmedError(
                    f"Dex did not show this attempt's tool_call_started within {self._confirm_timeout}; "
                    "the tool did not run"
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, _LAST_POLL_SECONDS)


class UncheckedDeliveries:
    """The opt-out ledger: reads nothing and confirms every delivery at once (no at-most-once guarantee)."""

    def bind(self, client_factory: Callable[[], dex.AsyncClient]) -> None:
        """Ignore the Client."""

    async def close(self) -> None:
        """Nothing to close."""

    async def started(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int
    ) -> tuple[str, ...]:
        """Return no markers."""
        return ()

    async def confirm(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int, delivery: str
    ) -> tuple[str, ...]:
        """Return ``delivery`` alone, unread."""
        return (delivery,)
