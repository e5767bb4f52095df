"""`open_agent_app`: the Worker, Client and blob cache of an application in one ``async with``.

::

    async with open_agent_app([flow], server_address="127.0.0.1:8801") as app:
        sessions = app.sessions(flow)
        await sessions.start_session("session-42")
        receipt = await sessions.submit_user_message("session-42", "Find my open tickets")
        print((await sessions.wait_for_turn("session-42", receipt, timeout=120)).reply)

It builds the `AgentContainer` for the Flows (the Registry with the
dex-agents codecs, the blob cache, a Client routed to the Workers' kind),
starts ``workers`` Workers serving them (each binds the Client factory its
single-attempt tool Steps need) and waits until they serve; on exit it stops
the Workers (letting running Steps finish for ``stop_drain_seconds``), closes
the Flows' Clients, the application's Client and the blob cache, in that
order, also when the block raised. ``workers=0`` is a Client-only process
(another process serves the Flows). The blob cache lives in a temporary
directory unless ``blob_cache_directory`` names one. The long form, for
those who assemble the pieces themselves, is `AgentContainer`.
"""

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Sequence

import attrs
import dex

from dex_agents.infrastructure.dex.client import AgentSessionClient
from dex_agents.infrastructure.dex.container import (
    DEFAULT_LISTEN_ADDRESS,
    DEFAULT_MAX_CONCURRENT_TASKS,
    DEFAULT_SERVING_TIMEOUT,
    DEFAULT_STOP_DRAIN_SECONDS,
    AgentContainer,
    WorkerMode,
    free_listen_address,
    wait_worker_serving,
)
from dex_agents.infrastructure.dex.flow import AgentSessionFlow


@attrs.frozen(kw_only=True)
class AgentApp:
    """What `open_agent_app` runs: the Client and container of its Flows, and the running Workers."""

    server_address: str
    """The Dex server."""
    flows: tuple[AgentSessionFlow, ...]
    """The Flows served and driven."""
    client: dex.AsyncClient
    """The application's Dex Client (closed on exit)."""
    container: AgentContainer
    """The composition root, for anything else (another Worker, the Registry)."""
    workers: tuple[dex.AsyncWorker, ...]
    """The Workers serving the Flows here (none with ``workers=0``)."""

    def sessions(self, flow: AgentSessionFlow) -> AgentSessionClient:
        """Return the session client of one of the Flows.

        Raises:
            ValueError: ``flow`` is not one of the app's Flows.
        """
        if not any(flow is known for known in self.flows):
            raise ValueError(f"flow {flow.get_flow_type()!r} is not one of this app's Flows")
        return AgentSessionClient(self.client, flow)


@contextlib.asynccontextmanager
async def open_agent_app(  # noqa: PLR0913 - one keyword per option of the app
    flows: Sequence[AgentSessionFlow],
    *,
    server_address: str,
    workers: int = 1,
    worker_mode: WorkerMode | str = WorkerMode.PULL,
    listen_address: str | None = None,
    max_concurrent_tasks: int = DEFAULT_MAX_CONCURRENT_TASKS,
    stop_drain_seconds: int = DEFAULT_STOP_DRAIN_SECONDS,
    blob_cache_directory: str | None = None,
    serving_timeout: float = DEFAULT_SERVING_TIMEOUT,
) -> AsyncIterator[AgentApp]:
    """Run ``workers`` Workers and a Client for ``flows`` against ``server_address`` while the block runs.

    ``worker_mode`` is pull Workers (the default: they dial Dex) or one
    listening Worker, bound to ``listen_address`` (default: a free loopback
    port), which the Client routes to.

    Raises:
        ValueError: no Flow, two Flows of one Flow type, a negative ``workers``, or more than one listening Worker.
        ConnectionError: the server does not answer its health check within 5 s.
        RuntimeError: a Worker stopped before it served (its error is the cause).
    """
    if not flows:
        raise ValueError("open_agent_app needs at least one Flow")
    types = [flow.get_flow_type() for flow in flows]
    if len(set(types)) != len(types):
        raise ValueError(f"each Flow needs its own flow_type, got {types}")
    if workers < 0:
        raise ValueError(f"workers must be 0 or more, got {workers}")
    mode = WorkerMode(worker_mode)
    if mode is WorkerMode.LISTEN and workers > 1:
        raise ValueError("one listening Worker per app (Dex calls one address); use pull Workers for more")
    async with contextlib.AsyncExitStack() as stack:
        directory = blob_cache_directory or stack.enter_context(tempfile.TemporaryDirectory(prefix="dex-agents-"))
        if mode is WorkerMode.LISTEN:
            listen_address = listen_address or free_listen_address()
        container = AgentContainer.build(
            flows=list(flows),
            server_address=server_address,
            blob_cache_directory=directory,
            max_concurrent_tasks=max_concurrent_tasks,
            stop_drain_seconds=stop_drain_seconds,
            worker_mode=mode,
            listen_address=listen_address or DEFAULT_LISTEN_ADDRESS,
        )
        stack.callback(container.blob_cache().close)
        client = container.client()
        stack.push_async_callback(client.close)
        await _check_reachable(client, server_address)
        running: list[dex.AsyncWorker] = []
        for _ in range(workers):
            worker = container.worker()
            serving = asyncio.create_task(worker.start())
            stack.push_async_callback(_stop, worker, serving, flows)
            await wait_worker_serving(worker, serving, timeout=serving_timeout)
            running.append(worker)
        yield AgentApp(
            server_address=server_address,
            flows=tuple(flows),
            client=client,
            container=container,
            workers=tuple(running),
        )


HEALTH_TIMEOUT = 5.0
"""Seconds the server has to answer its first health check."""


async def _check_reachable(client: dex.AsyncClient, address: str) -> None:
    """Raise `ConnectionError` unless the server answers its health check in time (before any Worker dials it)."""
    try:
        healthy = await asyncio.wait_for(client.health_check(), HEALTH_TIMEOUT)
    except TimeoutError as error:
        raise ConnectionError(f"cannot reach Dex at {address}: no answer within {HEALTH_TIMEOUT:g} s") from error
    except dex.DexServiceError as error:
        detail = " ".join(error.detail.split())
        why = "connection refused" if "connection refused" in detail.lower() else detail
        raise ConnectionError(f"cannot reach Dex at {address} ({why})") from error
    if not healthy:
        raise ConnectionError(f"Dex at {address} reports that it is not healthy")


async def _stop(worker: dex.AsyncWorker, serving: "asyncio.Task[None]", flows: Sequence[AgentSessionFlow]) -> None:
    await worker.stop()
    with contextlib.suppress(Exception):
        await serving
    for flow in flows:
        await flow.close_client()
