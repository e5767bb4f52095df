"""``DevServer``: the in-process server, in memory or on a data dir."""

import asyncio
import contextlib
import logging
import os
from datetime import timedelta
from types import TracebackType
from typing import Any

import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._attempts import AttemptRecord
from dex_agents.devserver._clock import ServerClock
from dex_agents.devserver._config import DevServerConfig
from dex_agents.devserver._engine import Engine
from dex_agents.devserver._history import StepHistoryEntry, step_history
from dex_agents.devserver._recovery import load, reload, resume
from dex_agents.devserver._service import (
    control_handler,
    flow_service_handler,
    worker_task_handler,
)
from dex_agents.devserver._store import CommitStats, Store
from dex_agents.devserver._store_journal import StoreJournal

HOST = "127.0.0.1"

RELOAD_PAUSE_SECONDS = 1.0
"""How long the server waits after a failed commit before it reads its data dir again and goes on."""

RESTART_DISPATCH_WAIT_SECONDS = 30.0
"""How long, after a start on a data dir, a task waits for a Worker (they reconnect with back-off)."""

_LOG = logging.getLogger(__name__)


def _seconds(value: float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class DevServer:
    """A loopback Dex server for the unmodified SDK ``AsyncWorker`` and ``AsyncClient``.

    Use it in-process::

        async with DevServer() as dex:
            options = WorkerOptions(server_address=dex.address, pull=PullWorkerOptions(...))

    Attributes:
        config: The server rules in force.
        clock: The clock Timers, back-offs and timeouts run on.
    """

    def __init__(
        self,
        config: DevServerConfig | None = None,
        *,
        port: int = 0,
        data_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """Create the server; ``start`` (or ``async with``) binds it.

        Args:
            config: Server rules; ``None`` uses ``DevServerConfig()``.
            port: TCP port on 127.0.0.1; 0 picks a free one.
            data_dir: Where the server keeps everything (created if missing); a server
                started again on it goes on with every session. ``None`` keeps
                everything in memory: it is gone when the server stops.
        """
        self.config = config or DevServerConfig()
        self.clock = ServerClock(start=self.config.start_time, frozen=self.config.frozen_clock)
        self._engine = Engine(self.config, self.clock)
        self._port = port
        self._data_dir = data_dir
        self._store: Store | None = None
        self._server: Any = None
        self._reloading: asyncio.Task[None] | None = None
        self.restored_runs = 0
        """How many runs the server read back from its data dir at start."""

    @property
    def data_dir(self) -> str | None:
        """The data dir the server keeps its state in (``None``: in memory)."""
        return None if self._store is None else str(self._store.directory)

    @property
    def store(self) -> Store | None:
        """The data dir's SQLite store (``None`` in memory), for commit statistics and fault tests."""
        return self._store

    def data_bytes(self) -> int:
        """Bytes the data dir's database takes on disk (0 in memory)."""
        return 0 if self._store is None else self._store.data_bytes()

    def commit_stats(self) -> CommitStats:
        """What the store committed so far (all zero in memory)."""
        return CommitStats(0, 0, 0.0) if self._store is None else self._store.stats()

    @property
    def address(self) -> str:
        """The ``127.0.0.1:<port>`` address Workers and Clients connect to.

        Raises:
            RuntimeError: If the server has not started.
        """
        if self._server is None:
            raise RuntimeError("the dev server is not started")
        return f"{HOST}:{self._port}"

    @property
    def engine(self) -> Engine:
        """The rule engine, for white-box inspection in tests."""
        return self._engine

    async def start(self) -> None:
        """Bind 127.0.0.1 and start serving.

        Raises:
            RuntimeError: If it was started already or the port cannot be bound.
        """
        if self._server is not None:
            raise RuntimeError("the dev server is already started")
        if self._data_dir is not None and self._store is None:
            self._open_store()
        limit = self.config.grpc_max_message_bytes
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                # SO_REUSEADDR (gRPC's default) rebinds a port a killed server held at once; SO_REUSEPORT
                # would let a second server share the port silently.
                ("grpc.so_reuseport", 0),
            ]
        )
        server.add_generic_rpc_handlers(
            (
                flow_service_handler(self._engine),
                worker_task_handler(self._engine),
                control_handler(self._engine),
            )
        )
        try:
            port = server.add_insecure_port(f"{HOST}:{self._port}")
        except RuntimeError:
            port = 0
        if port == 0:
            self._close_store()
            raise RuntimeError(f"cannot bind {HOST}:{self._port}")
        self._port = port
        await server.start()
        self._server = server
        if self._store is not None:
            self._store.start(asyncio.get_running_loop(), self._store_failed)
            if self.restored_runs:
                self._engine.grant_dispatch_grace(RESTART_DISPATCH_WAIT_SECONDS)
            resume(self._engine)

    def _open_store(self) -> None:
        assert self._data_dir is not None
        store = Store(self._data_dir)
        try:
            self._engine.attach(StoreJournal(store))
            self.restored_runs = load(self._engine, store)
        except BaseException:
            store.close()
            raise
        self._store = store

    def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    def _store_failed(self, error: BaseException) -> None:
        _LOG.error("the dev server could not write to %s: %s; it reads its data again", self.data_dir, error)
        if self._reloading is None or self._reloading.done():
            self._reloading = asyncio.get_running_loop().create_task(self._reload())

    async def _reload(self) -> None:
        await asyncio.sleep(RELOAD_PAUSE_SECONDS)
        store = self._store
        if store is None or self._server is None:
            return
        try:
            await reload(self._engine, store)
        except Exception:  # noqa: BLE001 - logged; the server keeps answering (with errors) until stopped
            _LOG.exception("the dev server could not read %s again", self.data_dir)

    async def stop(self, grace: float | None = 1.0) -> None:
        """Cancel every Step execution and stop serving (idempotent).

        Args:
            grace: Seconds to let in-flight gRPC calls finish.
        """
        server, self._server = self._server, None
        if server is None:
            return
        if self._reloading is not None:
            self._reloading.cancel()
            with contextlib.suppress(BaseException):
                await self._reloading
        if self._store is not None:
            with contextlib.suppress(Exception):
                await self._engine.journal.durable()
            await self._engine.forget_all()  # stopping its executions changes nothing on disk
        await self._engine.close()
        await server.stop(grace)
        self._close_store()

    async def serve_forever(self) -> None:
        """Wait until the server terminates."""
        if self._server is not None:
            await self._server.wait_for_termination()

    async def __aenter__(self) -> "DevServer":
        await self.start()
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    # ----------------------------------------------------------------- test controls

    def advance(self, seconds: float | timedelta) -> None:
        """Move the clock forward; due Timers fire, back-offs and timeouts elapse.

        Args:
            seconds: How far, in seconds or as a ``timedelta``.
        """
        self._engine.advance_clock(_seconds(seconds))

    def attempts(self, flow_id: str | None = None) -> list[AttemptRecord]:
        """Return every Step method attempt so far, of one Flow if given."""
        return self._engine.attempts(flow_id)

    def history(self, flow_id: str, run_id: str = "") -> list[pb.FlowHistoryEvent]:
        """Return the raw history events of a run (the latest by default)."""
        return list(self._engine.run(flow_id, run_id).history)

    def step_history(self, flow_id: str, run_id: str = "") -> list[StepHistoryEntry]:
        """Return the Step method events of a run, oldest first."""
        return step_history(self.history(flow_id, run_id))

    def active_executions(self, flow_id: str) -> dict[str, str]:
        """Return ``{step execution ID: phase}`` for the run's active executions.

        Phases: ``wait_for``, ``waiting``, ``satisfied``, ``execute``.
        """
        return self._engine.active_executions(flow_id)

    async def wait_until_waiting(self, flow_id: str, step_execution_id: str, within: float = 10.0) -> None:
        """Poll until an execution waits on its condition (its Timers started).

        Args:
            flow_id: The Flow ID.
            step_execution_id: ``<StepType>-<n>``.
            within: Real seconds to poll before giving up.

        Raises:
            TimeoutError: If the execution did not reach its Wait in time.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while loop.time() < deadline:
            runs = self._engine.flow_ids()
            if flow_id in runs and self.active_executions(flow_id).get(step_execution_id) == "waiting":
                return
            await asyncio.sleep(0.005)
        raise TimeoutError(f"{flow_id}/{step_execution_id} did not start waiting")

    def last_heartbeat(self, flow_id: str, step_execution_id: str) -> pb.Value | None:
        """Return the last heartbeat value the server received from an active execution.

        Poll it to know a heartbeat reached the server (e.g. before SIGKILLing a Worker).
        """
        return self._engine.last_heartbeat(flow_id, step_execution_id)

    def progress_frames(self, flow_id: str, step_execution_id: str) -> int:
        """Return how many heartbeat and Stream frames an active execution sent (all attempts)."""
        return self._engine.progress_frames(flow_id, step_execution_id)

    def blob_loads(self, flow_id: str) -> int:
        """Return how many blob values Workers fetched with ``LoadBlobs`` for one Flow instance (their cache missed)."""
        return self._engine.blobs.loaded.get(flow_id, 0)

    def attribute(self, flow_id: str, key: str) -> pb.Value | None:
        """Return the raw stored value of one Attribute (``NAME`` or ``NAME/instance``)."""
        return self._engine.attribute(flow_id, key)

    def channel_messages(self, flow_id: str, name: str) -> list[pb.ChannelMessage]:
        """Return the queued messages of one Channel (``NAME`` or ``NAME/instance``)."""
        return self._engine.channel_messages(flow_id, name)

    def pull_worker_ids(self, flow_type: str | None = None) -> set[str]:
        """Return the app Worker IDs with a live pull stream (serving ``flow_type``)."""
        return self._engine.pull.registered_worker_ids(flow_type)
