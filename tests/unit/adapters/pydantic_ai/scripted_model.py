"""A `FunctionModel` that follows a JSON script in the turn's user prompt (no API key needed).

The user prompt is a JSON object ``{"name": "...", "steps": [step, ...]}``. The
model's n-th call after that prompt answers ``steps[n]``; once the steps run
out it answers ``"@summary"``. A step is:

- a list of calls ``[[id, name, args], ...]``;
- a string: the response text. ``"@summary"`` lists the tool returns the model
  was just given (``name[outcome]=text; ...``); ``"@context"`` is JSON of the
  system prompts, user prompts and instructions the model saw;
- an object with any of ``think`` (thinking text), ``text`` (text, or one of the
  ``@`` forms), ``calls``, ``output`` (arguments of a call of the first output
  tool), ``fail`` (the model raises ``RuntimeError`` with this text) and
  ``gate`` (a name handed to the ``before_response`` hook, which may block).

The model streams when asked to (thinking and text in two chunks each), so the
same script drives streamed and non-streamed requests.
"""

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import attrs
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel

Step = str | list[Any] | dict[str, Any]


@attrs.frozen(kw_only=True)
class ModelCall:
    """One call of the scripted model."""

    script: str
    """The script's ``name``."""
    step: int
    """Which step it answered."""
    gate: str | None
    """The step's gate, if any."""
    messages: tuple[ModelMessage, ...]
    """What the model was sent."""
    tool_names: tuple[str, ...]
    """The function tools offered."""


BeforeResponse = Callable[[ModelCall], Awaitable[None]]


def script(*steps: Step, name: str = "turn") -> str:
    """Return the user prompt that makes the model answer ``steps`` in order."""
    return json.dumps({"name": name, "steps": list(steps)})


def call(tool_call_id: str, name: str, **args: Any) -> list[Any]:
    """Return one tool call of a step."""
    return [tool_call_id, name, args]


def _load_script(content: object) -> dict[str, Any] | None:
    if not isinstance(content, str) or not content.startswith("{"):
        return None
    try:
        loaded = json.loads(content)
    except ValueError:
        return None
    return loaded if isinstance(loaded, dict) and "steps" in loaded else None


def _current_script(messages: Sequence[ModelMessage]) -> tuple[dict[str, Any], int]:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart) and (loaded := _load_script(part.content)) is not None:
                    answered = sum(isinstance(m, ModelResponse) for m in messages[index + 1 :])
                    return loaded, answered
    return {"name": "plain", "steps": []}, 0


def _summary(messages: Sequence[ModelMessage]) -> str:
    returns: list[ToolReturnPart] = []
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            break
        returns[:0] = [p for p in message.parts if isinstance(p, ToolReturnPart)]
    return "; ".join(f"{r.tool_name}[{r.outcome}]={r.model_response_str(wrap_if_error=False)}" for r in returns)


def _context(messages: Sequence[ModelMessage], info: AgentInfo) -> str:
    system = [
        p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, SystemPromptPart)
    ]
    users = [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart) and isinstance(p.content, str)
    ]
    return json.dumps({"system": system, "users": users, "instructions": info.instructions})


@attrs.frozen(kw_only=True)
class _Plan:
    think: str | None = None
    text: str | None = None
    calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    fail: str | None = None
    gate: str | None = None


def _plan(step: Step, messages: Sequence[ModelMessage], info: AgentInfo, index: int) -> _Plan:
    if isinstance(step, list):
        step = {"calls": step}
    if isinstance(step, str):
        step = {"text": step}
    text = step.get("text")
    if text == "@summary":
        text = _summary(messages)
    elif text == "@context":
        text = _context(messages, info)
    calls = [(str(c[0]), str(c[1]), dict(c[2])) for c in step.get("calls", [])]
    if "output" in step:
        calls.append((f"output-{index}", info.output_tools[0].name, dict(step["output"])))
    return _Plan(think=step.get("think"), text=text, calls=tuple(calls), fail=step.get("fail"), gate=step.get("gate"))


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]


class ScriptedModel:
    """Builds `FunctionModel`s that follow scripts and records every call."""

    def __init__(self, *, before_response: BeforeResponse | None = None) -> None:
        self.calls: list[ModelCall] = []
        self._before_response = before_response

    def model(self) -> FunctionModel:
        """Return a `FunctionModel` answering with ``function`` and ``stream_function``."""
        return FunctionModel(self._respond, stream_function=self._stream, model_name="scripted")

    async def _prepare(self, messages: list[ModelMessage], info: AgentInfo) -> _Plan:
        loaded, answered = _current_script(messages)
        steps: list[Step] = loaded["steps"]
        step: Step = steps[answered] if answered < len(steps) else "@summary"
        plan = _plan(step, messages, info, answered)
        model_call = ModelCall(
            script=str(loaded["name"]),
            step=answered,
            gate=plan.gate,
            messages=tuple(messages),
            tool_names=tuple(t.name for t in info.function_tools),
        )
        self.calls.append(model_call)
        if self._before_response is not None:
            await self._before_response(model_call)
        if plan.fail is not None:
            raise RuntimeError(plan.fail)
        return plan

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        plan = await self._prepare(messages, info)
        parts: list[ModelResponsePart] = []
        if plan.think:
            parts.append(ThinkingPart(plan.think))
        if plan.text:
            parts.append(TextPart(plan.text))
        parts.extend(ToolCallPart(name, args, tool_call_id=call_id) for call_id, name, args in plan.calls)
        return ModelResponse(parts=parts)

    async def _stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | dict[int, DeltaToolCall] | dict[int, DeltaThinkingPart]]:
        plan = await self._prepare(messages, info)
        if plan.think:
            for piece in _halves(plan.think):
                yield {0: DeltaThinkingPart(content=piece)}
        if plan.text:
            for piece in _halves(plan.text):
                yield piece
        for offset, (call_id, name, args) in enumerate(plan.calls, start=1):
            yield {offset: DeltaToolCall(name=name, json_args=json.dumps(args), tool_call_id=call_id)}


def order_agent(model: ScriptedModel, **kwargs: object) -> Agent[None, str]:
    """An agent on ``model`` (``kwargs``: its options) with one tool, ``find_order``, which answers ``delivered``."""
    agent: Agent[None, str] = Agent(model.model(), **kwargs)  # type: ignore[call-overload]

    @agent.tool_plain
    def find_order(order_id: str) -> str:
        return "delivered"

    return agent
