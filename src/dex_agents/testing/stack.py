"""`AgentTestStack`: an engine, a Client and Worker child processes for integration tests.

The engine is the dev server (in-process) by default; with ``engine_data_dir`` it
runs as a child process keeping its data in that dir, so a test can SIGKILL it
(`AgentTestStack.kill_engine`) and start it again on the same port
(`AgentTestStack.restart_engine`). With ``DEXCLI`` set to a
``dexcli`` binary, or ``backend="dexcli"``, a private ``dexcli dev`` runs
instead on a free port; the argv it is started with is an assumption (no
``dexcli`` could be run where this was written) and can be replaced with
``DEX_AGENTS_DEXCLI_ARGS`` (``{port}`` is filled in).

Workers run in child processes, each in its own process group, so a test can
SIGKILL one at an exact moment (`WorkerProcess.kill`) and start a
replacement. Each is forked from one warm interpreter that imported the SDK,
Pydantic AI and this library once (`dex_agents.testing._forked_workers`; a
fresh interpreter per child with ``DEX_AGENTS_TEST_FORK_WORKERS=0``). A
Worker child is any module whose ``__main__`` calls `run_agent_worker` with
the same Flows the test builds.

Workers listen by default (`WorkerMode.LISTEN`, the faster mode): the stack
picks one free loopback port, every Worker child it starts binds that port (a
replacement takes over the address of a killed one) and the Client routes
started Flows there. ``worker_mode="pull"``, or ``DEX_AGENTS_WORKER_MODE=pull``
in the environment, runs pull Workers instead.
"""

import asyncio
import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal, Protocol, Self

import attrs
import dex

from dex_agents.infrastructure.dex.client import AgentSessionClient
from dex_agents.infrastructure.dex.container import (
    DEFAULT_LISTEN_ADDRESS,
    AgentContainer,
    WorkerMode,
    free_listen_address,
    wait_worker_serving,
)
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.testing._forked_workers import fork_workers_enabled, start_child, wait_or_kill
from dex_agents.testing.devserver import (
    TEST_RETRY_DELAY_SCALE,
    DevServer,
    DevServerConfig,
    DevServerProcess,
    StepHistoryEntry,
    read_step_history,
)
from dex_agents.testing.probes import wait_until

SERVER_ADDRESS_ENV = "DEX_AGENTS_SERVER_ADDRESS"
"""The engine address a Worker child connects to."""
READY_FILE_ENV = "DEX_AGENTS_WORKER_READY_FILE"
"""The file a Worker child creates once it serves."""
CACHE_DIR_ENV = "DEX_AGENTS_WORKER_CACHE_DIR"
"""The Worker child's blob cache directory (else a temporary one, removed on exit)."""
WORKER_MODE_ENV = "DEX_AGENTS_WORKER_MODE"
"""``pull`` or ``listen``: the Worker mode of stacks that do not name one, and of Worker children."""
LISTEN_ADDRESS_ENV = "DEX_AGENTS_WORKER_LISTEN_ADDRESS"
"""Where a listening Worker child binds (``host:port``)."""
DEXCLI_ENV = "DEXCLI"
"""Path of a ``dexcli`` binary; when set, tests also run on a private ``dexcli dev``."""
DEXCLI_ARGS_ENV = "DEX_AGENTS_DEXCLI_ARGS"
"""Override of the ``dexcli`` arguments (``{port}`` is replaced)."""
DEFAULT_DEXCLI_ARGS = "dev --engine zd --port {port}"
"""Assumed ``dexcli`` arguments for a private dev engine."""

Backend = Literal["devserver", "dexcli"]
"""Which engine a stack runs on."""


