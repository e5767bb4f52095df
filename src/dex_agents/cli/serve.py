"""``dex-agents serve``: a Flow's sessions as a Vercel AI SDK chat backend (`dex_agents.ui.vercel_ai_app`).

With ``--server`` and ``--flow`` it talks to that Dex server (``--worker``
also serves the Flow here); with ``--demo`` it starts the dev server and the demo's
order agent with its Worker in this process, as ``console --demo`` does.
``--static DIR`` also serves a page's files at ``/`` on the same origin (the
example chat page, ``examples/chat``). It binds 127.0.0.1 and serves until
Ctrl-C.
"""

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import uvicorn
from rich.console import Console
from rich.text import Text
from starlette.applications import Starlette

from dex_agents.devserver import DevServer
from dex_agents.infrastructure.dex.app import open_agent_app
from dex_agents.infrastructure.dex.container import WorkerMode
from dex_agents.launch.engine import parse_server
from dex_agents.launch.errors import CliError, UsageError
from dex_agents.launch.loading import EXAMPLE_TARGET, load_flow
from dex_agents.launch.output import UVICORN_LOG_CONFIG
from dex_agents.ui import vercel_ai_app
from dex_agents.ui.server import asgi_config, serve_config, with_static

DEFAULT_PORT = 8820
"""``serve``'s default port."""

HOST = "127.0.0.1"
"""``serve`` binds loopback only: the chat API has no authentication of its own."""


def serve_uvicorn_config(app: Starlette, port: int) -> uvicorn.Config:
    """``serve``'s uvicorn set-up: the web console's (no proxy headers; logs through `VisibleLogFormatter`)."""
    return asgi_config(app, HOST, port, log_config=UVICORN_LOG_CONFIG)


async def run_serve(  # noqa: PLR0913 - one parameter per command option
    console: Console,
    *,
    server: str | None,
    flow_target: str | None,
    demo: bool,
    port: int,
    api_path: str,
    static: Path | None,
    serve_worker: bool,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Run ``dex-agents serve`` until cancelled (Ctrl-C).

    Raises:
        UsageError: neither ``--demo`` nor ``--server`` with ``--flow``, or ``--static`` is not a directory.
        CliError: the port cannot be bound, or Dex does not answer.
    """
    if demo and (server is not None or flow_target is not None):
        raise UsageError("--demo runs its own dev server and order agent: leave out --server and --flow")
    if not demo and (server is None or flow_target is None):
        raise UsageError("give --server HOST:PORT and --flow MODULE:FLOW_FACTORY, or --demo")
    if static is not None and not static.is_dir():
        raise UsageError(f"--static must be a directory, got {str(static)!r}")
    flow = load_flow(EXAMPLE_TARGET if demo else str(flow_target)).flow
    async with contextlib.AsyncExitStack() as stack:
        if demo:
            with console.status("starting the dev server", spinner="dots"):
                address = (await stack.enter_async_context(DevServer())).address
            described = f"the dev server in this process on {address}"
        else:
            address = parse_server(str(server))
            described = f"Dex on {address}"
        # On the embedded dev server the Worker listens (the faster mode); an external server may not reach it.
        try:
            agents = await stack.enter_async_context(
                open_agent_app(
                    [flow],
                    server_address=address,
                    workers=1 if demo or serve_worker else 0,
                    worker_mode=WorkerMode.LISTEN if demo else WorkerMode.PULL,
                    stop_drain_seconds=1,
                )
            )
        except ConnectionError as error:
            raise CliError(str(error)) from error
        app = vercel_ai_app(agents.sessions(flow), api_path=api_path)
        if static is not None:
            app = with_static(app, static)
        try:
            url = await stack.enter_async_context(serve_config(serve_uvicorn_config(app, port)))
        except OSError as error:
            raise CliError(f"serve could not listen on {HOST}:{port}: {error}") from error
        api = url + "/" + api_path.strip("/")
        console.print(Text("dex-agents serve: ", style="bold") + Text(api), soft_wrap=True)
        page = f"; the page at {url}/" if static is not None else ""
        console.print(
            Text(f"{described}; sessions of {flow.get_flow_type()}{page}. Ctrl-C stops.", style="dim"),
            soft_wrap=True,
        )
        console.file.flush()
        if ready is not None:
            ready(url)
        await asyncio.Event().wait()
