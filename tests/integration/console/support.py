"""A console on the dev server with an in-process Worker, and a headless Chromium to look at it.

`console_stack` starts the dev server, a Worker serving the Flow, and the console
on a free loopback port (`serve_console`), all in the test's event loop.
`chromium` launches Debian's Chromium (``/usr/bin/chromium``, which ``make``
installs when it is missing) through Playwright; Playwright never downloads
a browser of its own here.
"""

import asyncio
import contextlib
import io
import os
import shutil
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import attrs
from playwright.async_api import BrowserContext, Page, async_playwright
from rich.console import Console
from starlette.types import ASGIApp, Message, Scope

from dex_agents.cli.engine import open_engine
from dex_agents.console.app import ConsoleBackend, build_console_app
from dex_agents.console.security import ConsoleSecurity
from dex_agents.console.server import serve_console
from dex_agents.infrastructure.dex.client import AgentSessionClient
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.infrastructure.dex.session_index import SessionIndex

CHROMIUM = os.environ.get("DEX_AGENTS_CHROMIUM", "/usr/bin/chromium")
"""The browser the tests drive (Debian's ``chromium`` package)."""

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
"""Flags that make Chromium quiet and self-contained in a container (root, no GPU, no network of its own)."""

ARTIFACTS = Path(os.environ.get("DEX_AGENTS_TEST_ARTIFACTS", "tmp/console-screenshots"))
"""Where the tests' screenshots go (relative to the project root)."""


@attrs.frozen(kw_only=True)
class ConsoleStack:
    """A running console and what it talks to."""

    url: str
    """The console's base URL."""
    sessions: AgentSessionClient
    """The session client the console uses."""
    index: SessionIndex
    """The console's session index."""


@attrs.frozen(kw_only=True)
class AppStack:
    """A console's ASGI app (no server) for one Flow, on the dev server serving more Flows."""

    app: ASGIApp
    """The console."""
    sessions: AgentSessionClient
    """The client of the console's Flow."""
    others: AgentSessionClient
    """A client of another Flow type on the same Dex."""
    index: SessionIndex
    """The console's session index."""


@contextlib.asynccontextmanager
async def app_stack(
    flow: AgentSessionFlow,
    other: AgentSessionFlow,
    tmp_path: Path,
    *,
    security: ConsoleSecurity | None = None,
    index: SessionIndex | None = None,
) -> AsyncIterator[AppStack]:
    """Run the dev server and a Worker for both Flows; build the console's app for ``flow`` (no HTTP server)."""
    quiet = Console(file=io.StringIO())
    index = index or SessionIndex(tmp_path / "sessions.sqlite")
    try:
        async with open_engine(None, [flow, other], quiet) as engine, engine.worker():
            sessions = AgentSessionClient(engine.client, flow, session_index=index)
            backend = ConsoleBackend(sessions=sessions, index=index)
            app = build_console_app(backend, security or ConsoleSecurity.for_bind("127.0.0.1"))
            yield AppStack(app=app, sessions=sessions, others=AgentSessionClient(engine.client, other), index=index)
    finally:
        index.close()