def default_worker_mode(default: WorkerMode = WorkerMode.LISTEN) -> WorkerMode:
    """The mode ``DEX_AGENTS_WORKER_MODE`` names, else ``default``.

    Raises:
        ValueError: the variable names no `WorkerMode`.
    """
    given = os.environ.get(WORKER_MODE_ENV, "").strip()
    if not given:
        return default
    try:
        return WorkerMode(given)
    except ValueError:
        choices = ", ".join(mode.value for mode in WorkerMode)
        raise ValueError(f"{WORKER_MODE_ENV} must be one of {choices}, got {given!r}") from None


def run_agent_worker(
    flows: Sequence[AgentSessionFlow],
    *,
    server_address: str | None = None,
    max_concurrent_tasks: int = 16,
    worker_mode: WorkerMode | str | None = None,
    listen_address: str | None = None,
) -> None:
    """Serve ``flows`` in this process until SIGTERM or SIGINT (the body of a Worker child).

    The address comes from ``server_address`` or ``DEX_AGENTS_SERVER_ADDRESS``; the
    mode from ``worker_mode`` or ``DEX_AGENTS_WORKER_MODE`` (default pull); a listening
    Worker binds ``listen_address`` or ``DEX_AGENTS_WORKER_LISTEN_ADDRESS``.
    """
    address = server_address or os.environ.get(SERVER_ADDRESS_ENV)
    if not address:
        raise SystemExit(f"run_agent_worker needs a server address (argument or {SERVER_ADDRESS_ENV})")
    mode = WorkerMode(worker_mode) if worker_mode is not None else default_worker_mode(WorkerMode.PULL)
    listen = listen_address or os.environ.get(LISTEN_ADDRESS_ENV)
    if mode is WorkerMode.LISTEN and not listen:
        raise SystemExit(f"a listening Worker needs an address (argument or {LISTEN_ADDRESS_ENV})")
    ready_file = os.environ.get(READY_FILE_ENV)
    serve = _Serve(list(flows), address, max_concurrent_tasks, mode, listen or "")
    asyncio.run(serve.run(None if ready_file is None else Path(ready_file)))


