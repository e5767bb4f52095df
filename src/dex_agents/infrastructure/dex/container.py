"""The composition root: assembles the Registry, blob cache, Worker and Client of an application.

The only module that imports dependency-injector. Providers are called
explicitly; nothing is wired or read from files or the environment. Callers
build it with `AgentContainer.build`, plain keyword arguments, so no other module
imports dependency-injector (a ruff ``banned-api`` rule keeps it so). Unit tests
build use cases directly and never touch it::

    container = AgentContainer.build(flows=[flow], server_address="localhost:8801")
    worker = container.worker()      # a pull-mode AsyncWorker
    client = container.client()      # an AsyncClient that routes started Flows to pull Workers
    serving = asyncio.create_task(worker.start())
    await wait_worker_serving(worker, serving)
    ...
    container.blob_cache().close()

Two kinds of Worker (`WorkerMode`):

- ``pull`` (the default): the Worker dials Dex and pulls its tasks
  (``PullWorkerOptions``), so it works behind NAT or a firewall. Size
  ``max_concurrent_tasks`` for the largest batch of parallel tool calls plus one
  slot Dex keeps for RPCs. The Client routes started Flows to pull Workers.
- ``listen``: the Worker serves the SDK's ``WorkerService`` on
  ``listen_address`` (``127.0.0.1:8803`` by default, loopback only) and Dex calls
  it, one gRPC call per task: no task streams to open and retire, so a Step costs
  the Worker less CPU and time (``docs/performance.md``). Dex must reach that
  address; ``advertised_address`` is what the Client tells Dex when it differs
  (a container's external name). The SDK's gRPC server sets no task limit
  (``max_concurrent_tasks`` does not apply) and drains for 5 s on stop.

The blob cache is the SDK's persistent one (``blob_cache_directory``) behind
`MemoryFrontBlobCache`: reads come from memory when they can, and writes reach
the disk from a background thread, so a Step never waits for a disk write.

Building a Worker applies `cache_sdk_version` (the pull Worker otherwise reads
the SDK's package metadata for every task it takes) and binds a Client factory
to every Flow (`AgentSessionFlow.bind_client`): single-attempt tool Steps read
their ``tool_call_started`` back through it before they run the tool.
"""

import asyncio
import collections
import socket
import threading
from collections.abc import Callable, Iterable
from datetime import timedelta
from enum import StrEnum

import dex
import grpc  # type: ignore[import-untyped]  # grpcio ships no stubs
from dependency_injector import containers, providers

from dex_agents.infrastructure.dex.blob_cache import MemoryFrontBlobCache
from dex_agents.infrastructure.dex.codec import codec_registry
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.infrastructure.dex.sdk_tuning import cache_sdk_version

DEFAULT_MAX_CONCURRENT_TASKS = 16
"""Default Worker task slots."""

DEFAULT_BLOB_CACHE_BYTES = 64 * 1024 * 1024
"""Default blob cache size."""

DEFAULT_BLOB_CACHE_DIRECTORY = ".dex-cache"
"""Default blob cache directory."""

DEFAULT_STOP_DRAIN_SECONDS = 30
"""Default time a stopping Worker lets running Steps finish."""

DEFAULT_LISTEN_ADDRESS = "127.0.0.1:8803"
"""Where a listening Worker serves by default: the SDK's port, on loopback only."""

DEFAULT_SERVING_TIMEOUT = 30.0
"""Seconds `wait_worker_serving` waits by default."""


class WorkerMode(StrEnum):
    """How Dex reaches a Worker."""

    PULL = "pull"
    """The Worker dials Dex and pulls tasks: works behind NAT; a new task stream per task."""
    LISTEN = "listen"
    """Dex calls the Worker's gRPC server, one call per task: faster; Dex must reach the address."""


