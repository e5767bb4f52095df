"""A sagent provider model (`MockModelCaps`) that follows a JSON script in the turn's user message.

The user message is ``{"name": "...", "steps": [step, ...]}``. The model's
n-th call after that message answers ``steps[n]``; once the steps run out it
answers ``"@summary"``. A step is:

- a list of calls ``[[id, name, args], ...]``;
- a string: the response text. ``"@summary"`` lists the tool results the model
  was just given (``name[ok|error]=content; ...``, in call order);
  ``"@context"`` is JSON of the system prompt and the user texts it saw;
- an object with any of ``think``, ``text``, ``calls``, ``fail`` (the model
  raises ``RuntimeError``) and ``gate`` (handed to ``before_response``, which
  may block), ``stop`` (the response's ``stop_reason``), ``overflow`` (the
  model raises sagent's ``PromptTooLongError`` unless a compaction summary
  opens the request).

A request from sagent's ``SummaryCompactor`` (its system prompt) is answered
with ``<summary>`` listing what it was given, oldest first: ``summary`` and
the items of an earlier summary, ``script <name>`` for a script, the text of any other user
message, ``result <call ID>`` for a tool result (script name ``@compact``).

Text and thinking stream in two halves each. Every response reports
``TokenCount(request=100, response=20, cache_read=30)`` and a spend of
0.001 + 0.002 USD.
"""

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
from sagent.testing import MockModelCaps
from sagent.tools.core import read_asset, recipe_dict
from sagent.types.cost import TokenCost, TokenCount
from sagent.types.model import ModelRequest, ModelResponse, PromptTooLongError
from sagent.types.runtime import (
    AssistantMessage,
    ModelResponsePartial,
    ModelResponseThinking,
    RuntimeEvent,
    ToolCall,
    ToolResult,
    UserMessage,
)

Step = str | list[Any] | dict[str, Any]

TOKENS = TokenCount(request=100, response=20, cache_read=30)
SPEND = TokenCost(request=0.001, response=0.002)


def script(*steps: Step, name: str = "turn") -> str:
    """Return the user message that makes the model answer ``steps`` in order."""
    return json.dumps({"name": name, "steps": list(steps)})


def call(tool_call_id: str, name: str, **args: Any) -> list[Any]:
    """Return one tool call of a step."""
    return [tool_call_id, name, args]


@attrs.frozen(kw_only=True)
class ModelCall:
    """One call of the scripted model."""

    script: str
    step: int
    gate: str | None
    request: ModelRequest


BeforeResponse = Callable[[ModelCall], Awaitable[None]]


def _load(text: str) -> dict[str, Any] | None:
    # sagent merges adjacent user messages with blank lines: the newest script is the last one.
    for chunk in reversed(text.split("\n\n")):
        if not chunk.startswith("{"):
            continue
        try:
            loaded = json.loads(chunk)
        except ValueError:
            continue
        if isinstance(loaded, dict) and "steps" in loaded:
            return loaded
    return None


def current_script(messages: Sequence[object]) -> tuple[dict[str, Any], int]:
    """Return the newest script in ``messages`` and how many responses followed it."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage) and (loaded := _load(message.text)) is not None:
            answered = sum(isinstance(m, AssistantMessage) for m in messages[index + 1 :])
            return loaded, answered
    return {"name": "plain", "steps": []}, 0


def summary(messages: Sequence[object]) -> str:
    """List the results after the last response, in its call order."""
    last = next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)
    if last is None:
        return ""
    results = {m.call_id: m for m in messages if isinstance(m, ToolResult)}
    parts = []
    for tool_call in last.tool_calls:
        result = results.get(tool_call.id)
        if result is not None:
            parts.append(f"{tool_call.name}[{'error' if result.is_error else 'ok'}]={result.content}")
    return "; ".join(parts)


def context(request: ModelRequest) -> str:
    users = [m.text for m in request.messages if isinstance(m, UserMessage)]
    return json.dumps({"system": request.system, "users": users, "tools": [t.name for t in request.tools]})


SUMMARY_MARK = "Summary:\n"
"""What sagent's continuation message holds before the summary text."""


