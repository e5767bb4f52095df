"""The peer benchmark's child processes: one worker per configuration, and Temporal dev servers.

Every process binds 127.0.0.1 only and is stopped by handle (the PID this
process started). A `Worker` speaks JSON lines with ``benchmarks.peers.worker``
and accounts each measured turn's CPU cycle into its `Sample`.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from typing import Any, TextIO

from benchmarks.peers.results import PROJECT_ROOT, Marks, Sample


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class WorkerFailedError(RuntimeError):
    """A configuration's worker process failed; the message says why."""


class Worker:
    """One configuration's worker process, and its CPU-cycle accounting.

    CPU *cycles*: every turn reply carries the CPU marks taken just before the turn (``marks0``).
    A measured turn's cycle runs from its ``marks0`` to the next ``marks0`` of the same worker (its
    next turn, or a ``marks`` command), so it includes what the engine still did after the caller
    saw the turn end (dex-agents commits the last ``RunModel`` after ``turn_completed``). A turn
    with ``marks_settled`` (a describing turn) ends its cycle there instead.
    """

    def __init__(self, name: str, python: str, workdir: str, temporal_address: str | None) -> None:
        cmd = [python, "-m", "benchmarks.peers.worker", name, "--workdir", workdir]
        if temporal_address:
            cmd += ["--temporal-address", temporal_address]
        self.name = name
        self.stderr_path = os.path.join(workdir, f"worker-{name}.stderr.log")
        self._stderr: TextIO = open(self.stderr_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
            cwd=str(PROJECT_ROOT),
        )
        self.ready: dict[str, Any] = {}
        self.turns = 0
        self._open: tuple[Sample, Marks, float] | None = None

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise WorkerFailedError(f"worker exited (rc={self.proc.poll()}); see {self.stderr_path}")
        msg: dict[str, Any] = json.loads(line)
        if "error" in msg:
            raise WorkerFailedError(f"{msg['error']}; see {self.stderr_path}")
        return msg

    def call(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(cmd) + "\n")
            self.proc.stdin.flush()
        except OSError as e:
            raise WorkerFailedError(f"worker gone ({e}); see {self.stderr_path}") from e
        reply = self.read()
        self._account(reply)
        return reply

    def turn(self, kind: str, k: int, m: int, *, slot: Sample | None = None, describe: bool = False) -> dict[str, Any]:
        """Run one turn; fill ``slot`` (if given) with its wall time, CPU and, later, its cycle."""
        reply = self.call(cmd=kind, k=k, m=m, describe=describe)
        self.turns += 1
        if slot is not None:
            slot["t"] = reply["t"]
            slot["cpu"] = reply["cpu"]
            if "marks_settled" in reply:
                slot["cycle"] = _cycle(reply["marks0"], reply["marks_settled"], reply["t"])
            else:
                self._open = (slot, reply["marks0"], reply["t"])
        return reply

    def close_cycle(self, settle: float = 0.2) -> None:
        """End the open cycle (after ``settle`` seconds of quiet)."""
        if self._open is not None:
            self.call(cmd="marks", settle=settle)

    def _account(self, reply: dict[str, Any]) -> None:
        marks = reply.get("marks0")
        if marks is not None and self._open is not None:
            slot, start, t = self._open
            slot["cycle"] = _cycle(start, marks, t)
            self._open = None

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(WorkerFailedError):
                self.call(cmd="quit")
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # this process's own child, by handle
                self.proc.wait()
        self._stderr.close()


def _cycle(start: Marks, end: Marks, t: float) -> dict[str, float]:
    out = {role: end[role] - start[role] for role in start if role != "wall" and role in end}
    out["span"] = end["wall"] - start["wall"]
    out["t"] = t
    return out


class TemporalServer:
    """A Temporal dev server (``temporal server start-dev``) on a free local port."""

    def __init__(self, binary: str, workdir: str, db: str, label: str, dynamic_config: list[str]) -> None:
        self.label = label
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        cmd = [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(self.port)]
        cmd += ["--log-level", "warn"]
        for kv in dynamic_config:
            cmd += ["--dynamic-config-value", kv]
        self.db_path: str | None = None
        if db == "file":
            self.db_path = os.path.join(workdir, f"temporal-{label}.db")
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(self.db_path + suffix):
                    os.remove(self.db_path + suffix)
            cmd += ["--db-filename", self.db_path]
        self.cmd = cmd
        self.log_path = os.path.join(workdir, f"temporal-{label}.log")
        self._log: TextIO = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"temporal server exited rc={self.proc.returncode}; see {self.log_path}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"temporal server did not open its port in {timeout:.0f} s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # by handle = by the PID we started
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
