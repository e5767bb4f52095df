"""``dex-agents console``: serve the web console on uvicorn, against a Dex server or the in-process demo.

`run_console` connects to Dex (`dex_agents.cli.engine.open_engine`), or with
``demo`` starts the dev server in this process and the demo's order agent Worker
beside it, then serves `build_console_app` until Ctrl-C. `serve_console`
runs any console app on a port for as long as a block runs (the tests use
it). The session index defaults to ``$XDG_STATE_HOME/dex-agents/sessions.sqlite``
(``~/.local/state/...``); the demo keeps its own in a temporary directory,
since its dev server forgets every session when it stops.
"""

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import uvicorn
from rich.console import Console
from rich.text import Text
from starlette.types import ASGIApp

from dex_agents.cli.demo import PROMPT
from dex_agents.cli.engine import open_engine
from dex_agents.cli.errors import CliError, UsageError
from dex_agents.cli.loading import load_flow
from dex_agents.console.app import ConsoleBackend, build_console_app
from dex_agents.console.security import ConsoleConfigError, ConsoleSecurity
from dex_agents.infrastructure.dex.client import AgentSessionClient
from dex_agents.infrastructure.dex.session_index import SessionIndex

DEFAULT_HOST = "127.0.0.1"
"""The console binds loopback unless told otherwise."""

DEFAULT_PORT = 8810
"""The console's default port."""

INDEX_ENV = "DEX_AGENTS_SESSION_INDEX"
"""Overrides where the session index lives."""

DEMO_FLOW = "dex_agents.cli.order_agent:build_order_flow"
"""The demo's ``MODULE:FLOW_FACTORY``."""


def default_index_path() -> Path:
    """``$DEX_AGENTS_SESSION_INDEX``, else ``$XDG_STATE_HOME/dex-agents/sessions.sqlite``."""
    configured = os.environ.get(INDEX_ENV)
    if configured:
        return Path(configured)
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "dex-agents" / "sessions.sqlite"


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: Ctrl-C cancels the command's coroutine, which stops the server."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serve_console(app: ASGIApp, host: str, port: int) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` (0: any free port) while the block runs; yield its base URL.

    Raises:
        CliError: the port cannot be bound.
    """
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, access_log=False
    )
    server = _Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            raise CliError(f"the console could not listen on {host}:{port}")
        await asyncio.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()
    shown_host = f"[{host}]" if ":" in host else host
    try:
        yield f"http://{shown_host}:{bound[1]}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await serving


async def run_console(
    console: Console,
    *,
    server: str | None,
    flow_target: str | None,
    demo: bool,
    host: str,
    port: int,
    token: str | None,
    index_path: Path | None,
    serve_worker: bool,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Run ``dex-agents console`` until cancelled (Ctrl-C).

    Raises:
        UsageError: neither ``--demo`` nor ``--server`` with ``--flow``, or an unsafe bind.
    """
    if demo and (server is not None or flow_target is not None):
        raise UsageError("--demo runs its own dev server and order agent: leave out --server and --flow")
    if not demo and (server is None or flow_target is None):
        raise UsageError("give --server HOST:PORT and --flow MODULE:FLOW_FACTORY, or --demo")
    try:
        security = ConsoleSecurity.for_bind(host, token)
    except ConsoleConfigError as error:
        raise UsageError(str(error)) from error
    flow = load_flow(DEMO_FLOW if demo else str(flow_target)).flow
    with tempfile.TemporaryDirectory(prefix="dex-agents-console-") as scratch:
        path = Path(scratch) / "sessions.sqlite" if demo else (index_path or default_index_path())
        index = SessionIndex(path)
        try:
            async with contextlib.AsyncExitStack() as stack:
                engine = await stack.enter_async_context(open_engine(None if demo else server, [flow], console))
                if demo or serve_worker:
                    await stack.enter_async_context(engine.worker())
                sessions = AgentSessionClient(engine.client, flow, session_index=index)
                backend = ConsoleBackend(sessions=sessions, index=index, suggested_message=PROMPT if demo else "")
                app = build_console_app(backend, security)
                url = await stack.enter_async_context(serve_console(app, host, port))
                opened = f"{url}/?token=..." if security.token else url
                console.print(Text("dex-agents console: ", style="bold") + Text(opened), soft_wrap=True)
                console.print(
                    Text(
                        f"{engine.description}; sessions of {flow.get_flow_type()} listed from {path}. Ctrl-C stops.",
                        style="dim",
                    ),
                    soft_wrap=True,
                )
                console.file.flush()
                if ready is not None:
                    ready(url)
                await asyncio.Event().wait()
        finally:
            index.close()