def compactor_system() -> str:
    return read_asset(recipe_dict("compactor")["system"]).strip()


def has_summary(messages: Sequence[object]) -> bool:
    return any(isinstance(m, UserMessage) and SUMMARY_MARK in m.text for m in messages)


def compaction_answer(messages: Sequence[object]) -> str:
    """List what a compaction request was given (its last message, the instructions, left out)."""
    seen: list[str] = []
    for message in messages[:-1]:
        if isinstance(message, UserMessage):
            for chunk in message.text.split("\n\n"):
                if SUMMARY_MARK in chunk:
                    # Fold the earlier summary in, as a summariser does: its items first.
                    body = chunk.split(SUMMARY_MARK, 1)[1].split("\nResume work", 1)[0]
                    seen.extend(["summary", *(item for item in body.split(" | ") if item != "summary")])
                elif (loaded := _load(chunk)) is not None:
                    seen.append(f"script {loaded['name']}")
                elif chunk.strip() and not chunk.startswith(("Another language model", "Resume work")):
                    seen.append(chunk.strip()[:60])
        elif isinstance(message, ToolResult):
            seen.append(f"result {message.call_id}")
    return "<analysis>scratch</analysis><summary>" + " | ".join(dict.fromkeys(seen)) + "</summary>"


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]


class ScriptedModel(MockModelCaps):
    """A rich sagent ``Model`` whose answers come from the script in the conversation."""

    model_id = "scripted"

    def __init__(self, *, before_response: BeforeResponse | None = None) -> None:
        self.calls: list[ModelCall] = []
        self._before_response = before_response

    async def buffer(self, request: ModelRequest) -> ModelResponse:
        return await self.stream(request)

    async def stream(
        self, request: ModelRequest, publish: Callable[[RuntimeEvent], None] | None = None
    ) -> ModelResponse:
        if request.system == compactor_system():
            compaction = ModelCall(script="@compact", step=0, gate=None, request=request)
            self.calls.append(compaction)
            if self._before_response is not None:
                await self._before_response(compaction)
            answer = AssistantMessage(text=compaction_answer(request.messages))
            return ModelResponse(message=answer, tokens=TOKENS, spend=SPEND, stop_reason="model_finished")
        loaded, index = current_script(request.messages)
        steps = loaded["steps"]
        step: Step = steps[index] if index < len(steps) else "@summary"
        if isinstance(step, list):
            step = {"calls": step}
        if isinstance(step, str):
            step = {"text": step}
        model_call = ModelCall(script=loaded["name"], step=index, gate=step.get("gate"), request=request)
        self.calls.append(model_call)
        if self._before_response is not None:
            await self._before_response(model_call)
        if "fail" in step:
            raise RuntimeError(step["fail"])
        if step.get("overflow") and not has_summary(request.messages):
            raise PromptTooLongError(
                "prompt is too long: 210000 tokens > 200000", actual_tokens=210_000, limit_tokens=200_000
            )
        text = step.get("text") or ""
        if text == "@summary":
            text = summary(request.messages)
        elif text == "@context":
            text = context(request)
        think = step.get("think") or ""
        if publish is not None:
            for piece in _halves(think):
                publish(ModelResponseThinking(text=piece))
            for piece in _halves(text):
                publish(ModelResponsePartial(text=piece))
        calls = tuple(ToolCall(id=str(c[0]), name=str(c[1]), args=dict(c[2])) for c in step.get("calls", []))
        blocks = ({"type": "thinking", "thinking": think, "signature": "sig"},) if think else ()
        message = AssistantMessage(text=text, thinking_blocks=blocks, tool_calls=calls)
        stop = step.get("stop") or ("model_tool_use" if calls else "model_finished")
        return ModelResponse(message=message, tokens=TOKENS, spend=SPEND, stop_reason=stop)
