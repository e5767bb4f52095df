"""``python -m dex_agents.devserver --port 0``: serve the dev server until Ctrl-C/SIGTERM.

The first line on stdout is the bound address (``127.0.0.1:<port>``); logs go to stderr.
"""

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence

from dex_agents.devserver._config import DevServerConfig
from dex_agents.devserver._data_dir import StoreError
from dex_agents.devserver._process import config_from_json
from dex_agents.devserver._server import DevServer


async def _serve(port: int, config: DevServerConfig, data_dir: str | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with DevServer(config, port=port, data_dir=data_dir) as dex:
        sys.stdout.write(f"{dex.address}\n")
        sys.stdout.flush()
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and serve until interrupted; return the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m dex_agents.devserver",
        description="The dev server: a loopback Dex server for the Python SDK's Worker and Client.",
    )
    parser.add_argument("--port", type=int, default=8801, help="port on 127.0.0.1 (0: any)")
    parser.add_argument("--config-json", default="{}", help="DevServerConfig fields as JSON (durations in s)")
    parser.add_argument("--log-level", default="WARNING", help="logging level for stderr")
    parser.add_argument("--data", default=None, metavar="DIR", help="keep everything in DIR (default: in memory)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    config = config_from_json(args.config_json)
    with contextlib.suppress(KeyboardInterrupt):
        try:
            asyncio.run(_serve(args.port, config, args.data))
        except StoreError as error:
            sys.stderr.write(f"error: {error}\n")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
