"""Where one model → tool → model round trip spends its CPU: a session turn against a plain run, phase by phase.

Run ``python -m benchmarks.round_trip_bench [--shape 10x1] [--turns 40]``. It prints one table;
it is not a test and asserts nothing about speed.

The turn is the peer benchmark's (`benchmarks.peers.scenario`), on the in-memory host with the real
`PydanticAIRunner` and use cases, as in `benchmarks.session_cpu_bench`: no SDK, gRPC or engine, one
thread and one event loop, so the thread's CPU between two marks belongs to the phase between them.
Marks are taken at a few points of each side (this process wraps the functions named below for the
run, nothing else changes):

- **session**: the model Step's use case (``RunModel.execute``) starts and ends; the live run is
  resumed with the tool results (``LiveRun.resume``); its ``handle_deferred_tool_calls`` hook is
  entered (the run hands calls over) and returns (the run gets results); a model request starts and
  ends (``DeltaForwardingModel.request``: streamed, its deltas forwarded); the Step's outcome is built
  (``step_outcome``: records, run state).
- **plain**: ``agent.run`` of the same agent, marked where a model request starts and ends
  (``FunctionModel.request``) and where the tool's function starts and ends.

The table pairs the phases of a resumed round trip (the tool's result back in the run to the next
hand-over) with the plain run's phases that do the same work, per occurrence (median µs) and per turn
(the sum over the turn, ms). Rows of one side only are work the other side does not do. Compare two
trees with it in alternation: the machine's speed drifts between runs.
"""

import argparse
import asyncio
import functools
import statistics
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai.models.function import FunctionModel

import benchmarks.peers.scenario as scenario
from dex_agents import ToolEffect, ToolPolicy
from dex_agents.adapters.pydantic_ai import PydanticAIRunner, _live_runs, _model_steps, _streaming
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.steps import run_model
from dex_agents.testing.memory import InMemorySessionHost

WARMUP_TURNS = 5

BETWEEN_TURNS = ("turn_end", "turn_start")

Segment = tuple[str, str]

ROWS: list[tuple[str, Segment | None, Segment | None]] = [
    ("tool result in the run → next model request starts", ("hook_return", "req_start"), ("tool_end", "req_start")),
    ("model request", ("req_start", "req_end"), ("req_start", "req_end")),
    ("response → calls handed over (validated)", ("req_end", "hook_enter"), ("req_end", "tool_start")),
    ("hand-over → Step outcome starts", ("hook_enter", "outcome_start"), None),
    ("Step outcome (records, run state)", ("outcome_start", "outcome_end"), None),
    ("outcome → model Step ends", ("outcome_end", "exec_end"), None),
    ("between model Steps (the tool Step, the host)", ("exec_end", "exec_start"), ("tool_start", "tool_end")),
    ("model Step starts → live run resumed", ("exec_start", "resume"), None),
    ("resumed → the run gets the results", ("resume", "hook_return"), None),
]
"""(phase, the session's segment, the plain run's segment doing the same work) of a resumed round trip."""


class Marks:
    """Thread CPU times at named points, in order."""

    def __init__(self) -> None:
        self.points: list[tuple[str, float]] = []
        self.on = False

    def mark(self, name: str) -> None:
        if self.on:
            self.points.append((name, time.thread_time()))

    def segments(self) -> dict[Segment, list[float]]:
        """CPU seconds of each (from, to) pair of consecutive marks, every occurrence."""
        found: dict[Segment, list[float]] = defaultdict(list)
        for (first, began), (then, ended) in zip(self.points, self.points[1:], strict=False):
            found[first, then].append(ended - began)
        return found


Wrapped = list[tuple[Any, str, object]]
"""(owner, name, original) of every function wrapped, to put back."""


def _wrap_async(owner: Any, name: str, marks: Marks, before: str, after: str, wrapped: Wrapped) -> None:
    original = getattr(owner, name)  # an AttributeError names a function that moved: update this bench
    wrapped.append((owner, name, original))

    @functools.wraps(original)
    async def marked(*args: Any, **kwargs: Any) -> Any:
        marks.mark(before)
        try:
            return await original(*args, **kwargs)
        finally:
            marks.mark(after)

    setattr(owner, name, marked)


def _wrap_sync(owner: Any, name: str, marks: Marks, before: str, after: str | None, wrapped: Wrapped) -> None:
    original = getattr(owner, name)
    wrapped.append((owner, name, original))

    @functools.wraps(original)
    def marked(*args: Any, **kwargs: Any) -> Any:
        marks.mark(before)
        try:
            return original(*args, **kwargs)
        finally:
            if after is not None:
                marks.mark(after)

    setattr(owner, name, marked)


