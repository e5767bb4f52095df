"""CPU of one session turn without the engine: the use cases and the Pydantic AI runner against a plain run.

Run ``python -m benchmarks.session_cpu_bench [--shapes 5x4,1x1,10x1] [--turns 30]``. It prints one
table; it is not a test and asserts nothing about speed.

The turn is the peer benchmark's (`benchmarks.peers.scenario`: K model calls asking for M ``work``
calls each, then a text answer), on a fresh session of `dex_agents.testing.memory.InMemorySessionHost`
with the real `PydanticAIRunner` and use cases (live runs included), so there is no SDK, gRPC or
engine in it. Per shape it measures, after three warm-up turns, the CPU time of this thread
(``time.thread_time``) over each turn:

- **session**: ``start`` and ``drive`` of one session turn on the in-memory host;
- **floor**: the same session turn with `benchmarks.peers.floor_runner.FloorRunner` (the peer bench's
  ``dex-floor`` runner: the same Steps, no framework) in place of the Pydantic AI runner;
- **plain**: the same agent's ``agent.run(prompt)``, the whole turn in one run.

Rows give the median and the fastest turn, and the medians per durable step as the peer bench counts
them (K + 1 model Steps and K * M tool Steps: 26 for 5x4). **adapter per step** is session minus
floor: the Pydantic AI runner's share, the in-process counterpart of the peer bench's ``dex`` minus
``dex-floor`` Worker CPU per step (the rest of the session row is the use cases, which the floor
pays too). The peer bench's Worker CPU per step minus the session row's is what the SDK, gRPC and
the binding's engine side add; two trees compared with this bench in alternation give a change's
effect on the session side with far less noise than the peer bench.
"""

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from benchmarks.peers.floor_runner import FloorRunner
from benchmarks.peers.scenario import TOOL_NAME, make_agent, make_prompt
from dex_agents import ToolEffect, ToolPolicy
from dex_agents.adapters.pydantic_ai import PydanticAIRunner
from dex_agents.application.options import AgentSessionOptions
from dex_agents.testing.memory import InMemorySessionHost

WARMUP_TURNS = 3


def durable_steps(k: int, m: int) -> int:
    """The durable Steps of one K x M turn as the peer bench counts them: K + 1 model Steps and K * M tool Steps."""
    return (k + 1) + k * m


async def cpu_of(turn: Callable[[], Awaitable[object]], turns: int) -> list[float]:
    """Return this thread's CPU seconds over each of ``turns`` turns, after the warm-up."""
    for _ in range(WARMUP_TURNS):
        await turn()
    spent: list[float] = []
    for _ in range(turns):
        began = time.thread_time()
        await turn()
        spent.append(time.thread_time() - began)
    return spent


async def measure(k: int, m: int, turns: int) -> tuple[list[float], list[float], list[float]]:
    """Return the CPU seconds of each session turn, each floor session turn and each plain turn of shape K x M."""
    agent = make_agent("session_cpu_bench")
    runner = PydanticAIRunner(agent)
    floor = FloorRunner()
    options = AgentSessionOptions(tool_policies={TOOL_NAME: ToolPolicy(ToolEffect.READ)})
    prompt = make_prompt(k, m, 1)

    async def session_turn() -> None:
        host = InMemorySessionHost(runner, options=options)
        await host.drive(await host.start(prompt))

    async def floor_turn() -> None:
        host = InMemorySessionHost(floor, options=options)
        await host.drive(await host.start(prompt))

    async def plain_turn() -> None:
        await agent.run(prompt)

    return await cpu_of(session_turn, turns), await cpu_of(floor_turn, turns), await cpu_of(plain_turn, turns)


async def run(shapes: list[tuple[int, int]], turns: int) -> None:
    print(f"CPU per turn (ms, this thread), {turns} turns per row after {WARMUP_TURNS} warm-up turns\n")
    print(
        "| shape | session median | session min | floor median | plain median | plain min | session / plain "
        "| session per step | adapter per step |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for k, m in shapes:
        session, floor, plain = await measure(k, m, turns)
        session_ms, floor_ms = statistics.median(session) * 1e3, statistics.median(floor) * 1e3
        plain_ms = statistics.median(plain) * 1e3
        steps = durable_steps(k, m)
        print(
            f"| {k}x{m} | {session_ms:.1f} | {min(session) * 1e3:.1f} | {floor_ms:.1f} | {plain_ms:.1f} "
            f"| {min(plain) * 1e3:.1f} | {session_ms / plain_ms:.2f}x | {session_ms / steps:.2f} "
            f"| {(session_ms - floor_ms) / steps:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--shapes", default="5x4,1x1,10x1", help="KxM turn shapes")
    parser.add_argument("--turns", type=int, default=30, help="measured turns per shape and side")
    args = parser.parse_args()
    shapes = [(int(k), int(m)) for k, m in (shape.split("x") for shape in args.shapes.split(","))]
    asyncio.run(run(shapes, args.turns))


if __name__ == "__main__":
    main()
