"""Cross-process test probes: gates, an invocation log, and polling with a deadline.

A tool running in a Worker child process marks a `FileGate` and waits for its
release; the test waits until the gate is reached and then kills the Worker
or releases the gate. `InvocationLog` counts real model and tool calls across
Worker processes (one JSON line per call, appended atomically). `wait_until`
polls with a deadline instead of sleeping for a guessed time.
"""

import asyncio
import inspect
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, overload

import attrs
import dex
import grpc  # type: ignore[import-untyped]

from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.infrastructure.dex.client import AgentSessionClient

T = TypeVar("T")

DEFAULT_WAIT = 20.0
"""Seconds `wait_until` waits by default."""

_POLL = 0.01


@overload
async def wait_until(
    description: str, probe: Callable[[], Awaitable[T | None]], *, timeout: float = DEFAULT_WAIT
) -> T: ...


@overload
async def wait_until(description: str, probe: Callable[[], T | None], *, timeout: float = DEFAULT_WAIT) -> T: ...


async def wait_until(description: str, probe: Callable[[], Any], *, timeout: float = DEFAULT_WAIT) -> Any:
    """Poll ``probe`` until it returns a truthy value, and return that value.

    Raises:
        TimeoutError: ``probe`` stayed falsy for ``timeout`` seconds; the message names ``description``.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {description}")
        await asyncio.sleep(_POLL)


async def wait_for_agent_snapshot(
    sessions: AgentSessionClient,
    session_id: str,
    probe: Callable[[AgentSnapshot], T | None],
    *,
    description: str,
    timeout: float = DEFAULT_WAIT,
    across_restarts: bool = False,
) -> T:
    """Poll the session's snapshot until ``probe`` returns a truthy value, and return it.

    With ``across_restarts`` a poll the engine cannot answer (it is restarting; the
    Client reconnects with back-off) counts as not yet.
    """

    async def check() -> T | None:
        try:
            snapshot = await sessions.get_agent_snapshot(session_id)
        except dex.DexServiceError as error:
            if across_restarts and engine_unreachable(error):
                return None
            raise
        return probe(snapshot)

    return await wait_until(description, check, timeout=timeout)


def engine_unreachable(error: dex.DexServiceError) -> bool:
    """Whether a Client call failed because the engine did not answer (down, restarting, or rereading its data)."""
    return error.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def session_is_idle(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    """A `wait_for_agent_snapshot` probe: the snapshot once it is idle (`AgentSnapshot.is_idle`) after a turn."""
    if snapshot.is_idle and snapshot.state is not None and snapshot.state.turn_count >= 1:
        return snapshot
    return None


@attrs.frozen
class FileGate:
    """A named gate in a directory shared by the test and its Worker processes."""

    directory: Path = attrs.field(converter=Path)
    """Where the gate's marker files live."""
    name: str
    """The gate's name (a file-name-safe word)."""

    @property
    def _reached(self) -> Path:
        return self.directory / f"{self.name}.reached"

    @property
    def _released(self) -> Path:
        return self.directory / f"{self.name}.released"

    def mark_reached(self) -> None:
        """Say (from the Worker) that the gate is reached."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._reached.touch()

    def is_reached(self) -> bool:
        """Whether a Worker reached the gate."""
        return self._reached.exists()

    def release(self) -> None:
        """Let (from the test) every waiter through."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._released.touch()

    async def wait_for_release(self, *, timeout: float = 120.0) -> None:
        """Mark the gate reached, then wait (in the Worker) until the test releases it."""
        self.mark_reached()
        await wait_until(f"release of gate {self.name!r}", self._released.exists, timeout=timeout)

    async def wait_until_reached(self, *, timeout: float = DEFAULT_WAIT) -> None:
        """Wait (in the test) until a Worker reaches the gate."""
        await wait_until(f"gate {self.name!r} to be reached", self.is_reached, timeout=timeout)


@attrs.frozen
class InvocationLog:
    """Counts real model and tool calls across processes (JSON lines in one file)."""

    path: Path = attrs.field(converter=Path)
    """The log file."""

    def record(self, kind: str, name: str, **details: Any) -> None:
        """Append one invocation (``kind`` such as ``"model"`` or ``"tool"``)."""
        line = json.dumps({"kind": kind, "name": name, "pid": os.getpid(), **details}, sort_keys=True) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One write on an O_APPEND descriptor keeps lines whole across processes.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def entries(self) -> list[dict[str, Any]]:
        """Return every invocation, oldest first."""
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def count(self, kind: str, name: str | None = None, **details: Any) -> int:
        """Count invocations of ``kind`` (and ``name`` and each detail, when given)."""
        return sum(
            1
            for entry in self.entries()
            if entry["kind"] == kind
            and (name is None or entry["name"] == name)
            and all(entry.get(key) == value for key, value in details.items())
        )
