"""Worker-side cost of the Pydantic AI runner against a plain ``agent.run`` (issue 5, item 9).

Run ``python -m benchmarks.pydantic_ai_runner_bench [--rounds N]``. It
prints one table; it is not a test and asserts nothing about speed.

What is compared, at 20 and 2,000 messages of earlier history, with the same
agent and the same `FunctionModel` (which answers at once, so model time is
close to zero and the same on both sides):

- **plain**: one ``agent.run(prompt, message_history=<the ModelMessage objects>)``
  doing a whole turn: a model call asking for one tool, the tool, a model call
  answering.
- **runner**: the same turn as the session runs it, through `PydanticAIRunner`
  only (no engine): ``RunModel`` (rebuild the history from the stored
  ``framework_item`` JSON, run, encode the run state), the tool Step (a run over
  a one-call history), and the resuming ``RunModel`` (decode, rebuild, run,
  project the turn's messages). This is the framework rebuild and codec cost a
  Worker pays per Step, without the Dex binding's own cost.

Each row is the median over ``--rounds`` rounds after one warm-up round; the
ratio is runner turn / plain turn.

``--memo`` sets how ``RunModel`` reads the stored history (see the history cache in
`dex_agents.adapters.pydantic_ai._history`): ``warm`` (default) as a Worker does
once it has run a model Step of the session (only new messages are parsed),
``cold`` with the cache emptied before every turn (as a restarted Worker: everything
parsed once, then the resuming ``RunModel`` hits), ``off`` with a cache that keeps
nothing (every ``RunModel`` parses the whole history).
"""

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from tests.unit.adapters.pydantic_ai.scripted_model import ScriptedModel, call, script

from dex_agents import AgentMessage, ToolCallsRequested, TurnCompleted
from dex_agents.adapters.pydantic_ai import PydanticAIRunner, _history
from dex_agents.adapters.pydantic_ai._history import framework_message
from dex_agents.testing import make_tool_call, make_tool_execution, make_turn_context

SIZES = (20, 2000)
PROMPT = script([call("c1", "find_order", order_id="7")], "Order 7 is delivered.")


def build_agent() -> Agent[None, str]:
    agent: Agent[None, str] = Agent(ScriptedModel().model(), instructions="You help customers with their orders.")

    @agent.tool_plain
    def find_order(order_id: str) -> str:
        """Return the status of an order."""
        return f"order {order_id} delivered"

    return agent


def history(size: int) -> list[ModelMessage]:
    """Return ``size`` messages of earlier turns: prompt, tool call, tool return, answer."""
    messages: list[ModelMessage] = []
    turn = 0
    while len(messages) < size:
        turn += 1
        call_id = f"h{turn}"
        messages += [
            ModelRequest(parts=[UserPromptPart(f"What is the status of order {turn}? Please check it for me.")]),
            ModelResponse(parts=[ToolCallPart("find_order", {"order_id": str(turn)}, tool_call_id=call_id)]),
            ModelRequest(parts=[ToolReturnPart("find_order", f"order {turn} delivered", tool_call_id=call_id)]),
            ModelResponse(parts=[TextPart(f"Order {turn} was delivered yesterday; anything else I can do?")]),
        ]
    return messages[:size]


def stored(messages: list[ModelMessage]) -> list[AgentMessage]:
    return [
        AgentMessage.stored(framework_message(m), sequence=i + 1, turn_id=f"turn-{i // 4 + 1}")
        for i, m in enumerate(messages)
    ]


async def timed(action: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await action()
    return time.perf_counter() - start


async def plain_turn(agent: Agent[None, str], earlier: list[ModelMessage]) -> float:
    return await timed(lambda: agent.run(PROMPT, message_history=list(earlier)))


async def runner_turn(
    runner: PydanticAIRunner[None], earlier: list[AgentMessage], memo: str
) -> tuple[float, float, float]:
    if memo == "cold":
        _history.HISTORY_CACHE.clear()
    turn_id = f"turn-{len(earlier) // 4 + 2}"
    user = AgentMessage.stored(runner.build_user_message(PROMPT), sequence=len(earlier) + 1, turn_id=turn_id)
    messages = [*earlier, user]
    start = time.perf_counter()
    first = await runner.run_model_step(make_turn_context(messages=messages, turn_id=turn_id))
    model_step = time.perf_counter() - start
    assert isinstance(first, ToolCallsRequested)
    requested = first.tool_calls[0]
    execution = make_tool_execution(requested.tool_name, requested.arguments, tool_call_id=requested.tool_call_id)
    start = time.perf_counter()
    result = await runner.execute_deferred_tool_call(execution)
    tool_step = time.perf_counter() - start
    record = make_tool_call(requested.tool_call_id, requested.tool_name, turn_id=turn_id, output=result.output)
    start = time.perf_counter()
    done = await runner.run_model_step(
        make_turn_context(
            messages=messages, turn_id=turn_id, framework_run_state=first.framework_run_state, tool_calls=[record]
        )
    )
    resume_step = time.perf_counter() - start
    assert isinstance(done, TurnCompleted)
    return model_step, tool_step, resume_step


async def main(rounds: int, memo: str) -> None:
    if memo == "off":
        _history.HISTORY_CACHE = _history.HistoryCache(0)  # keeps nothing: every read parses
    agent = build_agent()
    runner = PydanticAIRunner(agent)
    inputs = {size: (history(size), stored(history(size))) for size in SIZES}
    samples: dict[int, list[tuple[float, float, float, float]]] = {size: [] for size in SIZES}
    for round_index in range(rounds + 1):
        for size in SIZES:
            objects, messages = inputs[size]
            plain = await plain_turn(agent, objects)
            model_step, tool_step, resume_step = await runner_turn(runner, messages, memo)
            if round_index:
                samples[size].append((plain, model_step, tool_step, resume_step))
    columns = ("history", 8), ("plain turn", 11), ("RunModel", 9), ("tool Step", 10), ("RunModel", 9)
    header = " ".join(f"{name:>{width}}" for name, width in (*columns, ("runner turn", 12), ("ratio", 6)))
    print(header)
    for size in SIZES:
        plain, model_step, tool_step, resume_step = (
            statistics.median(sample[i] for sample in samples[size]) for i in range(4)
        )
        total = model_step + tool_step + resume_step
        print(
            f"{size:>8} {plain * 1e3:>9.2f}ms {model_step * 1e3:>7.2f}ms {tool_step * 1e3:>8.2f}ms "
            f"{resume_step * 1e3:>7.2f}ms {total * 1e3:>10.2f}ms {total / plain:>6.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--memo", choices=("warm", "cold", "off"), default="warm")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.memo))
