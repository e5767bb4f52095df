"""A pull Worker for the test Flows, run as a child process so a test can SIGKILL it.

Usage: ``python -m tests.integration.devserver.worker_main <server address> <cache dir>``.
Prints ``ready`` once every queue is registered; SIGTERM stops it gracefully.
"""

import asyncio
import signal
import sys
from pathlib import Path

import dex

from tests.integration.devserver.flows import make_flows, make_registry
from tests.integration.devserver.support import open_cache, worker_options


async def _run(address: str, cache_dir: str) -> None:
    registry = make_registry(make_flows())
    cache = open_cache(Path(cache_dir))
    worker = dex.AsyncWorker(registry, cache, worker_options(address))
    loop = asyncio.get_running_loop()
    stopping: set[asyncio.Task[None]] = set()
    loop.add_signal_handler(signal.SIGTERM, lambda: stopping.add(asyncio.ensure_future(worker.stop())))
    task = asyncio.create_task(worker.start())
    await worker.wait_pull_registered(timeout=30)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await task
    await asyncio.gather(*stopping)
    cache.close()


if __name__ == "__main__":
    asyncio.run(_run(sys.argv[1], sys.argv[2]))
