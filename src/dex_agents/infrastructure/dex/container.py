"""The composition root: assembles the Registry, blob cache, Worker and Client of an application.

The only module that imports dependency-injector. Providers are called
explicitly; nothing is wired or read from files or the environment. Callers
build it with `AgentContainer.build`, plain keyword arguments, so no other module
imports dependency-injector (a ruff ``banned-api`` rule keeps it so). Unit tests
build use cases directly and never touch it::

    container = AgentContainer.build(flows=[flow], server_address="localhost:8801")
    worker = container.worker()      # a pull-mode AsyncWorker
    client = container.client()      # an AsyncClient that routes started Flows to pull Workers
    ...
    container.blob_cache().close()

Workers pull their tasks (``PullWorkerOptions``): size ``max_concurrent_tasks``
for the largest batch of parallel tool calls plus one slot Dex keeps for RPCs.
Building a Worker applies `cache_sdk_version` (the pull Worker otherwise reads
the SDK's package metadata for every task it takes) and binds a Client factory
to every Flow (`AgentSessionFlow.bind_client`): single-attempt tool Steps read
their ``tool_call_started`` back through it before they run the tool.
"""

from collections.abc import Callable, Iterable
from datetime import timedelta

import dex
from dependency_injector import containers, providers

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

    codecs = providers.Singleton(codec_registry)
    registry = providers.Singleton(dex.Registry, flows, codecs, allow_async_handlers=True)
    blob_cache_config = providers.Factory(dex.BlobCacheConfig, blob_cache_directory, blob_cache_bytes)
    blob_cache = providers.Singleton(dex.open_blob_cache, blob_cache_config)
    pull = providers.Factory(_pull_options, max_concurrent_tasks, stop_drain_seconds)
    worker_options = providers.Factory(dex.WorkerOptions, server_address=server_address, pull=pull)
    worker_target = providers.Factory(dex.WorkerTarget, pull=True)
    client_options = providers.Factory(dex.ClientOptions, server_address=server_address, worker_target=worker_target)
    client = providers.Factory(dex.AsyncClient, registry, blob_cache, client_options)
    worker = providers.Factory(_async_worker, registry, blob_cache, worker_options, flows, client.provider)

    @classmethod
    def build(
        cls,
        *,
        flows: Iterable[AgentSessionFlow],
        server_address: str,
        blob_cache_directory: str = DEFAULT_BLOB_CACHE_DIRECTORY,
        blob_cache_bytes: int = DEFAULT_BLOB_CACHE_BYTES,
        max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS,
        stop_drain_seconds: int = DEFAULT_STOP_DRAIN_SECONDS,
    ) -> "AgentContainer":
        """Return a container for ``flows`` served by the Dex FlowService at ``server_address``."""
        return cls(
            flows=providers.Object(list(flows)),
            server_address=providers.Object(server_address),
            blob_cache_directory=providers.Object(blob_cache_directory),
            blob_cache_bytes=providers.Object(blob_cache_bytes),
            max_concurrent_tasks=providers.Object(max_concurrent_tasks),
            stop_drain_seconds=providers.Object(stop_drain_seconds),
        )
