"""Configurations ``dex``, ``dex-live``, ``dex-inmemory``, ``dex-inproc``, ``dex-floor``: the agent as a session.

The agent is `benchmarks.peers.scenario.make_agent`'s, run through the Pydantic AI adapter
(`pydantic_ai_session_flow`), with ``work`` classified ``read`` (a ``CallTool`` Step, no
approval). The session keeps the history, not the caller:

- a *fresh* turn is ``start_session`` with the prompt on a new session;
- a *session* turn is ``send_user_message`` on the current session (its first turn starts it).

Either way the Client then waits until the turn's end is committed: ``wait_for_turn_end``
blocks on the ``TURNS_ENDED`` Attribute (one ``WaitForAttribute`` long poll), as the
peers' callers wait for ``agent.run`` to return. It reads no messages: the peers' callers
hold theirs in memory, a session's are stored and reading them is one more query (bench.py's
step check reads each configuration's record of a turn). ``dex-live`` instead follows every
live event of the turn with ``read_agent_event`` from the last resume token (no polling)
until ``turn_completed``, as a chat UI does; at that moment the turn's messages are being
committed by the last ``RunModel``, and the CPU accounting of bench.py charges that tail to
the turn (see ``docs/benchmarks.md``).

- ``dex``: the dev server on a SQLite data dir (``python -m benchmarks.peers.devserver_process --data DIR``,
  i.e. ``dex_agents.devserver`` plus a CPU probe: every Step completion on disk before it is acted on,
  as DBOS keeps its SQLite file) and the dex Worker (``python -m benchmarks.peers.dex_worker``, i.e.
  ``run_agent_worker``) each in its own child process; the Client in the worker process. Its
  descriptions record the data dir's bytes (``db_bytes``).
- ``dex-inmemory``: ``dex`` with the dev server in memory (it keeps nothing), beside it.
- ``dex-live``: ``dex`` with the Client following every live event of the turn (above).
- ``dex-inproc``: the dev server (on a data dir), the ``AsyncWorker`` and the Client in the worker process.
- ``dex-floor``: ``dex`` with `benchmarks.peers.floor_runner.FloorRunner` in place of the agent: the
  same Steps, events and stored messages with no framework work (the binding's own cost).

Both use a listening Worker on a free loopback port (`WorkerMode.LISTEN`, the faster mode:
the dev server calls it once per task); ``DEX_AGENTS_WORKER_MODE=pull`` in the environment measures pull
Workers instead.
"""

import argparse
import asyncio
import collections
import os
import shutil
import sys
import tempfile
import uuid
from datetime import timedelta
from pathlib import Path
from typing import IO

import dex
from dex.dexpb import dex_pb2 as pb

from benchmarks.peers.floor_runner import build_floor_flow
from benchmarks.peers.procstat import CpuProbe, proc_mem_kib
from benchmarks.peers.runners import Describe, Runner
from benchmarks.peers.scenario import TOOL_NAME, make_agent
from benchmarks.peers.steps import DEX_TASK_SLOTS
from dex_agents import (
    AgentContainer,
    AgentEventType,
    AgentSessionClient,
    AgentSessionFlow,
    CompactionPolicy,
    ToolEffect,
    ToolPolicy,
    WorkerMode,
    wait_worker_serving,
)
from dex_agents.adapters.pydantic_ai import pydantic_ai_session_flow
from dex_agents.devserver import DATABASE_FILE
from dex_agents.infrastructure.dex.container import DEFAULT_LISTEN_ADDRESS, free_listen_address
from dex_agents.testing.devserver import EXECUTE_COMPLETED_EVENT, DevServer, read_history_events, step_history
from dex_agents.testing.stack import (
    LISTEN_ADDRESS_ENV,
    READY_FILE_ENV,
    SERVER_ADDRESS_ENV,
    WORKER_MODE_ENV,
    default_worker_mode,
)