def free_loopback_address() -> str:
    """Return ``127.0.0.1:PORT`` for a port free right now (for a server; a listening Worker: `free_listen_address`)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return f"127.0.0.1:{port}"


HELD_LISTEN_PORTS = 64
"""How many of the latest `free_listen_address` ports this process keeps held."""

_held_ports: collections.deque[socket.socket] = collections.deque()
_held_lock = threading.Lock()


def free_listen_address() -> str:
    """Return ``127.0.0.1:PORT`` for a listening Worker of this process or its children, held until it binds.

    The SDK's Worker serves gRPC, which binds with ``SO_REUSEPORT``: two processes that picked the same
    free port (each probing port 0 before either Worker bound it) would both listen on it, and the
    kernel would split Dex's calls between their Workers (one answering "Flow is not registered").
    So the port stays bound here, by a socket that allows port reuse and does not listen: a Worker
    (gRPC, same user) can still bind it, while no other process's probe is handed it. The latest
    `HELD_LISTEN_PORTS` stay held; by then their Workers have bound them, which keeps them taken (a Worker
    started again on an address released by then has the race back: take a new address for it).
    Where the platform has no ``SO_REUSEPORT``, this is `free_loopback_address`.
    """
    reuse_port = getattr(socket, "SO_REUSEPORT", None)
    if reuse_port is None:
        return free_loopback_address()
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 0))  # without port reuse: the kernel hands out a port nobody has bound
        holder.setsockopt(socket.SOL_SOCKET, reuse_port, 1)  # now a gRPC server of the same user may bind it too
    except OSError:
        holder.close()  # a platform that refuses the option: the port is only free, as before
        return free_loopback_address()
    port: int = holder.getsockname()[1]
    with _held_lock:
        _held_ports.append(holder)
        while len(_held_ports) > HELD_LISTEN_PORTS:
            _held_ports.popleft().close()
    return f"127.0.0.1:{port}"


def _check_address(address: str) -> str:
    host, colon, port = address.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"a listening Worker needs HOST:PORT with a port in 1..65535, got {address!r}")
    return address


def _async_worker(
    registry: dex.Registry,
    blob_cache: dex.BlobCache,
    options: dex.WorkerOptions,
    flows: list[AgentSessionFlow],
    client: Callable[[], dex.AsyncClient],
) -> dex.AsyncWorker:
    cache_sdk_version()
    for flow in flows:
        flow.bind_client(client)
    return dex.AsyncWorker(registry, blob_cache, options)


def _pull_options(max_concurrent_tasks: int, stop_drain_seconds: int) -> dex.PullWorkerOptions:
    return dex.PullWorkerOptions(
        max_concurrent_tasks=max_concurrent_tasks, stop_drain_timeout=timedelta(seconds=stop_drain_seconds)
    )


def _worker_target(mode: WorkerMode, advertised_address: str) -> dex.WorkerTarget:
    match mode:
        case WorkerMode.PULL:
            return dex.WorkerTarget(pull=True)
        case WorkerMode.LISTEN:
            # What the SDK's listening Worker advertises for itself when no target is given.
            return dex.WorkerTarget(advertised_address)


def _worker_options(
    mode: WorkerMode,
    server_address: str,
    pull: dex.PullWorkerOptions,
    listen_address: str,
    target: dex.WorkerTarget,
) -> dex.WorkerOptions:
    match mode:
        case WorkerMode.PULL:
            return dex.WorkerOptions(server_address=server_address, pull=pull)
        case WorkerMode.LISTEN:
            return dex.WorkerOptions(server_address=server_address, bind_address=listen_address, worker_target=target)


async def wait_worker_serving(
    worker: dex.AsyncWorker, serving: "asyncio.Task[None]", *, timeout: float = DEFAULT_SERVING_TIMEOUT
) -> None:
    """Wait until ``worker`` (started as the task ``serving``) takes tasks, in either mode.

    A pull Worker is serving once its streams registered; a listening Worker once
    its advertised address accepts a gRPC connection.

    Raises:
        RuntimeError: the Worker stopped first (its own error is the cause).
        TimeoutError: not serving within ``timeout`` seconds.
    """
    if worker.options.pull is not None:
        ready: asyncio.Task[None] = asyncio.create_task(worker.wait_pull_registered(timeout=timeout))
    else:
        ready = asyncio.create_task(_wait_listening(worker.options, timeout))
    try:
        done, _ = await asyncio.wait({serving, ready}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ready.cancel()
    if ready in done:
        ready.result()
        return
    error = serving.exception()
    raise RuntimeError("the Worker stopped before it served") from error


_PROBE_CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 250),
)
"""The probe usually connects before the Worker's server is bound: gRPC's default first backoff (1 s) would
then delay every listening Worker's start by a second."""


async def _wait_listening(options: dex.WorkerOptions, timeout: float) -> None:
    target = options.worker_target
    address = target.address if target is not None and target.address else options.bind_address
    async with grpc.aio.insecure_channel(address, options=_PROBE_CHANNEL_OPTIONS) as channel:
        await asyncio.wait_for(channel.channel_ready(), timeout)


