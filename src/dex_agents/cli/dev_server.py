"""``dex-agents dev-server``: the dev server on a loopback port until Ctrl-C, for people without ``dexcli``."""

import asyncio
import errno
import signal
import socket

from rich.console import Console
from rich.text import Text

from dex_agents.cli.errors import CliError
from dex_agents.cli.output import safe_console
from dex_agents.devserver import DevServer

HOST = "127.0.0.1"
"""The dev server binds only the loopback address."""

DEFAULT_PORT = 8801
"""The port ``dexcli dev`` uses too."""


def ensure_port_free(port: int) -> None:
    """Raise a `CliError` when ``port`` on 127.0.0.1 is taken (gRPC alone might share it silently).

    Raises:
        CliError: the port is in use or cannot be bound.
    """
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise CliError(f"port {port} on {HOST} is already in use (pick another with --port)") from error
            raise CliError(f"cannot bind {HOST}:{port}: {error.strerror}") from error


async def run_dev_server(console: Console, port: int, *, ready: asyncio.Event | None = None) -> None:
    """Serve the dev server on ``port`` (0: any free port) until SIGINT or SIGTERM."""
    console = safe_console(console)
    ensure_port_free(port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        server = DevServer(port=port)
        try:
            await server.start()
        except RuntimeError as error:
            raise CliError(f"cannot start the dev server on {HOST}:{port}: {error}") from error
        try:
            console.print(Text(f"dev server serving on {server.address}", style="bold"), soft_wrap=True)
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