FLOW_TYPE = "PeerBenchAgent"
MAX_CONCURRENT_TASKS = DEX_TASK_SLOTS
EVENT_WAIT = timedelta(seconds=60)
PROJECT_ROOT = Path(__file__).resolve().parents[2]


CONTEXT_BUDGET_TOKENS = 16_000
"""The bench agent's compaction budget (64 KiB of stored messages, about four turns of 5x4): the model
reads the latest summary and the messages after it, so a growing session's model calls stop growing.
The summary is the default compactor's: one request to the agent's own (scripted) model."""


FLOOR_ENV = "PEERBENCH_DEX_FLOOR"
"""Set to ``1`` in the Worker child of ``dex-floor``: it serves `benchmarks.peers.floor_runner`'s Flow."""


def build_flow(*, floor: bool = False) -> AgentSessionFlow:
    """The session Flow of the bench agent (the Worker child builds the same one); ``floor``: no framework."""
    if floor:
        return build_floor_flow(FLOW_TYPE, CompactionPolicy(context_budget_tokens=CONTEXT_BUDGET_TOKENS))
    return pydantic_ai_session_flow(
        make_agent("bench_dex"),
        flow_type=FLOW_TYPE,
        tool_policies={TOOL_NAME: ToolPolicy(ToolEffect.READ)},
        compaction=CompactionPolicy(context_budget_tokens=CONTEXT_BUDGET_TOKENS),
    )


async def describe_history(
    address: str, flow_id: str, *, model_step: str, tool_step: str
) -> tuple[list[pb.FlowHistoryEvent], Describe]:
    """Read a Flow's history from the dev server; return it and what every Dex configuration describes of it.

    The Step counts are what ``read_step_history(address, flow_id)`` returns (executions completed, by
    Step type), taken from the one read whose size is also reported.
    """
    events = await read_history_events(address, flow_id)
    steps = collections.Counter(
        entry.step_type for entry in step_history(events) if entry.event_type == EXECUTE_COMPLETED_EVENT
    )
    return events, {
        "model_steps": steps.get(model_step, 0),
        "tool_steps": steps.get(tool_step, 0),
        "recorded_steps": sum(steps.values()),
        "step_names": dict(steps),
        "history_events": len(events),
        "history_bytes": sum(event.ByteSize() for event in events),
    }


def stored_state_bytes(events: list[pb.FlowHistoryEvent]) -> tuple[int, int]:
    """Replay the history's Attribute writes; return (bytes, count) of the Attributes stored now.

    Counts key plus serialized value of every Attribute (map instances included) that the last
    write left set: what the session keeps, as opposed to the history of every write.
    """
    state: dict[str, int] = {}

    def apply(key: str, value: pb.Value) -> None:
        if value.WhichOneof("kind") in (None, "null_value"):
            state.pop(key, None)
        else:
            state[key] = len(key.encode()) + value.ByteSize()

    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "flow_started_or_continued":
            for kv in event.flow_started_or_continued.initial_start.initial_attributes:
                apply(kv.key, kv.value)
        elif kind == "step_wait_for_completed":
            for write in event.step_wait_for_completed.output.upsert_attributes:
                apply(write.key, write.value)
        elif kind == "step_execute_completed":
            for write in event.step_execute_completed.output.upsert_attributes:
                apply(write.key, write.value)
        elif kind == "rpc_execution_completed":
            for write in event.rpc_execution_completed.upsert_attributes:
                apply(write.key, write.value)
    return sum(state.values()), len(state)


def data_dir_bytes(directory: str) -> dict[str, int]:
    """``db_bytes``: what the dev server's data takes on disk (its database file and WAL; DBOS's is one file).

    ``wal_bytes`` says how much of it is the WAL, which holds page versions until SQLite checkpoints
    them into the file (every 1000 pages by default): until then the file itself stays small.
    """
    database = Path(directory) / DATABASE_FILE
    wal = database.with_name(database.name + "-wal")
    file_bytes = database.stat().st_size if database.exists() else 0
    wal_bytes = wal.stat().st_size if wal.exists() else 0
    return {"db_bytes": file_bytes + wal_bytes, "wal_bytes": wal_bytes}


