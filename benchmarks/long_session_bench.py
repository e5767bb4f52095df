"""Long sessions: RunModel's Worker cost as the stored history grows, and two long Pydantic AI shapes.

Run ``python -m benchmarks.long_session_bench [--shape sizes|turns|calls]`` (``make bench`` runs
it with the others; without ``--shape`` all three run). It prints one table per shape and takes
a few minutes; it is not a timed test and asserts nothing.

``turns`` and ``calls`` run the Pydantic AI agent of `benchmarks._long_agent` (default
`pydantic_ai_session_flow`: default compaction and tool-result budget) with the Worker in a
child process, and time every turn from ``send_user_message`` to the Worker's
``AwaitUserMessage`` (wall) and the Worker process's CPU over it:

- ``turns``: ``--long-turns`` turns (60) that each read one ``--big-kib`` KiB tool output (120):
  the stored history passes the compaction budget again and again. Target: the median of the
  last 5 turns at most 1.5x the median of turns 2-6.
- ``calls``: a session seeded with ``--seed-mb`` MB (3) of such turns, then one turn of
  ``--calls`` (100) sequential calls of ``--call-kib`` KiB (5) each: the run state grows with
  every call (the shape that stopped a Temporal workflow at call 53, temporalio/sdk-python#1890).
  Target: the turn completes; the table gives its model and tool Steps' CPU, first and last ten.

``sizes`` (the bench agent of `benchmarks._binding_agent`, issue 11, item 6): set up as
``benchmarks.binding_bench`` (the dev server in this process, the Worker in a child process
timing every task it runs), with the bench agent's compaction policy set to a
context budget of ``--budget-tokens`` tokens (32,000 by default: 128 KiB of messages) and
the default 20 messages kept verbatim. Per round, one fresh session per size (100, 1,000,
10,000 and 50,000 stored messages) is seeded through the public path (``seed`` turns whose
model answers with 2,000 messages each; the next turn's model call compacts what went over
the budget first), then ``--turns`` tool turns run on it and their ``RunModel`` tasks are
measured: the CPU time of the Worker's event-loop thread over the task ("CPU") and the
size of the task as received ("task KiB"). Sizes rotate every round; the first round is a
dropped warm-up. Ratios are against 100 messages, in the same run. Issue 11's target:
at most 1.2x at 10,000 and at 50,000 messages (before: every ``RunModel`` loaded every
message, about 6 µs and 0.45 KiB each, and past about 8,000 messages the task exceeded
4 MiB and never reached the Worker).
"""

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks._binding_agent import CONTEXT_BUDGET_TOKENS_ENV, build_flow
from benchmarks._binding_worker import FLOW_ENV, PROFILE_ENV, RECORDS_ENV
from benchmarks._long_agent import build_flow as build_long_flow
from benchmarks.binding_bench import (
    PROJECT_ROOT,
    WORKER_MODULE,
    Bench,
    Record,
    Records,
    _median,
    _process_cpu,
    _steps,
    _table,
)
from dex_agents import WorkerMode
from dex_agents.testing import AgentTestStack

SIZES = (100, 1_000, 10_000, 50_000)
SEED_CHUNK = 2000
"""Messages per seed turn: one compaction chunk each (a seed turn's messages stay under the compaction load)."""


async def seeded(bench: Bench, label: str, size: int) -> str:
    session_id = bench.new_id(label)
    first = min(size, SEED_CHUNK)
    await bench.start(session_id, f"seed {first - 1}")
    stored = first
    while stored < size:
        chunk = min(SEED_CHUNK, size - stored)
        await bench.turn(session_id, f"seed {chunk - 1}")
        stored += chunk
    return session_id


async def measure(bench: Bench, rounds: int, turns: int) -> dict[int, list[Record]]:
    """Return, per size, the records of every measured ``RunModel`` task."""
    by_size: dict[int, list[Record]] = {size: [] for size in SIZES}
    for round_index in range(rounds + 1):
        shift = round_index % len(SIZES)
        for size in (*SIZES[shift:], *SIZES[:shift]):
            session_id = await seeded(bench, f"long{size}", size)
            for _ in range(turns):
                turn = await bench.turn(session_id, "tool")
                if round_index > 0:
                    by_size[size].extend(_steps(turn, "RunModel"))
    return by_size


def report(by_size: dict[int, list[Record]]) -> tuple[str, dict[int, tuple[float, float]]]:
    rows: list[list[str]] = []
    ratios: dict[int, tuple[float, float]] = {}
    base_cpu = _median([r["cpu"] for r in by_size[SIZES[0]]])
    base_bytes = _median([r["bytes"] for r in by_size[SIZES[0]]])
    for size in SIZES:
        records = by_size[size]
        cpu = _median([r["cpu"] for r in records])
        size_bytes = _median([r["bytes"] for r in records])
        ratios[size] = (cpu / base_cpu, size_bytes / base_bytes)
        rows.append(
            [
                f"{size:,}",
                str(len(records)),
                f"{cpu * 1000:.2f}",
                f"{cpu / base_cpu:.2f}x",
                f"{size_bytes / 1024:.1f}",
                f"{size_bytes / base_bytes:.2f}x",
            ]
        )
    headers = ["stored messages", "RunModel n", "RunModel CPU ms", "ratio", "task KiB", "ratio"]
    return _table(headers, rows), ratios


