"""Serving an ASGI app on uvicorn for as long as a block runs (`serve_asgi`), and the static files of a page.

`serve_asgi` runs without uvicorn's own signal handlers: Ctrl-C cancels the
caller's coroutine, which stops the server. Its uvicorn set-up (`asgi_config`)
is the web console's: ``proxy_headers=False`` (the client address and scheme
are the connection's; no ``X-Forwarded-*`` header sent by a client may name
others) and, when given one, a logging config (``dex-agents serve`` passes
`dex_agents.launch.output.UVICORN_LOG_CONFIG`, whose formatter shows control
characters visibly; this package imports no command-line code itself).
`with_static` mounts a directory of files at ``/`` beside an app's routes
(``dex-agents serve --static``), so a page and its chat API share one origin.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from uvicorn.config import LOGGING_CONFIG


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def asgi_config(app: Starlette, host: str, port: int, *, log_config: dict[str, Any] | None = None) -> uvicorn.Config:
    """The uvicorn config `serve_asgi` runs ``app`` with; ``log_config`` ``None`` keeps uvicorn's own logging."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        log_config=LOGGING_CONFIG if log_config is None else log_config,
        lifespan="off",
        timeout_graceful_shutdown=1,
        access_log=False,
        # The client address and scheme are the connection's: no header may name others (as the web console).
        proxy_headers=False,
    )


@contextlib.asynccontextmanager
async def serve_asgi(
    app: Starlette, host: str, port: int, *, log_config: dict[str, Any] | None = None
) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` (0: any free port) while the block runs; yield its base URL.

    Raises:
        OSError: the port cannot be bound.
    """
    async with serve_config(asgi_config(app, host, port, log_config=log_config)) as url:
        yield url


@contextlib.asynccontextmanager
async def serve_config(config: uvicorn.Config) -> AsyncIterator[str]:
    """Serve what ``config`` names (`asgi_config`) while the block runs; yield its base URL.

    Raises:
        OSError: the port cannot be bound.
    """
    server = _Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            raise OSError(f"could not listen on {config.host}:{config.port}")
        await asyncio.sleep(0.02)
    port_bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{config.host}:{port_bound}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await serving


def with_static(app: Starlette, directory: Path) -> Starlette:
    """Return ``app`` with the files of ``directory`` served at ``/`` after its own routes (``index.html`` at ``/``)."""
    app.router.routes.append(Mount("/", app=StaticFiles(directory=directory, html=True, follow_symlink=True)))
    return app
