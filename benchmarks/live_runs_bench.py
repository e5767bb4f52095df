"""A 5x4 turn through `PydanticAIRunner` alone, with and without live runs, against a plain ``agent.run`` (issue 14).

Run ``python -m benchmarks.live_runs_bench [--rounds N] [--k K --m M]``. It prints one table; it
is not a test and asserts nothing about speed.

The agent is the peer benchmark's (`benchmarks.peers.scenario.make_agent`: K model responses of
M ``work`` calls, then text). One *runner turn* is what the session's Worker runs for a turn:
the first ``RunModel``, the K·M tool Steps, and K resumed ``RunModel`` Steps, driven in memory as
the session would (run state and final records handed from Step to Step, no engine). With live
runs (the default) the resumed Steps continue the first Step's agent run; without
(``live_runs=False``) each is a new run over the run state. The ratio is runner turn / plain
turn, medians over ``--rounds`` rounds after 10 warm-up rounds, in one process.
"""

import argparse
import asyncio
import statistics
import time

from benchmarks.peers.scenario import make_agent, make_prompt
from dex_agents import AgentMessage, AgentToolCall, ToolCallsRequested, TurnCompleted
from dex_agents.adapters.pydantic_ai import PydanticAIRunner
from dex_agents.testing import make_tool_call, make_tool_execution, make_turn_context


async def runner_turn(runner: PydanticAIRunner[None], k: int, m: int, spans: dict[str, list[float]]) -> None:
    """Drive one KxM turn through the runner, adding each Step's time to ``spans``."""
    turn_id = "turn-1"
    user = AgentMessage.stored(runner.build_user_message(make_prompt(k, m)), sequence=1, turn_id=turn_id)
    state: str | None = None
    records: list[AgentToolCall] = []
    step = "first RunModel"
    while True:
        start = time.perf_counter()
        outcome = await runner.run_model_step(
            make_turn_context(messages=[user], turn_id=turn_id, framework_run_state=state, tool_calls=records)
        )
        spans[step].append(time.perf_counter() - start)
        step = "resumed RunModel"
        if isinstance(outcome, TurnCompleted):
            return
        assert isinstance(outcome, ToolCallsRequested)
        state, records = outcome.framework_run_state, []
        for call in outcome.tool_calls:
            execution = make_tool_execution(call.tool_name, call.arguments, tool_call_id=call.tool_call_id)
            start = time.perf_counter()
            result = await runner.execute_deferred_tool_call(execution)
            spans["tool Step"].append(time.perf_counter() - start)
            records.append(make_tool_call(call.tool_call_id, call.tool_name, turn_id=turn_id, output=result.output))


async def main(rounds: int, k: int, m: int) -> None:
    agent = make_agent("live_runs_bench")
    runners = {"live runs": PydanticAIRunner(agent), "one run per Step": PydanticAIRunner(agent, live_runs=False)}
    spans: dict[str, dict[str, list[float]]] = {
        name: {"first RunModel": [], "resumed RunModel": [], "tool Step": []} for name in runners
    }
    turns: dict[str, list[float]] = {name: [] for name in (*runners, "plain")}
    for round_index in range(rounds + 10):
        for name, runner in runners.items():
            step_spans: dict[str, list[float]] = {key: [] for key in spans[name]}
            start = time.perf_counter()
            await runner_turn(runner, k, m, step_spans)
            if round_index >= 10:
                turns[name].append(time.perf_counter() - start)
                for key, values in step_spans.items():
                    spans[name][key].extend(values)
        start = time.perf_counter()
        await agent.run(make_prompt(k, m))
        if round_index >= 10:
            turns["plain"].append(time.perf_counter() - start)
    plain = statistics.median(turns["plain"])
    print(f"{k}x{m} turn, medians over {rounds} rounds")
    print(f"{'':18} {'first RunModel':>15} {'resumed RunModel':>17} {'tool Step':>10} {'turn':>9} {'x plain':>8}")
    for name in runners:
        first, resumed, tool = (statistics.median(spans[name][key]) for key in spans[name])
        turn = statistics.median(turns[name])
        print(
            f"{name:18} {first * 1e3:>12.2f} ms {resumed * 1e3:>14.2f} ms {tool * 1e3:>7.2f} ms "
            f"{turn * 1e3:>6.1f} ms {turn / plain:>8.2f}"
        )
    print(f"{'plain agent.run':18} {'':>15} {'':>17} {'':>10} {plain * 1e3:>6.1f} ms {1:>8.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--m", type=int, default=4)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.k, arguments.m))