LONG_FLOW_MODULE = "benchmarks._long_agent"
FIRST_TURNS = slice(1, 6)
"""Turns 2-6 (0-based 1..5): the base of the long-turns ratio (turn 1 pays the Worker's warm-up)."""


async def timed_turn(bench: Bench, session_id: str, command: str, *, first: bool = False) -> tuple[float, float]:
    """Run one turn; return its wall time and the Worker process's CPU over it, in seconds."""
    began = time.perf_counter()
    records = await (bench.start(session_id, command) if first else bench.turn(session_id, command))
    return time.perf_counter() - began, _process_cpu(records)


async def check_completed(bench: Bench, session_id: str) -> None:
    """Raise unless the session's last turn completed (a failed turn also ends at ``AwaitUserMessage``)."""
    snapshot = await bench.sessions.get_agent_snapshot(session_id)
    assert snapshot.state is not None
    if snapshot.state.last_turn_error is not None:
        raise RuntimeError(f"a turn of {session_id} failed: {snapshot.state.last_turn_error}")


async def measure_turns(bench: Bench, args: argparse.Namespace) -> list[tuple[float, float]]:
    """Return (wall, Worker CPU) of every turn of one long session."""
    session_id = bench.new_id("turns")
    command = f"big {args.big_kib}"
    turns = [await timed_turn(bench, session_id, command, first=index == 0) for index in range(args.long_turns)]
    await check_completed(bench, session_id)
    return turns


def report_turns(turns: list[tuple[float, float]], args: argparse.Namespace) -> str:
    """Return the long-turns table: the first and last turns and the ratio of their medians."""
    walls = [wall for wall, _ in turns]
    cpus = [cpu for _, cpu in turns]
    rows: list[list[str]] = []
    for label, part in (("turns 2-6", FIRST_TURNS), ("last 5 turns", slice(-5, None))):
        rows.append([label, f"{_median(walls[part]) * 1000:.1f}", f"{_median(cpus[part]) * 1000:.1f}"])
    ratio_wall = _median(walls[-5:]) / _median(walls[FIRST_TURNS])
    ratio_cpu = _median(cpus[-5:]) / _median(cpus[FIRST_TURNS])
    rows.append(["last 5 / turns 2-6", f"{ratio_wall:.2f}x", f"{ratio_cpu:.2f}x"])
    head = f"{args.long_turns} turns x one {args.big_kib} KiB tool output (target: last 5 / turns 2-6 <= 1.5x)"
    every = " ".join(f"{wall * 1000:.0f}" for wall in walls)
    return (
        f"{head}\n\n{_table(['turns', 'median wall ms', 'median Worker CPU ms'], rows)}\n\nevery turn, wall ms: {every}"
    )


async def measure_calls(bench: Bench, args: argparse.Namespace) -> tuple[int, float, float, list[Record]]:
    """Seed a session with about ``--seed-mb`` MB, run the many-calls turn; return (seed turns, wall, CPU, records)."""
    session_id = bench.new_id("calls")
    seed_turns = max(1, round(args.seed_mb * 1_000_000 / (args.big_kib * 1024)))
    for index in range(seed_turns):
        await timed_turn(bench, session_id, f"big {args.big_kib}", first=index == 0)
    mark = len(bench.records.all)
    wall, cpu = await timed_turn(bench, session_id, f"seq {args.calls} {args.call_kib}")
    await check_completed(bench, session_id)
    return seed_turns, wall, cpu, bench.records.all[mark:]


def report_calls(seed_turns: int, wall: float, cpu: float, records: list[Record], args: argparse.Namespace) -> str:
    """Return the many-calls table: the turn and its model and tool Steps, first and last ten."""
    models = [r["cpu"] for r in _steps(records, "RunModel")]
    tools = [r["cpu"] for r in _steps(records, "CallTool")]
    rows = [["whole turn", "1", f"{wall * 1000:.0f}", f"{cpu * 1000:.0f}"]]
    for name, values in (("RunModel", models), ("CallTool", tools)):
        rows.append([f"{name}, first 10", str(len(values)), "", f"{_median(values[:10]) * 1000:.2f}"])
        rows.append([f"{name}, last 10", "", "", f"{_median(values[-10:]) * 1000:.2f}"])
    head = (
        f"one turn of {args.calls} sequential {args.call_kib} KiB calls on {seed_turns} x {args.big_kib} KiB "
        f"of history ({seed_turns * args.big_kib / 1024:.1f} MiB); completed with {len(models)} model Steps"
    )
    return f"{head}\n\n{_table(['', 'n', 'wall ms', 'Worker CPU ms (median)'], rows)}"


