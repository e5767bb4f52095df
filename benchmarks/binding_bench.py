"""Worker-side cost of the Dex binding as the stored history grows (issue 4, item 9).

Run ``python -m benchmarks.binding_bench`` (``make bench`` runs it with the others). It
prints tables and takes about half a minute; it is not a timed test and asserts nothing.
``--worker-mode listen`` runs the same with a listening (push) Worker instead of a pull
Worker; ``--profile FILE`` runs the Worker under pyinstrument (see ``docs/performance.md``).

Set-up: the dev server runs in this process, the Worker in a child process
(``benchmarks._binding_worker``, served by `run_agent_worker` as an application would)
with the scripted agent of ``benchmarks._binding_agent``: no sleeps, so every number is
the session machinery's own cost. A stored message is about 0.45 KiB of JSON.

What is measured, and how (all inside the Worker child, see ``benchmarks._binding_worker``):

- **Per Step**: around the SDK's handler of one pull task, from the decoded task to its
  last frame queued: the CPU time of the Worker's event-loop thread ("CPU") and the
  elapsed time ("wall"). The span covers the SDK's hydration of the request, the
  ``InvocationContext``, our Step and use case, the runner, the mapping of the result to
  protobuf and the frame writes, plus whatever else the loop runs meanwhile (in pull
  mode chiefly the replacement task stream the SDK opens for every task). It leaves out
  gRPC's receive and parse of the task, whose size is shown as "task KiB".
- **RunModel** and **CallTool** at 20, 200 and 2,000 stored messages: per round, one
  fresh session per size is seeded in one turn (a ``seed`` command whose
  ``TurnCompleted`` returns the whole history), then ``--turns`` tool turns run on it
  (``AwaitUserMessage``, ``RunModel`` asking for one ``read`` tool, ``CallTool``,
  ``ResumeTurn``, ``RunModel`` completing with 3 messages: 5 Steps, +4 messages per
  turn, so a size's RunModels see its size plus at most ``4 * turns``). Sizes are
  interleaved, their order rotates every round, and the first round is a dropped warm-up.
- **Worker process CPU per Step**: all CPU of the Worker process (every thread,
  ``time.process_time``) from the start of a turn's first task (the
  ``send_user_message`` RPC) to the end of its last (the next ``wait_for`` of
  ``AwaitUserMessage``), divided by the turn's 5 Step executions (8 Worker tasks).
- **get_agent_snapshot** at 100, 1,000 and 10,000 stored messages: the Worker-side span
  of the ``get_agent_snapshot`` RPC, with the client's elapsed time for the whole
  `AgentSessionClient.get_agent_snapshot` (two RPCs) beside it. The RPC loads only the
  messages it returns, the last 200 at most: 100 returns 100, the others 200, so the
  ratio from 1,000 to 10,000 stays flat where a whole-history read would grow tenfold.
- **Single-attempt confirmation** (issue 13): on fresh sessions at 20 messages, ``tool``
  turns (a ``read`` in ``CallTool``) and ``write`` turns (a ``non_idempotent_write`` in
  ``CallSingleAttemptTool``, which reads its ``tool_call_started`` back from the Stream
  through the Worker's Client before the tool runs) alternate; the table compares the two
  Steps' wall and CPU medians: the difference is the added latency per single-attempt call.
- **Growth**: Worker process CPU per turn at turns 1..20 of fresh sessions running tool
  turns back to back, interleaved (issue 7's target: turn 20 at most 1.25x turn 1).

Ratios are against the smallest size of the same run. Medians over all samples.
"""

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import dex

from benchmarks._binding_agent import build_flow
from benchmarks._binding_worker import LISTEN_ENV, PROFILE_ENV, RECORDS_ENV
from dex_agents import AgentSessionClient, codec_registry
from dex_agents.testing import AgentTestStack

PROJECT_ROOT = Path(__file__).resolve().parents[1]
WORKER_MODULE = "benchmarks._binding_worker"
STEP_SIZES = (20, 200, 2000)
SNAPSHOT_SIZES = (100, 1_000, 10_000)
SEED_CHUNK = 5000
"""Messages seeded per turn: both a seed turn's writes and the next RunModel's load stay far below 4 MiB."""
STEPS_PER_TOOL_TURN = 5
_POLL = 0.002