class _DexRunner(Runner):
    """Turn logic shared by both dex-agents configurations."""

    def __init__(self, *, floor: bool = False, live: bool = False) -> None:
        self.floor = floor
        self.live = live
        """Whether a turn is followed through its live events (``dex-live``) rather than awaited."""
        self._turns = 0
        """Turns the current session has run."""
        self.flow = build_flow(floor=floor)
        self.address = ""
        self._container: AgentContainer | None = None
        self._client: dex.AsyncClient | None = None
        self._sessions: AgentSessionClient | None = None
        self._session_id: str | None = None
        self._token = ""
        self._cache_dir = tempfile.mkdtemp(prefix="peerbench-dex-client-")
        self.worker_mode = WorkerMode.LISTEN
        self.listen_address = DEFAULT_LISTEN_ADDRESS
        self.turn_events: collections.Counter[str] = collections.Counter()
        """Live events (Stream frames) the last followed turn wrote, by type."""

    def _choose_mode(self, args: argparse.Namespace) -> None:
        self.worker_mode = default_worker_mode()
        if self.worker_mode is WorkerMode.LISTEN:
            self.listen_address = free_listen_address()

    def _open_client(self) -> AgentSessionClient:
        self._container = AgentContainer.build(
            flows=[self.flow],
            server_address=self.address,
            blob_cache_directory=os.path.join(self._cache_dir, "client"),
            max_concurrent_tasks=MAX_CONCURRENT_TASKS,
            stop_drain_seconds=1,
            worker_mode=self.worker_mode,
            listen_address=self.listen_address,
        )
        self._client = self._container.client()
        self._sessions = AgentSessionClient(self._client, self.flow)
        return self._sessions

    async def _close_client(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._container is not None:
            self._container.blob_cache().close()

    async def _follow(self, session_id: str, token: str) -> str:
        """Read live events from ``token`` until this turn's ``turn_completed``; return the new token."""
        assert self._sessions is not None
        started = False
        self.turn_events = collections.Counter()
        while True:
            message = await self._sessions.read_agent_event(session_id, token, long_poll=EVENT_WAIT)
            token = message.resume_token
            kind = message.event.type
            self.turn_events[kind.value] += 1
            if kind == AgentEventType.TURN_STARTED:
                started = True
            elif started and kind == AgentEventType.TURN_COMPLETED:
                return token
            elif started and kind == AgentEventType.TURN_FAILED:
                raise RuntimeError(f"turn failed: {message.event.payload}")

    async def _turn_ended(self, session_id: str, turn: int, token: str) -> str:
        """Wait for the end of the session's ``turn``-th turn; return the event token to follow on from."""
        if self.live:
            return await self._follow(session_id, token)
        assert self._sessions is not None
        self.turn_events = collections.Counter()
        await self._sessions.wait_for_turn_end(session_id, f"turn-{turn}", timeout=EVENT_WAIT)
        return token

    async def fresh_turn(self, prompt: str) -> str:
        assert self._sessions is not None
        session_id = f"fresh-{uuid.uuid4()}"
        await self._sessions.start_session(session_id, prompt)
        await self._turn_ended(session_id, 1, "")
        return session_id

    async def session_turn(self, prompt: str) -> str:
        assert self._sessions is not None
        if self._session_id is None:
            self._session_id = f"session-{uuid.uuid4()}"
            self._turns = 1
            await self._sessions.start_session(self._session_id, prompt)
            self._token = await self._turn_ended(self._session_id, 1, "")
        else:
            if not await self._sessions.send_user_message(self._session_id, prompt):
                raise RuntimeError("send_user_message refused the prompt")
            self._turns += 1
            self._token = await self._turn_ended(self._session_id, self._turns, self._token)
        return self._session_id

    def reset_session(self) -> None:
        self._session_id = None
        self._token = ""
        self._turns = 0

    async def describe(self, ref: str, *, session: bool) -> Describe:
        events, described = await describe_history(self.address, ref, model_step="RunModel", tool_step="CallTool")
        state_bytes, attributes = stored_state_bytes(events)
        return {
            **described,
            "state_bytes": state_bytes,
            "state_attributes": attributes,
            "live_events": sum(self.turn_events.values()),
            "live_event_types": dict(self.turn_events),
            "worker_mode": self.worker_mode.value,
        }


class DexInProcessRunner(_DexRunner):
    """``dex-inproc``: the dev server, Worker and Client share this process and its event loop."""

    name = "dex-inproc"

    async def start(self, args: argparse.Namespace) -> None:
        self._choose_mode(args)
        self._data_dir = os.path.join(args.workdir, f"{self.name}-data-{os.getpid()}")
        shutil.rmtree(self._data_dir, ignore_errors=True)
        self._devserver = DevServer(data_dir=self._data_dir)
        await self._devserver.start()
        self.address = self._devserver.address
        self._open_client()
        assert self._container is not None
        self._worker = self._container.worker()
        self._serving = asyncio.create_task(self._worker.start())
        await wait_worker_serving(self._worker, self._serving)

    async def describe(self, ref: str, *, session: bool) -> Describe:
        described = await super().describe(ref, session=session)
        described.update(data_dir_bytes(self._data_dir))
        return described

    async def stop(self) -> None:
        await self._close_client()
        await self._worker.stop()
        await self._serving
        await self._devserver.stop()


class _Child:
    """A child process of the ``dex`` configuration, with its CPU probe and log."""

    def __init__(self, label: str, log_path: str) -> None:
        self.label = label
        self.probe = CpuProbe()
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process: asyncio.subprocess.Process | None = None

    async def spawn(
        self, module: str, *args: str, env: dict[str, str] | None = None, stdout: int | None = None
    ) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            module,
            *args,
            cwd=str(PROJECT_ROOT),
            env={**os.environ, **(env or {}), **self.probe.child_env()},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout if stdout is not None else self._log,
            stderr=self._log,
            pass_fds=self.probe.child_fds(),
        )
        self.probe.started()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def exited(self) -> int | None:
        return None if self.process is None else self.process.returncode

    async def stop(self) -> None:
        """SIGTERM this child (by its own handle), then SIGKILL after 15 s."""
        process = self.process
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 15)
            except TimeoutError:
                process.kill()
                await process.wait()
        self.probe.close()
        self._log.close()


