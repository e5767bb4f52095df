"""The Pydantic AI agent of the long-session shapes, shared by the driver and its Worker child.

A `FunctionModel` (no network, microseconds per call) reads the turn's command:

- ``big <kib>``: one ``read`` call whose result is ``kib`` KiB of text, then a short answer
  (the turn stores four messages, one of them the large tool return);
- ``seq <calls> <kib>``: ``calls`` ``read`` calls one after another (one per model response,
  each result ``kib`` KiB), then a short answer: one turn of ``calls`` + 1 model Steps.

The Flow is the default `pydantic_ai_session_flow` (default compaction and tool-result budget),
with ``read`` classified ``read`` and a request limit of `REQUEST_LIMIT` a turn (Pydantic AI's
default of 50 would end the many-calls turn).
"""

import re

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

from dex_agents import AgentSessionFlow, ToolEffect, ToolPolicy
from dex_agents.adapters.pydantic_ai import pydantic_ai_session_flow

FLOW_TYPE = "LongSessionBenchAgent"
REQUEST_LIMIT = 1000
_COMMAND = re.compile(r"^(big|seq)\s+(\d+)(?:\s+(\d+))?")


def _usage() -> RequestUsage:
    # A fixed usage: without one FunctionModel estimates tokens by walking the whole history.
    return RequestUsage(input_tokens=100, output_tokens=10)


def _turn(messages: list[ModelMessage]) -> tuple[int, int, int, int] | None:
    """Return (calls wanted, KiB per result, responses already made in this turn, responses in all).

    ``None`` for a request without a command: the compactor's summarising request.
    """
    start = next(
        (
            index
            for index in range(len(messages) - 1, -1, -1)
            if isinstance(messages[index], ModelRequest)
            and any(
                isinstance(part, UserPromptPart) and _COMMAND.match(str(part.content)) for part in messages[index].parts
            )
        ),
        None,
    )
    if start is None:
        return None
    prompt = next(str(part.content) for part in messages[start].parts if isinstance(part, UserPromptPart))
    match = _COMMAND.match(prompt)
    assert match is not None
    kind, first, second = match.groups()
    calls, kib = (1, int(first)) if kind == "big" else (int(first), int(second or 5))
    done = sum(1 for message in messages[start:] if isinstance(message, ModelResponse))
    total = sum(1 for message in messages if isinstance(message, ModelResponse))
    return calls, kib, done, total


async def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Ask for the turn's next ``read`` call, or answer once all were made (or summarise, for the compactor)."""
    turn = _turn(messages)
    if turn is None:
        return ModelResponse(parts=[TextPart("The user had the assistant read many records.")], usage=_usage())
    calls, kib, done, total = turn
    if done < calls:
        # Unique across the session and deterministic given the history.
        return ModelResponse(
            parts=[ToolCallPart("read", {"kib": kib, "n": total}, tool_call_id=f"read-{total}")], usage=_usage()
        )
    return ModelResponse(parts=[TextPart(f"done after {calls} calls")], usage=_usage())


def make_agent() -> Agent[None, str]:
    """Return the agent with its ``read`` tool."""
    agent: Agent[None, str] = Agent(FunctionModel(scripted, model_name="long-session-bench"), name="long_bench")

    @agent.tool_plain
    async def read(kib: int, n: int) -> str:
        """Return ``kib`` KiB of text."""
        line = f"record {n}: the quick brown fox jumps over the lazy dog\n"
        size = kib * 1024
        return (line * (size // len(line) + 1))[:size]

    return agent


def build_flow() -> AgentSessionFlow:
    """Return the bench Flow (the same in the driver and the Worker)."""
    return pydantic_ai_session_flow(
        make_agent(),
        flow_type=FLOW_TYPE,
        tool_policies={"read": ToolPolicy(ToolEffect.READ)},
        usage_limits=UsageLimits(request_limit=REQUEST_LIMIT),
    )
