"""RunModel's Worker cost as the stored history grows, with compaction (issue 11, item 6).

Run ``python -m benchmarks.long_session_bench`` (``make bench`` runs it with the others).
It prints one table and takes a few minutes; it is not a timed test and asserts nothing.

Set-up: as ``benchmarks.binding_bench`` (the dev server in this process, the Worker in a child
process timing every task it runs), with the bench agent's compaction policy set to a
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
from benchmarks._binding_worker import RECORDS_ENV
from benchmarks.binding_bench import PROJECT_ROOT, WORKER_MODULE, Bench, Record, Records, _median, _steps, _table
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


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="long-session-bench-", ignore_cleanup_errors=True) as workdir:
        records_path = Path(workdir) / "records.jsonl"
        budget = str(args.budget_tokens)
        os.environ[CONTEXT_BUDGET_TOKENS_ENV] = budget
        flow = build_flow()
        env = {RECORDS_ENV: str(records_path), CONTEXT_BUDGET_TOKENS_ENV: budget}
        began = time.perf_counter()
        async with AgentTestStack(
            Path(workdir) / "stack", [flow], WORKER_MODULE, worker_cwd=PROJECT_ROOT, worker_env=env, backend="devserver"
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
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds of every size")
    parser.add_argument("--turns", type=int, default=6, help="tool turns per seeded session and round")
    parser.add_argument("--budget-tokens", type=int, default=32_000, help="the compaction policy's token budget")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
