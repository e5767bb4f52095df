"""The chat backend on the dev server with an in-process Worker, served on a free loopback port, and the pinned AI SDK.

`chat_stack` runs the dev server, a Worker for the Flow and `vercel_ai_app` (with
``examples/chat`` as its static page) in the test's event loop. `AI_MODULE`
is the pinned ``ai`` package that ``make`` installs with ``npm ci`` from the
example's committed ``package-lock.json``; `node_command` fails the test
(never skips it) when Node or the package is missing.
"""

import contextlib
import io
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
from rich.console import Console

from dex_agents.cli.engine import open_engine
from dex_agents.infrastructure.dex.client import AgentSessionClient
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.ui import vercel_ai_app
from dex_agents.ui.server import serve_asgi, with_static

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "chat"
AI_MODULE = EXAMPLE / "node_modules" / "ai" / "dist" / "index.js"
"""The ``ai`` package's entry point, installed by ``make`` (``npm ci`` in ``examples/chat``)."""


@attrs.frozen(kw_only=True)
class ChatStack:
    """A running chat backend and what it talks to."""

    url: str
    """The base URL: the page at ``/``, the API at ``/api/chat``."""
    sessions: AgentSessionClient


@contextlib.asynccontextmanager
async def chat_stack(flow: AgentSessionFlow) -> AsyncIterator[ChatStack]:
    """Run the dev server, a Worker for ``flow`` and the chat backend on 127.0.0.1 while the block runs."""
    quiet = Console(file=io.StringIO())
    async with open_engine(None, [flow], quiet) as engine, engine.worker():
        sessions = AgentSessionClient(engine.client, flow)
        app = with_static(vercel_ai_app(sessions), EXAMPLE)
        async with serve_asgi(app, "127.0.0.1", 0) as url:
            yield ChatStack(url=url, sessions=sessions)


def node_command(*args: str) -> list[str]:
    """The command running Node with ``args``; raises when Node or the pinned ``ai`` package is missing."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not on PATH: the chat client tests need Node.js (`make check` fails without it)")
    if not AI_MODULE.exists():
        raise RuntimeError(f"{AI_MODULE} is missing: run `make node-deps` (npm ci in examples/chat)")
    return [node, *args]