class ChildProcesses:
    """Dev server and one Worker, child processes with CPU probe and log (``dex``, ``dex-floor``, ``sdk-floor``)."""

    def __init__(self, workdir: str, prefix: str) -> None:
        """Log to ``<workdir>/<prefix>-server.log`` and ``<workdir>/<prefix>-worker.log``."""
        self.workdir = workdir
        self.prefix = prefix
        self.server = _Child("server", os.path.join(workdir, f"{prefix}-server.log"))
        self.worker = _Child("worker", os.path.join(workdir, f"{prefix}-worker.log"))
        self.address = ""

    async def start(self, worker_module: str, worker_env: dict[str, str], *, data_dir: str | None = None) -> str:
        """Start the dev server (on ``data_dir``, else in memory), then ``worker_module``; return the address."""
        data = [] if data_dir is None else ["--data", data_dir]
        await self.server.spawn(
            "benchmarks.peers.devserver_process", "--port", "0", *data, stdout=asyncio.subprocess.PIPE
        )
        assert self.server.process is not None
        assert self.server.process.stdout is not None
        line = await asyncio.wait_for(self.server.process.stdout.readline(), 60)
        self.address = line.decode().strip()
        if not self.address.startswith("127.0.0.1:"):
            raise RuntimeError(f"the dev server did not print its address (got {line!r}); see {self.server.log_path}")
        ready = Path(self.workdir) / f"{self.prefix}-worker-{os.getpid()}.ready"
        ready.unlink(missing_ok=True)
        await self.worker.spawn(
            worker_module, env={SERVER_ADDRESS_ENV: self.address, READY_FILE_ENV: str(ready), **worker_env}
        )
        for _ in range(600):
            if ready.exists():
                return self.address
            if self.worker.exited() is not None:
                raise RuntimeError(f"the {self.prefix} Worker exited; see {self.worker.log_path}")
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the {self.prefix} Worker did not serve within 30 s; see {self.worker.log_path}")

    def cpu_marks(self) -> dict[str, float]:
        """CPU seconds so far of each child, by role."""
        return {"worker": self.worker.probe.read(), "server": self.server.probe.read()}

    def memory(self) -> dict[str, dict[str, int]]:
        """Peak and current RSS of each child, by role."""
        return {"worker": proc_mem_kib(self.worker.pid), "server": proc_mem_kib(self.server.pid)}

    def pids(self) -> dict[str, int]:
        """Process IDs, by role."""
        return {"worker": self.worker.pid, "server": self.server.pid}

    async def stop(self) -> None:
        """Stop the Worker, then the server (docs/dev-server.md)."""
        await self.worker.stop()
        await self.server.stop()