Record = dict[str, Any]


class Records:
    """Reads the Worker child's task records as they are appended."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0
        self.all: list[Record] = []

    def _read(self) -> None:
        if not self._path.exists():
            return
        with self._path.open("rb") as file:
            file.seek(self._offset)
            chunk = file.read()
        complete = chunk.rfind(b"\n") + 1
        self._offset += complete
        self.all.extend(json.loads(line) for line in chunk[:complete].splitlines())

    async def wait_for(self, start: int, match: Callable[[Record], bool], timeout: float = 120.0) -> list[Record]:
        """Return the records from index ``start`` up to and including the first that ``match``."""
        deadline = time.monotonic() + timeout
        while True:
            self._read()
            for index in range(start, len(self.all)):
                if match(self.all[index]):
                    return self.all[start : index + 1]
            if time.monotonic() > deadline:
                raise TimeoutError("the Worker did not finish the task in time")
            await asyncio.sleep(_POLL)


def _turn_end(session_id: str) -> Callable[[Record], bool]:
    return lambda r: r["flow"] == session_id and r["kind"] == "wait_for" and r["name"] == "AwaitUserMessage"


class Bench:
    """Drives sessions of the bench agent and collects the Worker's records per turn."""

    def __init__(self, sessions: AgentSessionClient, records: Records) -> None:
        self.sessions = sessions
        self.records = records
        self._counter = 0

    def new_id(self, label: str) -> str:
        self._counter += 1
        return f"{label}-{self._counter}"

    async def start(self, session_id: str, command: str) -> list[Record]:
        mark = len(self.records.all)
        await self.sessions.start_session(session_id, command)
        return await self.records.wait_for(mark, _turn_end(session_id))

    async def turn(self, session_id: str, command: str) -> list[Record]:
        mark = len(self.records.all)
        accepted = await self.sessions.send_user_message(session_id, command)
        assert accepted
        return await self.records.wait_for(mark, _turn_end(session_id))

    async def seeded(self, label: str, size: int) -> str:
        """Start a session and fill it with ``size`` messages."""
        session_id = self.new_id(label)
        first = min(size, SEED_CHUNK)
        await self.start(session_id, f"seed {first - 1}")
        stored = first
        while stored < size:
            chunk = min(SEED_CHUNK, size - stored)
            await self.turn(session_id, f"seed {chunk - 1}")
            stored += chunk
        return session_id

    async def snapshot(self, session_id: str) -> tuple[Record, float]:
        mark = len(self.records.all)
        began = time.perf_counter()
        snapshot = await self.sessions.get_agent_snapshot(session_id)
        elapsed = time.perf_counter() - began
        assert snapshot.state is not None
        [*_, record] = await self.records.wait_for(
            mark, lambda r: r["flow"] == session_id and r["name"] == "get_agent_snapshot"
        )
        return record, elapsed


def _process_cpu(turn: Sequence[Record]) -> float:
    end: float = max(r["p1"] for r in turn)
    start: float = min(r["p0"] for r in turn)
    return end - start


