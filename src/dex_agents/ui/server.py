"""Serving an ASGI app on uvicorn for as long as a block runs (`serve_asgi`), and the static files of a page.

`serve_asgi` runs without uvicorn's own signal handlers: Ctrl-C cancels the
caller's coroutine, which stops the server. `with_static` mounts a directory
of files at ``/`` beside an app's routes (``dex-agents serve --static``), so a
page and its chat API share one origin.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serve_asgi(app: Starlette, host: str, port: int) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` (0: any free port) while the block runs; yield its base URL.

    Raises:
        OSError: the port cannot be bound.
    """
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, access_log=False
    )
    server = _Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            raise OSError(f"could not listen on {host}:{port}")
        await asyncio.sleep(0.02)
    port_bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{port_bound}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await serving


def with_static(app: Starlette, directory: Path) -> Starlette:
    """Return ``app`` with the files of ``directory`` served at ``/`` after its own routes (``index.html`` at ``/``)."""
    app.router.routes.append(Mount("/", app=StaticFiles(directory=directory, html=True, follow_symlink=True)))
    return app