def _load_line(load_before: float, began: float) -> str:
    return f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; {time.perf_counter() - began:.0f} s"


async def run_long(args: argparse.Namespace) -> None:
    """Run the ``turns`` and ``calls`` shapes on one stack with the long agent's Worker."""
    with tempfile.TemporaryDirectory(prefix="long-session-bench-", ignore_cleanup_errors=True) as workdir:
        records_path = Path(workdir) / "records.jsonl"
        env = {RECORDS_ENV: str(records_path), FLOW_ENV: LONG_FLOW_MODULE}
        if args.profile:
            env[PROFILE_ENV] = str(Path(args.profile).resolve())
        flow = build_long_flow()
        async with AgentTestStack(
            Path(workdir) / "stack",
            [flow],
            WORKER_MODULE,
            worker_cwd=PROJECT_ROOT,
            worker_env=env,
            backend="devserver",
            engine_data_dir=Path(workdir) / "data" if args.persistent else None,
            worker_mode=WorkerMode.PULL,  # what the Worker child times without a listen address of its own
        ) as stack:
            await stack.start_worker()
            bench = Bench(stack.sessions(flow), Records(records_path))
            load = os.getloadavg()[0]
            if args.shape in (None, "turns"):
                began = time.perf_counter()
                turns = await measure_turns(bench, args)
                print("## Long sessions: turns with a large tool output each (Pydantic AI agent)")
                print(_load_line(load, began))
                print()
                print(report_turns(turns, args))
                print()
            if args.shape in (None, "calls"):
                load = os.getloadavg()[0]
                began = time.perf_counter()
                seed_turns, wall, cpu, records = await measure_calls(bench, args)
                print("## Long sessions: one turn of many sequential tool calls (Pydantic AI agent)")
                print(_load_line(load, began))
                print()
                print(report_calls(seed_turns, wall, cpu, records, args))
                print()


async def run(args: argparse.Namespace) -> None:
    if args.shape in (None, "turns", "calls"):
        await run_long(args)
    if args.shape in (None, "sizes"):
        await run_sizes(args)


async def run_sizes(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="long-session-bench-", ignore_cleanup_errors=True) as workdir:
        records_path = Path(workdir) / "records.jsonl"
        budget = str(args.budget_tokens)
        os.environ[CONTEXT_BUDGET_TOKENS_ENV] = budget
        flow = build_flow()
        env = {RECORDS_ENV: str(records_path), CONTEXT_BUDGET_TOKENS_ENV: budget}
        began = time.perf_counter()
        async with AgentTestStack(
            Path(workdir) / "stack",
            [flow],
            WORKER_MODULE,
            worker_cwd=PROJECT_ROOT,
            worker_env=env,
            backend="devserver",
            worker_mode=WorkerMode.PULL,
        ) as stack:
            await stack.start_worker()
            bench = Bench(stack.sessions(flow), Records(records_path))
            by_size = await measure(bench, args.rounds, args.turns)
        elapsed = time.perf_counter() - began
    table, ratios = report(by_size)
    print("## Long sessions: RunModel Worker cost as the stored history grows (with compaction)")
    print(
        f"context budget {args.budget_tokens:,} tokens, 20 messages kept verbatim; {args.rounds} rounds x "
        f"{args.turns} tool turns per size (+1 warm-up round); {elapsed:.0f} s"
    )
    print()
    print(table)
    print()
    for size in SIZES[2:]:
        cpu, size_bytes = ratios[size]
        print(f"{size:,} over {SIZES[0]} messages: CPU {cpu:.2f}x, bytes {size_bytes:.2f}x (issue 11: <= 1.2)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="sizes: measured rounds of every size")
    parser.add_argument("--turns", type=int, default=6, help="sizes: tool turns per seeded session and round")
    parser.add_argument("--budget-tokens", type=int, default=32_000, help="sizes: the compaction policy's token budget")
    parser.add_argument("--shape", choices=("sizes", "turns", "calls"), help="run one shape only (default: all)")
    parser.add_argument("--long-turns", type=int, default=60, help="turns: how many turns")
    parser.add_argument("--big-kib", type=int, default=120, help="turns, calls: KiB of each large tool output")
    parser.add_argument("--seed-mb", type=float, default=3.0, help="calls: MB of history before the many-calls turn")
    parser.add_argument("--calls", type=int, default=100, help="calls: sequential tool calls of the turn")
    parser.add_argument("--call-kib", type=int, default=5, help="calls: KiB of each call's output")
    parser.add_argument("--profile", help="turns, calls: write the Worker's pyinstrument report here")
    parser.add_argument("--persistent", action="store_true", help="turns, calls: the dev server on a data dir")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