def _steps(turn: Sequence[Record], name: str) -> list[Record]:
    return [r for r in turn if r["kind"] == "execute" and r["name"] == name]


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines.extend(" | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(lines)


async def measure_steps(bench: Bench, rounds: int, turns: int) -> dict[int, list[list[Record]]]:
    """Return, per size, the records of every measured tool turn."""
    turns_by_size: dict[int, list[list[Record]]] = {size: [] for size in STEP_SIZES}
    for round_index in range(rounds + 1):
        shift = round_index % len(STEP_SIZES)
        for size in (*STEP_SIZES[shift:], *STEP_SIZES[:shift]):
            session_id = await bench.seeded(f"steps{size}", size)
            for _ in range(turns):
                turn = await bench.turn(session_id, "tool")
                if round_index > 0:
                    turns_by_size[size].append(turn)
    return turns_by_size


async def measure_snapshots(bench: Bench, samples: int) -> dict[int, list[tuple[Record, float]]]:
    """Return, per size, the Worker record and client time of every snapshot."""
    session_ids = {size: await bench.seeded(f"snapshot{size}", size) for size in SNAPSHOT_SIZES}
    results: dict[int, list[tuple[Record, float]]] = {size: [] for size in SNAPSHOT_SIZES}
    for index in range(samples + 2):
        order = SNAPSHOT_SIZES if index % 2 == 0 else SNAPSHOT_SIZES[::-1]
        for size in order:
            sample = await bench.snapshot(session_ids[size])
            if index >= 2:
                results[size].append(sample)
    return results


async def measure_writes(bench: Bench, turns: int) -> list[tuple[list[Record], list[Record]]]:
    """Return (read turn, write turn) pairs on fresh sessions, alternating which runs first."""
    pairs: list[tuple[list[Record], list[Record]]] = []
    for index in range(turns + 1):
        session_id = await bench.seeded("writes", STEP_SIZES[0])
        first, second = ("tool", "write") if index % 2 == 0 else ("write", "tool")
        ran = {first: await bench.turn(session_id, first), second: await bench.turn(session_id, second)}
        if index > 0:  # the first pair warms the Worker's Client up
            pairs.append((ran["tool"], ran["write"]))
    return pairs


def report_writes(pairs: list[tuple[list[Record], list[Record]]]) -> tuple[str, float]:
    """Return the table and the added wall time per single-attempt call (median difference)."""
    reads = [r for read, _ in pairs for r in _steps(read, "CallTool")]
    writes = [r for _, write in pairs for r in _steps(write, "CallSingleAttemptTool")]
    rows: list[list[str]] = []
    base: dict[str, float] = {}
    for name, records in (("CallTool (read)", reads), ("CallSingleAttemptTool (write)", writes)):
        values = {"wall": _median([r["wall"] for r in records]), "cpu": _median([r["cpu"] for r in records])}
        base = base or values
        rows.append(
            [
                name,
                str(len(records)),
                _ms(values["wall"]),
                _ratio(values["wall"], base["wall"]),
                _ms(values["cpu"]),
                _ratio(values["cpu"], base["cpu"]),
            ]
        )
    added = _median([r["wall"] for r in writes]) - _median([r["wall"] for r in reads])
    headers = ["Step", "n", "wall ms", "ratio", "CPU ms", "ratio"]
    return _table(headers, rows), added


async def measure_growth(bench: Bench, sessions: int, turns: int) -> list[list[list[Record]]]:
    """Return, per turn index, the records of that turn in every session (interleaved)."""
    session_ids = [bench.new_id("growth") for _ in range(sessions)]
    for session_id in session_ids:
        await bench.start(session_id, "")
    by_turn: list[list[list[Record]]] = [[] for _ in range(turns)]
    for index in range(turns):
        for session_id in session_ids:
            by_turn[index].append(await bench.turn(session_id, "tool"))
    return by_turn


def report_steps(turns_by_size: dict[int, list[list[Record]]]) -> tuple[str, int, float]:
    """Return the table, the number of Steps measured and the process CPU per Step at the smallest size."""
    base: dict[str, float] = {}
    rows: list[list[str]] = []
    measured = 0
    for size in STEP_SIZES:
        turns = turns_by_size[size]
        run_model = [r for t in turns for r in _steps(t, "RunModel")]
        call_tool = [r for t in turns for r in _steps(t, "CallTool")]
        per_step = [_process_cpu(t) / STEPS_PER_TOOL_TURN for t in turns]
        measured += len(turns) * STEPS_PER_TOOL_TURN
        values = {
            "model_cpu": _median([r["cpu"] for r in run_model]),
            "model_wall": _median([r["wall"] for r in run_model]),
            "tool_cpu": _median([r["cpu"] for r in call_tool]),
            "tool_wall": _median([r["wall"] for r in call_tool]),
            "process": _median(per_step),
        }
        base = base or values
        kib = _median([r["bytes"] for r in run_model]) / 1024
        rows.append(
            [
                f"{size:,}",
                f"{len(run_model)}/{len(call_tool)}",
                _ms(values["model_cpu"]),
                _ratio(values["model_cpu"], base["model_cpu"]),
                _ms(values["model_wall"]),
                f"{kib:.0f}",
                _ms(values["tool_cpu"]),
                _ratio(values["tool_cpu"], base["tool_cpu"]),
                _ms(values["tool_wall"]),
                _ms(values["process"]),
                _ratio(values["process"], base["process"]),
            ]
        )
    headers = [
        "messages",
        "RunModel/CallTool n",
        "RunModel CPU ms",
        "ratio",
        "RunModel wall ms",
        "task KiB",
        "CallTool CPU ms",
        "ratio",
        "CallTool wall ms",
        "process CPU/Step ms",
        "ratio",
    ]
    return _table(headers, rows), measured, base["process"]


def report_snapshots(results: dict[int, list[tuple[Record, float]]]) -> str:
    """Return the table, and how the two sizes that both return 200 messages compare."""
    rows: list[list[str]] = []
    base: tuple[float, float, float] | None = None
    for size in SNAPSHOT_SIZES:
        samples = results[size]
        cpu = _median([r["cpu"] for r, _ in samples])
        wall = _median([r["wall"] for r, _ in samples])
        client = _median([c for _, c in samples])
        base = base or (cpu, wall, client)
        kib = _median([r["bytes"] for r, _ in samples]) / 1024
        rows.append(
            [
                f"{size:,}",
                str(min(size, 200)),
                str(len(samples)),
                _ms(cpu),
                _ratio(cpu, base[0]),
                _ms(wall),
                _ratio(wall, base[1]),
                f"{kib:.0f}",
                _ms(client),
                _ratio(client, base[2]),
            ]
        )
    headers = [
        "messages",
        "returned",
        "n",
        "Worker CPU ms",
        "ratio",
        "Worker wall ms",
        "ratio",
        "task KiB",
        "client ms",
        "ratio",
    ]
    middle, largest = (_median([r["cpu"] for r, _ in results[size]]) for size in SNAPSHOT_SIZES[-2:])
    note = (
        f"{SNAPSHOT_SIZES[-1]:,} over {SNAPSHOT_SIZES[-2]:,} messages (both return 200): {largest / middle:.2f}x "
        f"Worker CPU; {SNAPSHOT_SIZES[0]:,} returns only {SNAPSHOT_SIZES[0]:,}, and each returned message "
        "costs the SDK's per-instance read"
    )
    return f"{_table(headers, rows)}\n{note}"


def report_growth(by_turn: list[list[list[Record]]]) -> tuple[str, float, float]:
    """Return the table, the last turn's Worker process CPU over the first's, and the same from a line fit.

    Single turns are noisy on a shared machine; the fit (least squares over every
    turn's median) says what the growth is without resting on two points.
    """
    rows: list[list[str]] = []
    medians = [_median([_process_cpu(t) for t in turns]) for turns in by_turn]
    first = medians[0]
    for index in sorted({i for i in (0, 4, 9, 14, len(by_turn) - 1) if i < len(by_turn)}):
        turns = by_turn[index]
        model = _median([r["cpu"] for t in turns for r in _steps(t, "RunModel")])
        loop = _median([max(r["t1"] for r in t) - min(r["t0"] for r in t) for t in turns])
        cpu = medians[index]
        rows.append([str(index + 1), str(len(turns)), _ms(cpu), _ratio(cpu, first), _ms(loop), _ms(model)])
    headers = ["turn", "n", "Worker process CPU per turn ms", "vs turn 1", "loop thread ms", "RunModel CPU ms"]
    fitted = first / first
    if len(medians) > 1:
        slope, intercept = statistics.linear_regression(range(len(medians)), medians)
        fitted = (intercept + slope * (len(medians) - 1)) / intercept
        rows.append(["fit", "", f"{_ms(intercept)} + {_ms(slope)}/turn", f"{fitted:.2f}x", "", ""])
    return _table(headers, rows), medians[-1] / first, fitted


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="binding-bench-", ignore_cleanup_errors=True) as workdir:
        await run_in(args, Path(workdir))


