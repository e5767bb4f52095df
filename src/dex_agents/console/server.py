"""``dex-agents console``: serve the web console on uvicorn, against a Dex server or the in-process demo.

`run_console` connects to Dex (`dex_agents.launch.engine.open_engine`), or with
``demo`` starts the dev server in this process and the demo's order agent Worker
beside it, then serves `build_console_app` until Ctrl-C. `serve_console`
runs any console app on a port for as long as a block runs (the tests use
it): it binds the socket itself first, so a busy port is one line
(`CliError`), not a server's traceback, and with `TlsFiles` serves HTTPS
(uvicorn's own TLS; the certificate and key are loaded before anything
starts, so a bad file is one line too). The session index defaults to
``$XDG_STATE_HOME/dex-agents/sessions.sqlite`` (``~/.local/state/...``), in a
folder of its user only; the demo keeps its own beside its dev server's data
(``$XDG_STATE_HOME/dex-agents/console-demo/`` by default), so it lists its
sessions again after a restart, or in a temporary directory with ``--in-memory``.

The token (`read_token`) comes from ``--token-file`` or
``$DEX_AGENTS_CONSOLE_TOKEN``: a command line is readable by every user of
the machine (``ps``), so the console takes no token on its own.
"""

import asyncio
import contextlib
import os
import socket
import ssl
import stat
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import attrs
import uvicorn
from rich.console import Console
from rich.text import Text
from starlette.types import ASGIApp

from dex_agents.console.app import ConsoleBackend, build_console_app
from dex_agents.console.security import TOKEN_ENV, ConsoleConfigError, ConsoleSecurity, is_loopback
from dex_agents.infrastructure.dex.client import AgentSessionClient
from dex_agents.infrastructure.dex.session_index import FOLDER_MODE, SessionIndex, SessionIndexError
from dex_agents.launch.demo import DEMO_FLOW, DEMO_PROMPT
from dex_agents.launch.engine import open_engine
from dex_agents.launch.errors import CliError, UsageError
from dex_agents.launch.loading import load_flow
from dex_agents.launch.output import UVICORN_LOG_CONFIG, safe_console

DEFAULT_HOST = "127.0.0.1"
"""The console binds loopback unless told otherwise."""

DEFAULT_PORT = 8810
"""The console's default port."""

INDEX_ENV = "DEX_AGENTS_SESSION_INDEX"
"""Overrides where the session index lives."""


@attrs.frozen(kw_only=True)
class TlsFiles:
    """The console's TLS certificate chain and private key (PEM files)."""

    cert: Path
    """The certificate (chain)."""
    key: Path
    """Its private key."""

    @classmethod
    def of(cls, cert: Path | None, key: Path | None) -> "TlsFiles | None":
        """Both files or neither.

        Raises:
            UsageError: only one was given, or they do not load as a certificate and its key.
        """
        if cert is None and key is None:
            return None
        if cert is None or key is None:
            raise UsageError("--tls-cert and --tls-key go together: give both, or neither")
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as error:
            raise UsageError(f"the TLS certificate {cert} and key {key} do not load: {error}") from error
        return cls(cert=cert, key=key)


def default_index_path() -> Path:
    """``$DEX_AGENTS_SESSION_INDEX``, else ``$XDG_STATE_HOME/dex-agents/sessions.sqlite``."""
    configured = os.environ.get(INDEX_ENV)
    if configured:
        return Path(configured)
    return state_index_path()


def state_index_path() -> Path:
    """``$XDG_STATE_HOME/dex-agents/sessions.sqlite`` (``~/.local/state/...``): the index's own folder."""
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "dex-agents" / "sessions.sqlite"


def read_token(token_file: Path | None) -> str | None:
    """The console's token: the first line of ``token_file``, else ``$DEX_AGENTS_CONSOLE_TOKEN``, else ``None``.

    Raises:
        UsageError: the file cannot be read or is empty.
    """
    if token_file is None:
        return os.environ.get(TOKEN_ENV) or None
    try:
        text = token_file.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as error:
        raise UsageError(f"cannot read the token file {token_file}: {error}") from error
    token = text.strip()
    if not token:
        raise UsageError(f"the token file {token_file} is empty")
    return token


LOG_CONFIG = UVICORN_LOG_CONFIG
"""uvicorn's logging: what it logs (a traceback quotes the request that failed) shows control characters visibly."""


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: Ctrl-C cancels the command's coroutine, which stops the server."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (0: any free port), as uvicorn would bind it.

    Raises:
        CliError: the address cannot be bound (the port is busy, say).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError as error:
        sock.close()
        reason = error.strerror or str(error)
        raise CliError(f"the console cannot listen on {host}:{port}: {reason}") from None
    return sock


