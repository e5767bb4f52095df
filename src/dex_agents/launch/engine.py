"""Connecting to Dex: an external server, or the dev server started in this process.

`open_engine` yields an `Engine`: the address, a Dex Client for the given
Flows (`open_agent_app` with no Worker) and, on request, a Worker serving those
Flows in this process. It checks that the server answers before anything
else, so an unreachable server is one clear error.

On an embedded dev server in memory, Workers listen on a free loopback port
(`WorkerMode.LISTEN`, the faster mode: Dex calls them once per task) and the
Client routes the Flows it starts there. One that keeps its sessions in a data
dir gets pull Workers: a run remembers its listening Worker's address, and the
next process on the same dir listens elsewhere. For an external server they pull their
tasks: that server may not reach this machine, and an application's own Worker
(``chat --no-worker``) is a pull Worker by default.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import dex
from rich.console import Console

from dex_agents.devserver import DevServer, StoreError
from dex_agents.infrastructure.dex.app import AgentApp, open_agent_app
from dex_agents.infrastructure.dex.client import AgentSessionClient
from dex_agents.infrastructure.dex.container import WorkerMode, wait_worker_serving
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.launch.errors import CliError, UsageError

WORKER_REGISTRATION_TIMEOUT = 30.0
"""Seconds a Worker may take to register with Dex."""


def parse_server(address: str) -> str:
    """Check a ``host:port`` address and return it.

    Raises:
        UsageError: it is not ``host:port`` with a port in 1..65535.
    """
    host, colon, port = address.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"expected the server as HOST:PORT (for example 127.0.0.1:8801), got {address!r}")
    return address


class Engine:
    """A Dex server to talk to, and the `AgentApp` (Client, container) of some Flows."""

    def __init__(self, address: str, app: AgentApp, *, embedded: bool, data_dir: Path | None = None) -> None:
        self.address = address
        self.app = app
        self.container = app.container
        self.embedded = embedded
        """Whether the server is the dev server running inside this process."""
        self.data_dir = data_dir
        """Where the embedded dev server keeps its sessions (``None``: in memory, or not embedded)."""
        self.client: dex.AsyncClient = app.client

    @property
    def description(self) -> str:
        """What and where the server is, for a header line."""
        if not self.embedded:
            return f"Dex on {self.address}"
        kept = f"sessions kept in {self.data_dir}" if self.data_dir is not None else "in memory"
        return f"the dev server in this process on {self.address} ({kept})"

    def sessions(self, flow: AgentSessionFlow) -> AgentSessionClient:
        """Return the session client of one of the Flows."""
        return AgentSessionClient(self.client, flow)

    @contextlib.asynccontextmanager
    async def worker(self) -> AsyncIterator[None]:
        """Serve the Flows with a Worker in this process while the block runs."""
        worker = self.container.worker()
        serving = asyncio.create_task(worker.start())
        try:
            try:
                await wait_worker_serving(worker, serving, timeout=WORKER_REGISTRATION_TIMEOUT)
            except RuntimeError as error:
                if error.__cause__ is not None:
                    raise error.__cause__ from None
                raise CliError(f"the Worker stopped before it registered with {self.address}") from None
            yield
        finally:
            await worker.stop()
            with contextlib.suppress(Exception):
                await serving
            for flow in self.container.flows():
                await flow.close_client()


@contextlib.asynccontextmanager
async def open_engine(  # noqa: PLR0913 - one parameter per command option
    server: str | None,
    flows: Sequence[AgentSessionFlow],
    console: Console,
    *,
    embedded: bool = False,
    worker_mode: WorkerMode | None = None,
    listen_address: str | None = None,
    data_dir: Path | None = None,
) -> AsyncIterator[Engine]:
    """Connect to ``server``, or start the dev server here when it is ``None``, and yield the `Engine`.

    The Client, container and blob cache are `open_agent_app`'s (with no Worker:
    `Engine.worker` starts one on request), so the CLI sets up and shuts down
    exactly as an application does.

    Args:
        server: ``host:port``, or ``None`` for the dev server in this process.
        flows: the Flows the Client (and an in-process Worker) know.
        console: where the spinner of a slow start goes.
        embedded: ``server`` is a dev server this process already runs.
        worker_mode: how Workers get tasks (the Client routes to them); by default they
            listen on the embedded dev server and pull otherwise.
        listen_address: where listening Workers bind (default: a free loopback port).
        data_dir: where a dev server started here keeps its sessions (``None``: in memory).

    Raises:
        CliError: the server does not answer, or the data dir cannot be used.
    """
    async with contextlib.AsyncExitStack() as stack:
        kept: Path | None = None
        if server is None:
            with console.status("starting the dev server", spinner="dots"):
                devserver = await stack.enter_async_context(start_devserver(data_dir))
            address, embedded, kept = devserver.address, True, data_dir
        else:
            address = parse_server(server)
        # A run remembers the address its listening Worker had; the next process to open the same data dir
        # listens elsewhere, so a dev server that keeps its sessions gets pull Workers.
        mode = worker_mode or (WorkerMode.LISTEN if embedded and kept is None else WorkerMode.PULL)
        opening = open_agent_app(
            flows,
            server_address=address,
            workers=0,
            worker_mode=mode,
            listen_address=listen_address,
            stop_drain_seconds=1,
        )
        try:
            app = await stack.enter_async_context(opening)
        except ConnectionError as error:
            raise CliError(str(error)) from error
        yield Engine(address, app, embedded=embedded, data_dir=kept)


@contextlib.asynccontextmanager
async def start_devserver(data_dir: Path | None, *, port: int = 0) -> AsyncIterator[DevServer]:
    """Run a dev server in this process while the block runs, on ``data_dir`` (``None``: in memory).

    Raises:
        CliError: the data dir cannot be used (in use, corrupt, of another schema version).
    """
    server = DevServer(port=port, data_dir=data_dir)
    try:
        await server.start()
    except StoreError as error:
        raise CliError(str(error)) from error
    try:
        yield server
    finally:
        await server.stop()
