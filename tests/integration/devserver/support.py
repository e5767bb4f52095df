"""Helpers for the dev server tests: an in-process Worker and Client against a ``DevServer``."""

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import dex

from dex_agents.testing.devserver import DevServer
from tests.integration.devserver.flows import GATE_DIR_ENV

Predicate = Callable[[], bool]


def worker_options(address: str, *, max_tasks: int = 16) -> dex.WorkerOptions:
    """The options a pull Worker needs against the dev server."""
    return dex.WorkerOptions(
        server_address=address,
        pull=dex.PullWorkerOptions(max_concurrent_tasks=max_tasks, stop_drain_timeout=timedelta(seconds=1)),
    )


def open_cache(directory: Path) -> dex.BlobCache:
    """Open a small BlobCache in ``directory`` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    return dex.open_blob_cache(dex.BlobCacheConfig(str(directory), 8 * 1024 * 1024))


@contextlib.asynccontextmanager
async def running_worker(
    registry: dex.Registry, address: str, cache_dir: Path, *, max_tasks: int = 16
) -> AsyncIterator[dex.AsyncWorker]:
    """Run a pull-mode ``AsyncWorker`` until the block ends."""
    cache = open_cache(cache_dir)
    worker = dex.AsyncWorker(registry, cache, worker_options(address, max_tasks=max_tasks))
    task = asyncio.create_task(worker.start())
    try:
        await worker.wait_pull_registered(timeout=10)
        yield worker
    finally:
        await worker.stop()
        await task
        cache.close()


@contextlib.asynccontextmanager
async def running_client(registry: dex.Registry, address: str, cache_dir: Path) -> AsyncIterator[dex.AsyncClient]:
    """Open an ``AsyncClient`` until the block ends."""
    cache = open_cache(cache_dir)
    try:
        async with dex.AsyncClient(registry, cache, dex.ClientOptions(server_address=address)) as client:
            yield client
    finally:
        cache.close()


@dataclass
class Stack:
    """A dev server with one in-process Worker and one Client."""

    devserver: DevServer
    worker: dex.AsyncWorker
    client: dex.AsyncClient


async def wait_until(predicate: Predicate, within: float = 10.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it holds or the real-time deadline passes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() >= deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


class WorkerProcess:
    """The test Flows' pull Worker in a child process (``worker_main``)."""

    def __init__(self, address: str, cache_dir: Path, gate_dir: Path) -> None:
        self._address = address
        self._cache_dir = cache_dir
        cache_dir.mkdir(parents=True, exist_ok=True)
        self._gate_dir = gate_dir
        self.process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self, within: float = 30.0) -> None:
        env = {**os.environ, GATE_DIR_ENV: str(self._gate_dir)}
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.integration.devserver.worker_main",
            self._address,
            str(self._cache_dir),
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), within)
        if line.strip() != b"ready":
            await self.stop()
            raise RuntimeError(f"Worker process did not start: {line!r}")

    async def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def stop(self, grace_seconds: float = 15.0) -> None:
        process = self.process
        if process is None:
            return
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), grace_seconds)
            except TimeoutError:
                process.kill()
                await process.wait()
        if process.stdout is not None:
            await process.stdout.read()
