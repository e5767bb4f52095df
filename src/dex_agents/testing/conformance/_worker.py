"""``python -m dex_agents.testing.conformance._worker --server HOST:PORT --cache DIR``: a probe Worker child.

Runs a pull Worker for the probe Flow until killed, and prints ``ready`` on stdout
once it is registered. The redelivery probes SIGKILL it mid-task.
"""

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

import dex

from dex_agents.testing.conformance._flows import ProbeFlow, make_registry, open_cache, worker_options


async def _serve(address: str, cache_dir: Path) -> None:
    cache = open_cache(cache_dir)
    worker = dex.AsyncWorker(make_registry(ProbeFlow()), cache, worker_options(address))
    task = asyncio.create_task(worker.start())
    await worker.wait_pull_registered(timeout=30)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await task


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until killed."""
    parser = argparse.ArgumentParser(prog="python -m dex_agents.testing.conformance._worker")
    parser.add_argument("--server", required=True)
    parser.add_argument("--cache", required=True)
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.server, Path(args.cache)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