@contextlib.asynccontextmanager
async def serve_console(
    app: ASGIApp, host: str, port: int, *, tls: TlsFiles | None = None, sock: socket.socket | None = None
) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` (0: any free port), or on ``sock`` bound already, while the block runs.

    Yields the console's base URL. The socket is closed at the end.

    Raises:
        CliError: the port cannot be bound, or the server does not start.
    """
    sock = sock or bind_socket(host, port)
    config = uvicorn.Config(
        app,
        log_level="warning",
        log_config=LOG_CONFIG,
        lifespan="off",
        timeout_graceful_shutdown=1,
        access_log=False,
        # The client address and scheme are the connection's: no header may name others (throttling is per client).
        proxy_headers=False,
        ssl_certfile=None if tls is None else str(tls.cert),
        ssl_keyfile=None if tls is None else str(tls.key),
    )
    server = _Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if serving.done():
                error = serving.exception()
                raise CliError(f"the console could not start on {host}:{port}: {error}")
            await asyncio.sleep(0.02)
        bound = sock.getsockname()
        shown_host = f"[{host.strip('[]')}]" if ":" in host else host
        yield f"{'https' if tls else 'http'}://{shown_host}:{bound[1]}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, SystemExit, Exception):
            await serving
        sock.close()


def _private_folder(path: Path) -> None:
    """Make the index's own folder (`state_index_path`) its user's only (an older version made it 0755)."""
    with contextlib.suppress(OSError):
        found = path.stat()
        if found.st_uid == os.geteuid() and stat.S_IMODE(found.st_mode) & 0o077:
            path.chmod(FOLDER_MODE)


async def run_console(  # noqa: PLR0913 - one parameter per command option
    console: Console,
    *,
    server: str | None,
    flow_target: str | None,
    demo: bool,
    host: str,
    port: int,
    token: str | None = None,
    token_file: Path | None = None,
    tls: TlsFiles | None = None,
    index_path: Path | None,
    serve_worker: bool,
    ready: Callable[[str], None] | None = None,
    data_dir: Path | None = None,
) -> None:
    """Run ``dex-agents console`` until cancelled (Ctrl-C).

    ``token`` (for programs that call this, never from a command line) wins over ``token_file``, which wins over
    ``$DEX_AGENTS_CONSOLE_TOKEN``.

    Raises:
        UsageError: neither ``--demo`` nor ``--server`` with ``--flow``, an unsafe bind, a weak token, bad TLS files.
        CliError: the port is busy.
    """
    console = safe_console(console)
    if demo and (server is not None or flow_target is not None):
        raise UsageError("--demo runs its own dev server and order agent: leave out --server and --flow")
    if not demo and (server is None or flow_target is None):
        raise UsageError("give --server HOST:PORT and --flow MODULE:FLOW_FACTORY, or --demo")
    chosen = token if token is not None else read_token(token_file)
    if token is None and token_file is not None and stat.S_IMODE(token_file.stat().st_mode) & 0o077:
        console.print(
            Text(f"warning: other users can read the token file {token_file}: chmod 600 it", style="yellow"),
            soft_wrap=True,
        )
    try:
        security = ConsoleSecurity.for_bind(host, chosen, tls=tls is not None)
    except ConsoleConfigError as error:
        raise UsageError(str(error)) from error
    flow = load_flow(DEMO_FLOW if demo else str(flow_target)).flow
    sock = bind_socket(host, port)  # before anything starts: a busy port is one line at once
    with contextlib.closing(sock), tempfile.TemporaryDirectory(prefix="dex-agents-console-") as scratch:
        if demo:
            path = (data_dir if data_dir is not None else Path(scratch)) / "sessions.sqlite"
        else:
            path = index_path or default_index_path()
        if path == state_index_path():
            _private_folder(path.parent)  # never a folder someone named (--index, $DEX_AGENTS_SESSION_INDEX)
        try:
            index = SessionIndex(path)
        except SessionIndexError as error:
            raise CliError(str(error)) from error
        try:
            async with contextlib.AsyncExitStack() as stack:
                engine = await stack.enter_async_context(
                    open_engine(None if demo else server, [flow], console, data_dir=data_dir)
                )
                if demo or serve_worker:
                    await stack.enter_async_context(engine.worker())
                sessions = AgentSessionClient(engine.client, flow, session_index=index)
                backend = ConsoleBackend(sessions=sessions, index=index, suggested_message=DEMO_PROMPT if demo else "")
                app = build_console_app(backend, security)
                url = await stack.enter_async_context(serve_console(app, host, port, tls=tls, sock=sock))
                opened = f"{url}/?token=..." if security.token else url
                console.print(Text("dex-agents console: ", style="bold") + Text(opened), soft_wrap=True)
                console.print(
                    Text(
                        f"{engine.description}; sessions of {flow.get_flow_type()} listed from {path}. Ctrl-C stops.",
                        style="dim",
                    ),
                    soft_wrap=True,
                )
                if tls is None and not is_loopback(host):
                    console.print(
                        Text(
                            "warning: plain HTTP beyond loopback: the token and its cookie cross the network in "
                            "clear; serve it with --tls-cert and --tls-key",
                            style="yellow",
                        ),
                        soft_wrap=True,
                    )
                console.file.flush()
                if ready is not None:
                    ready(url)
                await asyncio.Event().wait()
        finally:
            index.close()