def mark_session(marks: Marks, wrapped: Wrapped) -> None:
    """Wrap the session's marked functions (see the module docstring)."""
    _wrap_async(run_model.RunModel, "execute", marks, "exec_start", "exec_end", wrapped)
    _wrap_sync(_live_runs.LiveRun, "resume", marks, "resume", None, wrapped)
    _wrap_async(_live_runs.LiveRun, "handle", marks, "hook_enter", "hook_return", wrapped)
    _wrap_async(_streaming.DeltaForwardingModel, "request", marks, "req_start", "req_end", wrapped)
    _wrap_sync(_model_steps, "step_outcome", marks, "outcome_start", "outcome_end", wrapped)


def plain_tool(marks: Marks) -> Callable[[int], Awaitable[str]]:
    """The bench tool's function, marked where it starts and ends."""

    async def work(n: int) -> str:
        marks.mark("tool_start")
        try:
            return await scenario.work_body(n)
        finally:
            marks.mark("tool_end")

    work.__doc__ = scenario.work_body.__doc__
    return work


async def measure(k: int, m: int, turns: int) -> tuple[Marks, Marks]:
    """Run ``turns`` session turns and ``turns`` plain runs of shape K x M; return their marks."""
    session_marks, plain_marks = Marks(), Marks()
    wrapped: Wrapped = []
    try:
        mark_session(session_marks, wrapped)
        _wrap_async(FunctionModel, "request", plain_marks, "req_start", "req_end", wrapped)
        await _turns(k, m, turns, session_marks, plain_marks)
    finally:
        for owner, name, original in reversed(wrapped):
            setattr(owner, name, original)
    return session_marks, plain_marks


async def _turns(k: int, m: int, turns: int, session_marks: Marks, plain_marks: Marks) -> None:
    agent = scenario.make_agent("round_trip_bench")
    plain_agent = scenario.make_agent("round_trip_bench_plain", tool=plain_tool(plain_marks))
    runner = PydanticAIRunner(agent)
    options = AgentSessionOptions(tool_policies={scenario.TOOL_NAME: ToolPolicy(ToolEffect.READ)})
    prompt = scenario.make_prompt(k, m, 1)
    for side, marks in ((True, session_marks), (False, plain_marks)):
        for turn in range(WARMUP_TURNS + turns):
            marks.on = turn >= WARMUP_TURNS
            marks.mark("turn_start")
            if side:
                host = InMemorySessionHost(runner, options=options)
                await host.drive(await host.start(prompt))
            else:
                await plain_agent.run(prompt)
            marks.mark("turn_end")
        marks.on = False


def _cell(segments: dict[Segment, list[float]], segment: Segment | None, turns: int) -> tuple[str, float]:
    if segment is None or segment not in segments:
        return "-", 0.0
    values = segments[segment]
    total = sum(values) / turns * 1e3
    return f"{statistics.median(values) * 1e6:.0f} µs x {len(values) / turns:.0f} = {total:.2f} ms", total


def report(k: int, m: int, turns: int, session: Marks, plain: Marks) -> None:
    """Print the phase table."""
    ours, theirs = session.segments(), plain.segments()
    print(f"CPU of one {k}x{m} turn by phase (this thread), {turns} turns per side after {WARMUP_TURNS} warm-up\n")
    print("| phase of a resumed round trip | session: median x per turn = ms a turn | plain run: same |")
    print("| --- | ---: | ---: |")
    paired = 0.0
    for phase, mine, other in ROWS:
        mine_text, mine_ms = _cell(ours, mine, turns)
        other_text, _ = _cell(theirs, other, turns)
        paired += mine_ms
        print(f"| {phase} | {mine_text} | {other_text} |")
    print(f"| whole turn | {_turn_ms(ours, turns):.2f} ms | {_turn_ms(theirs, turns):.2f} ms |")
    print(f"\nThe rows give {paired:.2f} ms of the session's turn. The rest (each turn's start, end, first request):")
    for side, segments, paired_segments in (("session", ours, _paired(0)), ("plain run", theirs, _paired(1))):
        rest = sorted(
            (
                (sum(values) / turns * 1e3, segment)
                for segment, values in segments.items()
                if segment not in paired_segments and segment != BETWEEN_TURNS
            ),
            reverse=True,
        )
        for total, (first, then) in rest:
            print(f"- {side}: {first} → {then}: {total:.2f} ms a turn")


def _turn_ms(segments: dict[Segment, list[float]], turns: int) -> float:
    """The CPU of a turn: every segment but the gaps between turns."""
    return sum(sum(values) for segment, values in segments.items() if segment != BETWEEN_TURNS) / turns * 1e3


def _paired(side: int) -> set[Segment]:
    """The segments ``ROWS`` shows of the session (0) or of the plain run (1)."""
    found: set[Segment] = set()
    for _, mine, other in ROWS:
        segment = (mine, other)[side]
        if segment is not None:
            found.add(segment)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--shape", default="10x1", help="KxM turn shape")
    parser.add_argument("--turns", type=int, default=40, help="measured turns per side")
    args = parser.parse_args()
    k, m = (int(part) for part in args.shape.split("x"))
    session, plain = asyncio.run(measure(k, m, args.turns))
    report(k, m, args.turns, session, plain)


if __name__ == "__main__":
    main()
