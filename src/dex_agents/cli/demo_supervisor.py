"""The demo's Worker children: each in its own process group, replaced after a crash, every one stopped at the end."""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from dex_agents.launch.errors import CliError
from dex_agents.testing.probes import wait_until
from dex_agents.testing.stack import READY_FILE_ENV, SERVER_ADDRESS_ENV, WorkerProcess

WORKER_MODULE = "dex_agents.cli.demo_worker"
"""The Worker child's module."""

WORKER_START_TIMEOUT = 30.0
"""Seconds a Worker child may take to serve."""


class WorkerSupervisor:
    """Starts Worker children in their own process groups, and stops every one of them."""

    def __init__(self, address: str, work_dir: Path, env: dict[str, str]) -> None:
        """Create a supervisor.

        Args:
            address: the engine address the Workers connect to.
            work_dir: where ready files and Worker logs go.
            env: extra environment of the children.
        """
        self._address = address
        self._work_dir = work_dir
        self._env = env
        self.workers: list[WorkerProcess] = []
        self.killed: set[int] = set()

    @property
    def current(self) -> WorkerProcess:
        """The Worker started last."""
        return self.workers[-1]

    async def start(self) -> WorkerProcess:
        """Start a Worker child and wait until it serves.

        Raises:
            CliError: it exited or did not serve in time.
        """
        worker = await self.spawn()
        await self.wait_serving(worker)
        return worker

    async def spawn(self) -> WorkerProcess:
        """Start a Worker child (it needs a moment to import and register; see `wait_serving`)."""
        index = len(self.workers) + 1
        ready = self._work_dir / f"worker-{index}.ready"
        log_path = self._work_dir / f"worker-{index}.log"
        env = {**os.environ, **self._env, SERVER_ADDRESS_ENV: self._address, READY_FILE_ENV: str(ready)}
        with log_path.open("wb") as log:
            spawning = asyncio.ensure_future(
                asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    WORKER_MODULE,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
            try:
                process = await asyncio.shield(spawning)
            except asyncio.CancelledError:
                # Ctrl-C while the child starts: finish starting it so that `stop_all` can stop it.
                self.workers.append(WorkerProcess(await spawning, log_path))
                raise
        worker = WorkerProcess(process, log_path)
        self.workers.append(worker)
        return worker

    async def wait_serving(self, worker: WorkerProcess) -> None:
        """Wait until ``worker`` serves.

        Raises:
            CliError: it exited or did not serve in time.
        """
        ready = self._work_dir / f"worker-{self.workers.index(worker) + 1}.ready"

        def serving() -> bool:
            if worker.returncode is not None:
                raise CliError(f"the Worker exited with code {worker.returncode}: {_last_line(worker.output())}")
            return ready.exists()

        try:
            await wait_until("the Worker to serve", serving, timeout=WORKER_START_TIMEOUT)
        except TimeoutError as error:
            raise CliError(f"the Worker did not serve within {WORKER_START_TIMEOUT:g} s") from error

    async def kill(self, worker: WorkerProcess) -> None:
        """SIGKILL ``worker``'s whole process group and reap it."""
        self.killed.add(worker.pid)
        worker.kill()
        await worker.stop()

    async def watch(self) -> None:
        """Return never; raise once a Worker exits that the supervisor did not kill.

        Raises:
            CliError: a Worker died on its own.
        """
        while True:
            for worker in self.workers:
                if worker.returncode is not None and worker.pid not in self.killed:
                    raise CliError(
                        f"the Worker (pid {worker.pid}) exited with code {worker.returncode}: "
                        f"{_last_line(worker.output())}"
                    )
            await asyncio.sleep(0.1)

    async def stop_all(self) -> None:
        """Stop every Worker still running (SIGTERM to its group, SIGKILL if it lingers)."""
        for worker in self.workers:
            await worker.stop()


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"