async def run_in(args: argparse.Namespace, workdir: Path) -> None:
    records_path = workdir / "records.jsonl"
    env = {RECORDS_ENV: str(records_path)}
    if args.profile:
        env[PROFILE_ENV] = str(Path(args.profile).resolve())
    listen = f"127.0.0.1:{_free_port()}" if args.worker_mode == "listen" else None
    if listen:
        env[LISTEN_ENV] = listen
    flow = build_flow()
    began = time.perf_counter()
    async with contextlib.AsyncExitStack() as resources:
        stack = await resources.enter_async_context(
            AgentTestStack(
                workdir / "stack", [flow], WORKER_MODULE, worker_cwd=PROJECT_ROOT, worker_env=env, backend="devserver"
            )
        )
        await stack.start_worker()
        sessions = stack.sessions(flow)
        if listen:
            registry = dex.Registry([flow], codec_registry(), allow_async_handlers=True)
            cache = dex.open_blob_cache(dex.BlobCacheConfig(str(workdir / "listen-cache"), 8 * 1024 * 1024))
            resources.callback(cache.close)
            target = dex.WorkerTarget(address=listen, headless=True)
            options = dex.ClientOptions(server_address=stack.address, worker_target=target)
            client = await resources.enter_async_context(dex.AsyncClient(registry, cache, options))
            sessions = AgentSessionClient(client, flow)
        bench = Bench(sessions, Records(records_path))
        phases = set(args.phases.split(","))
        steps = await measure_steps(bench, args.rounds, args.turns) if "steps" in phases else None
        snapshots = await measure_snapshots(bench, args.snapshots) if "snapshots" in phases else None
        growth = await measure_growth(bench, args.growth_sessions, args.growth_turns) if "growth" in phases else None
        writes = await measure_writes(bench, args.write_turns) if "writes" in phases else None
    elapsed = time.perf_counter() - began

    sections: list[str] = []
    targets: list[str] = []
    measured = 0
    if steps is not None:
        table, measured, per_step = report_steps(steps)
        title = f"### RunModel and CallTool Steps (medians; {args.rounds} rounds x {args.turns} tool turns per size)"
        sections.append(f"{title}\n{table}")
        targets.append(f"Worker process CPU per Step at {STEP_SIZES[0]} messages: {_ms(per_step)} ms (issue 7: <= 1.0)")
    if snapshots is not None:
        calls = sum(len(samples) for samples in snapshots.values())
        title = f"### get_agent_snapshot ({args.snapshots} calls per size, alternating; {calls} RPCs measured)"
        sections.append(f"{title}\n{report_snapshots(snapshots)}")
    if growth is not None:
        measured += sum(len(turns) for turns in growth) * STEPS_PER_TOOL_TURN
        table, growth_ratio, fitted_ratio = report_growth(growth)
        title = f"### Growth over a session ({args.growth_sessions} sessions x {len(growth)} tool turns, interleaved)"
        sections.append(f"{title}\n{table}")
        targets.append(
            f"Worker process CPU, turn {len(growth)} over turn 1: {growth_ratio:.2f}x measured, "
            f"{fitted_ratio:.2f}x fitted (issue 7: <= 1.25)"
        )
    if writes is not None:
        table, added = report_writes(writes)
        sections.append(
            f"### Single-attempt confirmation ({len(writes)} read/write turn pairs, fresh sessions)\n{table}"
        )
        targets.append(f"Added wall time per single-attempt call (read-back through the Client): {_ms(added)} ms")
    print("## Binding benchmark: Worker-side cost per Step as the history grows")
    print(
        f"Python {platform.python_version()} ({sys.implementation.name}), {os.cpu_count()} cores "
        f"({platform.machine()}), dex-python-sdk {_sdk_version()}; dev server in this process, the Worker in a child "
        f"process ({args.worker_mode} mode); {measured} Steps measured in {elapsed:.0f} s"
    )
    for section in sections:
        print()
        print(section)
    if targets:
        print()
        print("\n".join(targets))
    if args.profile:
        print(f"\nWorker profile: {args.profile}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _sdk_version() -> str:
    try:
        return importlib.metadata.version("dex-python-sdk")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=16, help="measured rounds of the Step sizes")
    parser.add_argument("--turns", type=int, default=4, help="tool turns per seeded session and round")
    parser.add_argument("--snapshots", type=int, default=50, help="snapshot calls per size")
    parser.add_argument("--growth-sessions", type=int, default=10, help="sessions of the growth phase")
    parser.add_argument("--growth-turns", type=int, default=20, help="tool turns per growth session")
    parser.add_argument("--worker-mode", choices=("pull", "listen"), default="pull", help="how the Worker gets tasks")
    parser.add_argument("--write-turns", type=int, default=20, help="read/write turn pairs of the writes phase")
    parser.add_argument("--phases", default="steps,snapshots,growth,writes", help="comma-separated phases to run")
    parser.add_argument("--profile", help="write a pyinstrument profile of the Worker to this file")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