class ChildProcessesRunner(Runner):
    """A runner whose engine is `ChildProcesses` (``self._children``): CPU, memory and PIDs come from there."""

    _children: ChildProcesses

    def cpu_marks(self) -> dict[str, float]:
        return self._children.cpu_marks()

    def memory(self) -> dict[str, dict[str, int]]:
        return self._children.memory()

    def pids(self) -> dict[str, int]:
        return self._children.pids()


class DexProcessRunner(ChildProcessesRunner, _DexRunner):
    """``dex``: the dev server on its SQLite data dir and the Worker in their own child processes; the Client here.

    ``dex-inmemory`` (``in_memory=True``): the same with the dev server in memory (``--in-memory``).
    ``dex-live`` (``live=True``): ``dex`` with the Client following the turn's live events.
    ``dex-floor`` (``floor=True``): ``dex`` serving `benchmarks.peers.floor_runner.FloorRunner`.
    Its descriptions record the data dir's bytes (``db_bytes``, as DBOS records its SQLite file).
    """

    def __init__(self, *, floor: bool = False, in_memory: bool = False, live: bool = False) -> None:
        super().__init__(floor=floor, live=live)
        self.name = "dex-floor" if floor else ("dex-inmemory" if in_memory else ("dex-live" if live else "dex"))
        self._data_dir: str | None = None
        self._in_memory = in_memory

    async def start(self, args: argparse.Namespace) -> None:
        self._choose_mode(args)
        self._children = ChildProcesses(args.workdir, self.name)
        if not self._in_memory:
            self._data_dir = os.path.join(args.workdir, f"{self.name}-data-{os.getpid()}")
            shutil.rmtree(self._data_dir, ignore_errors=True)
        self.address = await self._children.start(
            "benchmarks.peers.dex_worker",
            {
                WORKER_MODE_ENV: self.worker_mode.value,
                LISTEN_ADDRESS_ENV: self.listen_address,
                FLOOR_ENV: "1" if self.floor else "",
            },
            data_dir=self._data_dir,
        )
        self._open_client()

    async def describe(self, ref: str, *, session: bool) -> Describe:
        described = await super().describe(ref, session=session)
        if self._data_dir is not None:
            described.update(data_dir_bytes(self._data_dir))
        return described

    async def stop(self) -> None:
        await self._close_client()
        await self._children.stop()