@attrs.frozen
class _Serve:
    flows: list[AgentSessionFlow]
    address: str
    max_tasks: int
    mode: WorkerMode
    listen: str

    async def run(self, ready_file: Path | None) -> None:
        given = os.environ.get(CACHE_DIR_ENV)
        if given:
            await self._serve_with_cache(ready_file, given)
            return
        with tempfile.TemporaryDirectory(prefix="dex-agents-worker-") as cache_dir:
            await self._serve_with_cache(ready_file, cache_dir)

    async def _serve_with_cache(self, ready_file: Path | None, cache_dir: str) -> None:
        container = AgentContainer.build(
            flows=self.flows,
            server_address=self.address,
            blob_cache_directory=cache_dir,
            max_concurrent_tasks=self.max_tasks,
            stop_drain_seconds=1,
            worker_mode=self.mode,
            listen_address=self.listen or DEFAULT_LISTEN_ADDRESS,
        )
        worker = container.worker()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        serving = asyncio.create_task(worker.start())
        try:
            await wait_worker_serving(worker, serving)
            if ready_file is not None:
                ready_file.touch()
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({serving, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
        finally:
            await worker.stop()
            await serving
            for flow in self.flows:
                await flow.close_client()
            container.blob_cache().close()


class ChildProcess(Protocol):
    """What `WorkerProcess` needs of its child: an asyncio subprocess, or one forked from the zygote."""

    @property
    def pid(self) -> int:
        """The child's process ID (and its process group's)."""
        ...

    @property
    def returncode(self) -> int | None:
        """The exit code once the child ended, else ``None``."""
        ...

    async def wait(self) -> int:
        """Wait until the child ended; return its exit code."""
        ...


class WorkerProcess:
    """A Worker child process in its own process group."""

    def __init__(self, process: ChildProcess, log_path: Path) -> None:
        self._process = process
        self.log_path = log_path

    @property
    def pid(self) -> int:
        """The child's process ID."""
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The exit code, once the child ended."""
        return self._process.returncode

    def kill(self) -> None:
        """SIGKILL the Worker and everything in its process group, at once."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)

    async def stop(self) -> None:
        """Stop the Worker gracefully (SIGTERM), killing it if it lingers."""
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self._process.wait(), timeout=10)
            except TimeoutError:
                self.kill()
        await self._process.wait()

    def output(self) -> str:
        """What the child printed so far."""
        return self.log_path.read_text() if self.log_path.exists() else ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def default_backend() -> Backend:
    """``dexcli`` when ``DEXCLI`` is set, else the dev server."""
    return "dexcli" if os.environ.get(DEXCLI_ENV) else "devserver"


class AgentTestStack:
    """An engine, a Client for ``flows`` and Worker children, for one test."""

    def __init__(
        self,
        tmp_path: Path,
        flows: Sequence[AgentSessionFlow],
        worker_module: str,
        *,
        worker_cwd: Path | None = None,
        worker_env: Mapping[str, str] | None = None,
        backend: Backend | None = None,
        devserver_config: DevServerConfig | None = None,
        worker_mode: WorkerMode | str | None = None,
        engine_data_dir: Path | str | None = None,
    ) -> None:
        self._tmp = Path(tmp_path)
        self._engine_data_dir = None if engine_data_dir is None else Path(engine_data_dir)
        self._engine_process: DevServerProcess | None = None
        self.worker_mode = WorkerMode(worker_mode) if worker_mode is not None else default_worker_mode()
        """How the stack's Workers get tasks (``DEX_AGENTS_WORKER_MODE``, else listen)."""
        self.listen_address = ""
        """The loopback address every listening Worker child of the stack binds."""
        self._flows = list(flows)
        self._worker_module = worker_module
        self._worker_cwd = worker_cwd
        self._worker_env = dict(worker_env or {})
        self.backend: Backend = backend or default_backend()
        if self.backend not in ("devserver", "dexcli"):
            raise ValueError(f'backend must be "devserver" or "dexcli", got {self.backend!r}')
        self._devserver_config = devserver_config
        self._devserver: DevServer | None = None
        self._dexcli: subprocess.Popen[bytes] | None = None
        self._container: AgentContainer | None = None
        self._client: dex.AsyncClient | None = None
        self._workers: list[WorkerProcess] = []
        self.address = ""

    @property
    def devserver(self) -> DevServer:
        """The in-process dev server (devserver backend only): clock, timers, history."""
        if self._devserver is None:
            raise RuntimeError(f"the {self.backend!r} backend has no in-process dev server")
        return self._devserver

    @property
    def engine_process(self) -> DevServerProcess:
        """The dev server child process of a stack built with ``engine_data_dir``."""
        if self._engine_process is None:
            raise RuntimeError("this stack runs no dev server child process (give engine_data_dir)")
        return self._engine_process

    async def kill_engine(self) -> None:
        """SIGKILL the dev server child (a stack built with ``engine_data_dir``): nothing flushed, a crash."""
        await self.engine_process.kill()

    async def restart_engine(self) -> None:
        """Start the dev server child again on the same port and data dir; Workers and Clients reconnect."""
        await self.engine_process.restart()

    @property
    def client(self) -> dex.AsyncClient:
        """The stack's Dex Client."""
        assert self._client is not None, "use the stack inside 'async with'"
        return self._client

    def sessions(self, flow: AgentSessionFlow) -> AgentSessionClient:
        """Return a session client for one of the stack's Flows."""
        return AgentSessionClient(self.client, flow)

    async def __aenter__(self) -> Self:
        self._tmp.mkdir(parents=True, exist_ok=True)
        config = self._devserver_config or DevServerConfig(retry_delay_scale=TEST_RETRY_DELAY_SCALE)
        if self.backend == "devserver" and self._engine_data_dir is not None:
            self._engine_process = DevServerProcess(config, data_dir=self._engine_data_dir)
            await self._engine_process.start()
            self.address = self._engine_process.address
        elif self.backend == "devserver":
            self._devserver = DevServer(config)
            await self._devserver.__aenter__()
            self.address = self._devserver.address
        else:
            self.address = await self._start_dexcli()
        if self.worker_mode is WorkerMode.LISTEN:
            self.listen_address = free_listen_address()
        self._container = AgentContainer.build(
            flows=self._flows,
            server_address=self.address,
            blob_cache_directory=str(self._tmp / "client-cache"),
            worker_mode=self.worker_mode,
            listen_address=self.listen_address or DEFAULT_LISTEN_ADDRESS,
        )
        self._client = self._container.client()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for worker in self._workers:
            await worker.stop()
        if self._client is not None:
            await self._client.close()
        if self._container is not None:
            self._container.blob_cache().close()
        if self._devserver is not None:
            await self._devserver.__aexit__(exc_type, exc, tb)
        if self._engine_process is not None:
            await self._engine_process.stop()
        if self._dexcli is not None:
            self._dexcli.terminate()
            wait_or_kill(self._dexcli, timeout=10)

    async def start_worker(self, *, timeout: float = 30.0) -> WorkerProcess:
        """Start a Worker child (``python -m worker_module``) and wait until it serves."""
        index = len(self._workers) + 1
        ready = self._tmp / f"worker-{index}.ready"
        log_path = self._tmp / f"worker-{index}.log"
        env = {
            **os.environ,
            **self._worker_env,
            SERVER_ADDRESS_ENV: self.address,
            WORKER_MODE_ENV: self.worker_mode.value,
            LISTEN_ADDRESS_ENV: self.listen_address,
            READY_FILE_ENV: str(ready),
            # Under the test's folder, so a SIGKILLed Worker leaves nothing behind elsewhere.
            CACHE_DIR_ENV: str(self._tmp / f"worker-{index}-cache"),
        }
        cwd = self._worker_cwd or Path.cwd()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(cwd), env.get("PYTHONPATH", "")]))
        process: ChildProcess
        if fork_workers_enabled():
            log_path.write_bytes(b"")
            process = await start_child(self._worker_module, cwd=cwd, env=env, log=log_path)
        else:
            with log_path.open("wb") as log:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    self._worker_module,
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        worker = WorkerProcess(process, log_path)
        self._workers.append(worker)

        def ready_or_dead() -> bool:
            if process.returncode is not None:
                raise RuntimeError(f"Worker {self._worker_module} exited with {process.returncode}:\n{worker.output()}")
            return ready.exists()

        await wait_until(f"Worker {self._worker_module} to serve", ready_or_dead, timeout=timeout)
        return worker

    async def read_step_history(self, flow_id: str) -> list[StepHistoryEntry]:
        """Return the Step method events of the session's latest run, oldest first."""
        run_id = (await self.client.describe_flow(flow_id)).run_id
        return await read_step_history(self.address, flow_id, run_id)

    async def _start_dexcli(self) -> str:
        binary = os.environ.get(DEXCLI_ENV)
        if not binary:
            raise RuntimeError(f"the dexcli backend needs {DEXCLI_ENV} to name a dexcli binary")
        port = _free_port()
        args = os.environ.get(DEXCLI_ARGS_ENV, DEFAULT_DEXCLI_ARGS).format(port=port)
        log = (self._tmp / "dexcli.log").open("wb")
        self._dexcli = subprocess.Popen(  # noqa: ASYNC220 - started once, never awaited
            [binary, *shlex.split(args)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        address = f"127.0.0.1:{port}"
        container = AgentContainer.build(
            flows=self._flows,
            server_address=address,
            blob_cache_directory=str(self._tmp / "probe-cache"),
        )
        probe = container.client()

        async def healthy() -> bool:
            try:
                return await probe.health_check()
            except dex.DexServiceError:
                return False

        try:
            await wait_until(f"dexcli dev on {address}", healthy, timeout=60)
        finally:
            await probe.close()
            container.blob_cache().close()
        return address
