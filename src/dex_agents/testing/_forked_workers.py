"""Worker children forked from one warm interpreter per test process (`dex_agents.testing._worker_zygote`).

`start_child` starts ``python -m module`` as a child of the zygote: what the
child sees (its session and process group, working directory, environment,
stdin from ``/dev/null``, stdout and stderr to its log) is what
``asyncio.create_subprocess_exec(sys.executable, "-m", module, ...)`` gives it,
without paying for the imports again. The `ForkedProcess` it returns has the
``pid``, ``returncode`` and ``wait()`` of an asyncio subprocess; it works from
any event loop (tests run one per case), because a thread reads the zygote's
answers.

``DEX_AGENTS_TEST_FORK_WORKERS=0`` turns it off (every child a fresh interpreter).
"""

import asyncio
import atexit
import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO

FORK_WORKERS_ENV = "DEX_AGENTS_TEST_FORK_WORKERS"
"""``0`` starts every Worker child as a fresh interpreter instead of forking it from the zygote."""


def fork_workers_enabled() -> bool:
    """Whether Worker children are forked from the zygote (the default)."""
    return os.environ.get(FORK_WORKERS_ENV, "1").strip() not in ("0", "false", "no")


def wait_or_kill(process: subprocess.Popen[bytes], *, timeout: float) -> None:
    """Wait up to ``timeout`` seconds for ``process`` to exit, else SIGKILL it and reap it."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class ForkedProcess:
    """A child of the zygote, as the parts of ``asyncio.subprocess.Process`` the test stacks use."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._ended = threading.Event()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    async def wait(self) -> int:
        """Wait until the child ended; return its exit code (negative: the signal that ended it)."""
        while not self._ended.is_set():  # noqa: ASYNC110 - set by the reader thread, not by this event loop
            await asyncio.sleep(0.02)
        assert self.returncode is not None
        return self.returncode


class _Zygote:
    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "dex_agents.testing._worker_zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            start_new_session=True,
        )
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._stdin: IO[bytes] = self._process.stdin
        self._stdout: IO[bytes] = self._process.stdout
        self._lock = threading.Lock()
        self._children: dict[int, ForkedProcess] = {}
        self._early_exits: dict[int, int] = {}
        self._started: list[int] = []
        self._answer = threading.Condition(self._lock)
        ready = json.loads(self._stdout.readline() or b"null")
        if not isinstance(ready, dict) or "ready" not in ready:
            raise RuntimeError("the Worker zygote did not start (run with DEX_AGENTS_TEST_FORK_WORKERS=0 to see why)")
        self._reader = threading.Thread(target=self._read, name="worker-zygote-reader", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def _read(self) -> None:
        for line in self._stdout:
            answer = json.loads(line)
            with self._answer:
                if "pid" in answer:
                    self._started.append(answer["pid"])
                    self._answer.notify_all()
                elif "exit" in answer:
                    child = self._children.get(answer["exit"])
                    if child is None:
                        self._early_exits[answer["exit"]] = answer["code"]
                    else:
                        child._exited(answer["code"])  # noqa: SLF001 - the zygote's own reader
        with self._answer:  # the zygote died: no child of it will be reported again
            for child in self._children.values():
                if child.returncode is None:
                    child._exited(-9)  # noqa: SLF001
            self._answer.notify_all()

    def start(self, module: str, *, cwd: Path, env: Mapping[str, str], log: Path) -> ForkedProcess:
        request = {"module": module, "cwd": str(cwd), "env": dict(env), "log": str(log)}
        with self._answer:
            self._stdin.write(json.dumps(request).encode() + b"\n")
            self._stdin.flush()
            while not self._started:
                if not self.alive:
                    raise RuntimeError("the Worker zygote ended")
                self._answer.wait(1.0)
            pid = self._started.pop(0)
            child = ForkedProcess(pid)
            self._children[pid] = child
            early = self._early_exits.pop(pid, None)
            if early is not None:
                child._exited(early)  # noqa: SLF001
            return child

    def close(self) -> None:
        with self._lock:
            if self._stdin.closed:
                return
            self._stdin.close()
        wait_or_kill(self._process, timeout=5)
        self._reader.join(timeout=5)  # it ends at the zygote's end of output
        self._stdout.close()


_zygote: _Zygote | None = None
_zygote_lock = threading.Lock()


def _the_zygote() -> _Zygote:
    global _zygote
    with _zygote_lock:
        if _zygote is None or not _zygote.alive:
            _zygote = _Zygote()
            atexit.register(_zygote.close)
        return _zygote


async def start_child(module: str, *, cwd: Path, env: Mapping[str, str], log: Path) -> ForkedProcess:
    """Fork ``python -m module`` from the zygote (started on first use) with this cwd, env and log."""
    zygote = await asyncio.to_thread(_the_zygote)
    return await asyncio.to_thread(zygote.start, module, cwd=cwd, env=env, log=log)
