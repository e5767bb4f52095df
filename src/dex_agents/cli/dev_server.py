"""``dex-agents dev-server``: the dev server on a loopback port until Ctrl-C, for people without ``dexcli``.

It keeps every session in its data dir (``--data DIR``, by default one per port
under ``$XDG_STATE_HOME/dex-agents/dev/``), so a server started again on the same
port and dir goes on with every session; ``--in-memory`` keeps nothing.
"""

import asyncio
import errno
import signal
import socket
from pathlib import Path

from rich.console import Console
from rich.text import Text

from dex_agents.cli.data import describe
from dex_agents.devserver import DevServer, StoreError
from dex_agents.launch.errors import CliError
from dex_agents.launch.output import safe_console

HOST = "127.0.0.1"
"""The dev server binds only the loopback address."""

DEFAULT_PORT = 8801
"""The port ``dexcli dev`` uses too."""


def ensure_port_free(port: int) -> None:
    """Raise a `CliError` when ``port`` on 127.0.0.1 is taken (gRPC alone might share it silently).

    The probe sets ``SO_REUSEADDR``, as the server's own bind does, so the port of a
    server that was just killed (its connections in ``TIME_WAIT``) counts as free.

    Raises:
        CliError: the port is in use or cannot be bound.
    """
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise CliError(f"port {port} on {HOST} is already in use (pick another with --port)") from error
            raise CliError(f"cannot bind {HOST}:{port}: {error.strerror}") from error


async def run_dev_server(
    console: Console, port: int, *, data_dir: Path | None = None, ready: asyncio.Event | None = None
) -> None:
    """Serve the dev server on ``port`` (0: any free port) until SIGINT or SIGTERM.

    Args:
        console: where the banner goes.
        port: the port on 127.0.0.1.
        data_dir: where it keeps its data (``None``: in memory).
        ready: set once it serves.

    Raises:
        CliError: the port is taken, or the data dir cannot be used (the message says why and what to do).
    """
    console = safe_console(console)
    ensure_port_free(port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        server = DevServer(port=port, data_dir=data_dir)
        try:
            await server.start()
        except StoreError as error:
            raise CliError(str(error)) from error
        except RuntimeError as error:
            raise CliError(f"cannot start the dev server on {HOST}:{port}: {error}") from error
        try:
            console.print(Text(f"dev server serving on {server.address}", style="bold"), soft_wrap=True)
            kept = describe(None if server.data_dir is None else Path(server.data_dir))
            restored = f"; {server.restored_runs} runs read back" if server.restored_runs else ""
            console.print(Text(f"{kept}{restored}", style="dim"), soft_wrap=True)
            console.print(
                Text(
                    f"connect Workers and Clients with server_address={server.address!r}, "
                    f"or: dex-agents watch SESSION_ID --server {server.address} --flow MODULE:FLOW_FACTORY. "
                    "Ctrl-C stops it.",
                    style="dim",
                ),
                soft_wrap=True,
            )
            console.file.flush()
            if ready is not None:
                ready.set()
            await stop.wait()
            console.print(Text("stopping the dev server", style="dim"))
        finally:
            await server.stop()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