@attrs.frozen(kw_only=True)
class AsgiResponse:
    """What `asgi_request` got."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        """The body as text."""
        return self.body.decode("utf-8", "replace")


async def asgi_request(
    app: ASGIApp,
    method: str,
    target: bytes | str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    client: str = "127.0.0.1",
    until: bytes | None = None,
) -> AsgiResponse:
    """One request straight to the ASGI app, its path and query exactly as given (an attacker's bytes).

    A streamed answer is read until its body holds ``until`` (then the client goes away).
    """
    raw = target.encode("latin-1") if isinstance(target, str) else target
    raw_path, _, query = raw.partition(b"?")
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": raw_path.decode("latin-1"),
        "raw_path": raw_path,
        "query_string": query,
        "root_path": "",
        "server": ("127.0.0.1", 8810),
        "client": (client, 40000),
        "headers": [(k.lower().encode(), v.encode()) for k, v in {"host": "127.0.0.1:8810", **(headers or {})}.items()],
    }
    sent: list[Message] = []
    finished = asyncio.Event()
    requested = False

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        received = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        if message["type"] == "http.response.body" and (
            not message.get("more_body") or (until is not None and until in received)
        ):
            finished.set()

    task = asyncio.ensure_future(app(scope, receive, send))
    try:
        await asyncio.wait_for(finished.wait(), 30)
    finally:
        task.cancel()
        # An app that failed after its 500 re-raises, as for its server: the answer is what counts here.
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    start = next(m for m in sent if m["type"] == "http.response.start")
    return AsgiResponse(
        status=start["status"],
        headers={k.decode("latin-1"): v.decode("latin-1") for k, v in start.get("headers", [])},
        body=b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"),
    )


@contextlib.asynccontextmanager
async def console_stack(
    flow: AgentSessionFlow,
    tmp_path: Path,
    *,
    security: ConsoleSecurity | None = None,
    suggested_message: str = "",
) -> AsyncIterator[ConsoleStack]:
    """Run the dev server, a Worker for ``flow`` and the console on 127.0.0.1 while the block runs."""
    quiet = Console(file=io.StringIO())
    index = SessionIndex(tmp_path / "sessions.sqlite")
    try:
        async with open_engine(None, [flow], quiet) as engine, engine.worker():
            sessions = AgentSessionClient(engine.client, flow, session_index=index)
            backend = ConsoleBackend(sessions=sessions, index=index, suggested_message=suggested_message)
            app = build_console_app(backend, security or ConsoleSecurity.for_bind("127.0.0.1"))
            async with serve_console(app, "127.0.0.1", 0) as url:
                yield ConsoleStack(url=url, sessions=sessions, index=index)
    finally:
        index.close()


@contextlib.asynccontextmanager
async def chromium(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    """Launch headless Chromium with a fresh profile (its own ``--user-data-dir``)."""
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        raise RuntimeError(f"no Chromium at {CHROMIUM}: `make check` installs Debian's chromium package")
    profile = tmp_path / "chromium-profile"
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield context
        finally:
            await context.close()


async def screenshot(page: Page, name: str) -> Path:
    """Save a full-page screenshot under `ARTIFACTS` and return its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path


@attrs.frozen(kw_only=True)
class RawResponse:
    """What `raw_request` read."""

    status: int
    headers: dict[str, str]
    body: bytes


def _split_url(url: str) -> tuple[str, int]:
    host, _, port = url.removeprefix("http://").removeprefix("https://").rpartition(":")
    return host, int(port)


async def raw_request(
    url: str,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    tls: ssl.SSLContext | None = None,
) -> RawResponse:
    """One HTTP/1.1 request on its own connection, without cookies or any browser rule (an attacker's view).

    ``tls``: speak HTTPS, trusting what this context trusts.
    """
    host, port = _split_url(url)
    if tls is None:
        reader, writer = await asyncio.open_connection(host, port)
    else:
        reader, writer = await asyncio.open_connection(host, port, ssl=tls, server_hostname=host)
    try:
        fields = {"Host": f"{host}:{port}", "Connection": "close", "Content-Length": str(len(body)), **(headers or {})}
        lines = [f"{method} {path} HTTP/1.1", *(f"{name}: {value}" for name, value in fields.items())]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parsed = {name.lower(): value.strip() for name, _, value in (h.partition(":") for h in header_lines)}
    return RawResponse(status=int(status_line.split()[1]), headers=parsed, body=rest)


@attrs.frozen(kw_only=True)
class SseEvent:
    """One Server-Sent Event."""

    id: str | None
    event: str | None
    data: str


async def read_sse(
    url: str, path: str, *, count: int, headers: dict[str, str] | None = None, stop: str | None = None
) -> list[SseEvent]:
    """Read ``count`` ``agent`` events (or up to one whose data contains ``stop``) from an event stream."""
    host, port = _split_url(url)
    reader, writer = await asyncio.open_connection(host, port)
    events: list[SseEvent] = []
    try:
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Accept: text/event-stream"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        fields: dict[str, str] = {}
        while len(events) < count:
            raw = await asyncio.wait_for(reader.readline(), 30)
            line = raw.decode().rstrip("\r\n")
            if _is_chunk_size(line):
                continue
            if line == "":
                if fields.get("event") == "agent":
                    event = SseEvent(id=fields.get("id"), event="agent", data=fields.get("data", ""))
                    events.append(event)
                    if stop is not None and stop in event.data:
                        break
                fields = {}
                continue
            name, _, value = line.partition(":")
            if name:
                fields[name] = value.removeprefix(" ")
    finally:
        writer.close()
    return events


def _is_chunk_size(line: str) -> bool:
    """A line of the chunked transfer encoding (hex size), not of the event stream."""
    return bool(line) and ":" not in line and all(ch in "0123456789abcdefABCDEF" for ch in line)


@contextlib.asynccontextmanager
async def running_command(
    run: Callable[..., Coroutine[Any, Any, object]], **settings: object
) -> AsyncIterator[tuple[str, io.StringIO]]:
    """``run`` (`run_console`, `run_serve`) as a task with ``settings``: its URL once it says it is ready, its output.

    It is cancelled when the block ends; it failing before it is ready raises its error.
    """
    output = io.StringIO()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task: asyncio.Task[object] = asyncio.create_task(
        run(Console(file=output, width=200), ready=ready.set_result, **settings)
    )
    try:
        waiters: set[asyncio.Future[Any]] = {task, ready}
        done, _ = await asyncio.wait(waiters, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()
        assert ready in done, f"{getattr(run, '__name__', run)} did not start in time"
        yield ready.result(), output
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
