"""The scripted turn shared by every configuration.

One user turn = K model calls that each ask for M calls of the ``work`` tool, then one model call
that answers with text. So a turn makes K+1 model calls and K*M tool calls.

The prompt carries the shape, e.g. ``"bench k=5 m=4 turn=3"``, so one agent serves every K and M.
The model is a ``FunctionModel``: no API key, no network, a few microseconds per call.

Every configuration builds its agent with `make_agent` (plain, DBOS, dex-agents) or the same
``Agent(make_model(), ...)`` plus `work_body` (Temporal, whose agent must live at module level).

This module must stay import-safe inside Temporal's workflow sandbox (no I/O at import time).
"""

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.usage import RequestUsage

TOOL_NAME = "work"
_SHAPE = re.compile(r"k=(\d+)\s+m=(\d+)")


def make_prompt(k: int, m: int, turn: int = 1) -> str:
    """Return the user prompt of one turn of shape K x M."""
    return f"bench k={k} m={m} turn={turn}"


def _current_turn(messages: list[ModelMessage]) -> tuple[int, int, int]:
    """Return (k, m, model responses already made in this turn)."""
    start = None
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, ModelRequest) and any(isinstance(p, UserPromptPart) for p in msg.parts):
            start = i
            break
    if start is None:
        raise RuntimeError("no user prompt in history")
    prompt = next(p for p in messages[start].parts if isinstance(p, UserPromptPart))
    content = prompt.content if isinstance(prompt.content, str) else str(prompt.content)
    match = _SHAPE.search(content)
    if match is None:
        raise RuntimeError(f"prompt does not carry k= and m=: {content!r}")
    done = sum(1 for msg in messages[start:] if isinstance(msg, ModelResponse))
    return int(match.group(1)), int(match.group(2)), done


def _usage() -> RequestUsage:
    # A fixed usage on every response: without one FunctionModel estimates tokens by walking the
    # whole history on every call, a cost no real model client has.
    return RequestUsage(input_tokens=100, output_tokens=10)


async def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: K responses with M ``work`` calls each, then a text answer."""
    # `async def` on purpose: FunctionModel runs a plain `def` in a worker thread on every call.
    k, m, done = _current_turn(messages)
    if done < k:
        # Tool call ids must be unique across the whole session, and deterministic given the history.
        seq = sum(1 for msg in messages if isinstance(msg, ModelResponse))
        return ModelResponse(
            parts=[ToolCallPart(TOOL_NAME, {"n": seq * 1000 + j}, tool_call_id=f"call-{seq}-{j}") for j in range(m)],
            usage=_usage(),
        )
    returns = sum(
        1 for msg in messages if isinstance(msg, ModelRequest) for p in msg.parts if isinstance(p, ToolReturnPart)
    )
    return ModelResponse(parts=[TextPart(f"done: {returns} tool results in history")], usage=_usage())


async def scripted_stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    """The same model, streamed: the whole response of `scripted` in one chunk.

    dex-agents' Pydantic AI runner makes streamed requests (it forwards text deltas to the
    session's live events); the peers make plain requests. Both get the same parts.
    """
    response = await scripted(messages, info)
    calls: DeltaToolCalls = {}
    for index, part in enumerate(response.parts):
        if isinstance(part, ToolCallPart):
            calls[index] = DeltaToolCall(part.tool_name, json.dumps(part.args), tool_call_id=part.tool_call_id)
        elif isinstance(part, TextPart):
            yield part.content
    if calls:
        yield calls


def make_model() -> FunctionModel:
    """Return the scripted model (plain and streamed requests)."""
    return FunctionModel(scripted, stream_function=scripted_stream, model_name="scripted-bench")


async def work_body(n: int) -> str:
    """The trivial tool: no I/O, returns a short string."""
    return f"result {n}"


def make_agent(
    name: str,
    capabilities: Sequence[AbstractCapability[None]] = (),
    tool: Callable[[int], Awaitable[str]] = work_body,
) -> Agent[None, str]:
    """Return the bench agent with the ``work`` tool (plain, DBOS and dex-agents use this).

    ``tool`` replaces the tool's function (DBOS wraps `work_body` in a ``DBOS.step``); the model
    sees the same tool either way: ``work(n: int) -> str``.
    """
    agent = Agent(make_model(), name=name, capabilities=list(capabilities))
    agent.tool_plain(name=TOOL_NAME)(tool)
    return agent