def _blob_cache(config: dex.BlobCacheConfig) -> dex.BlobCache:
    """The SDK's persistent blob cache behind an in-memory front that writes it in the background."""
    return MemoryFrontBlobCache(dex.open_blob_cache(config))


class AgentContainer(containers.DeclarativeContainer):
    """Builds what an application needs to serve and drive agent sessions."""

    flows: "providers.Dependency[list[AgentSessionFlow]]" = providers.Dependency()
    """The `AgentSessionFlow` instances (a list), the same objects in Worker and Client."""
    server_address = providers.Dependency(instance_of=str)
    """The Dex FlowService ``host:port``."""
    blob_cache_directory = providers.Object(DEFAULT_BLOB_CACHE_DIRECTORY)
    """Where the SDK caches large values."""
    blob_cache_bytes = providers.Object(DEFAULT_BLOB_CACHE_BYTES)
    """The blob cache's size."""
    max_concurrent_tasks = providers.Object(DEFAULT_MAX_CONCURRENT_TASKS)
    """Worker task slots (parallel tool calls + 1 for RPCs)."""
    stop_drain_seconds = providers.Object(DEFAULT_STOP_DRAIN_SECONDS)
    """How long a stopping Worker lets running Steps finish."""
    worker_mode = providers.Object(WorkerMode.PULL)
    """`WorkerMode`: pull (the Worker dials Dex) or listen (Dex calls the Worker)."""
    listen_address = providers.Object(DEFAULT_LISTEN_ADDRESS)
    """Where a listening Worker binds."""
    advertised_address = providers.Object(DEFAULT_LISTEN_ADDRESS)
    """The listening Worker's address as Dex reaches it (the Client routes started Flows there)."""

    codecs = providers.Singleton(codec_registry)
    registry = providers.Singleton(dex.Registry, flows, codecs, allow_async_handlers=True)
    blob_cache_config = providers.Factory(dex.BlobCacheConfig, blob_cache_directory, blob_cache_bytes)
    blob_cache = providers.Singleton(_blob_cache, blob_cache_config)
    pull = providers.Factory(_pull_options, max_concurrent_tasks, stop_drain_seconds)
    worker_target = providers.Factory(_worker_target, worker_mode, advertised_address)
    worker_options = providers.Factory(
        _worker_options, worker_mode, server_address, pull, listen_address, worker_target
    )
    client_options = providers.Factory(dex.ClientOptions, server_address=server_address, worker_target=worker_target)
    client = providers.Factory(dex.AsyncClient, registry, blob_cache, client_options)
    worker = providers.Factory(_async_worker, registry, blob_cache, worker_options, flows, client.provider)

    @classmethod
    def build(  # noqa: PLR0913 - one keyword per option of the container
        cls,
        *,
        flows: Iterable[AgentSessionFlow],
        server_address: str,
        blob_cache_directory: str = DEFAULT_BLOB_CACHE_DIRECTORY,
        blob_cache_bytes: int = DEFAULT_BLOB_CACHE_BYTES,
        max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS,
        stop_drain_seconds: int = DEFAULT_STOP_DRAIN_SECONDS,
        worker_mode: WorkerMode | str = WorkerMode.PULL,
        listen_address: str = DEFAULT_LISTEN_ADDRESS,
        advertised_address: str | None = None,
    ) -> "AgentContainer":
        """Return a container for ``flows`` served by the Dex FlowService at ``server_address``.

        ``worker_mode`` picks a pull Worker (the default) or a listening one bound to
        ``listen_address``, which Dex reaches at ``advertised_address`` (default: the
        same). A Client and a Worker that work together need the same mode and address.

        Raises:
            ValueError: an unknown mode, or a listening address that is not ``HOST:PORT``.
        """
        mode = WorkerMode(worker_mode)
        if mode is WorkerMode.LISTEN:
            _check_address(listen_address)
            _check_address(advertised_address or listen_address)
        return cls(
            flows=providers.Object(list(flows)),
            server_address=providers.Object(server_address),
            blob_cache_directory=providers.Object(blob_cache_directory),
            blob_cache_bytes=providers.Object(blob_cache_bytes),
            max_concurrent_tasks=providers.Object(max_concurrent_tasks),
            stop_drain_seconds=providers.Object(stop_drain_seconds),
            worker_mode=providers.Object(mode),
            listen_address=providers.Object(listen_address),
            advertised_address=providers.Object(advertised_address or listen_address),
        )
