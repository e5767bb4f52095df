"""The runner's per-call state (`AgentToolCall.framework_state`): what a tool Step needs and what it gave Pydantic AI.

One JSON object, every key optional:

- ``retries`` (written by the model Step, `DeferredToolCall.framework_state`):
  the tool's retry count in the turn when its call runs (Pydantic AI's
  ``ctx.retries[tool]``); absent: 0.
- ``parts`` (written by the tool Step, `ToolExecutionResult` or
  `ToolExecutionError`): what the tool gave Pydantic AI, as JSON text that
  Pydantic AI's own type adapter of request parts (``list[ModelRequestPart]``)
  wrote: the call's return part (``success``, ``retried`` or ``failed``, with
  its ``content`` of any type, ``metadata`` and ``retry``), then the
  ``ToolAvailabilityDeltaPart`` of ``ToolReturn.tools`` and the
  ``UserPromptPart`` of ``ToolReturn.content`` when the tool gave them. (An
  early form kept them as a ``ModelRequest`` under ``result``, through
  ``ModelMessagesTypeAdapter``; it still reads.)
- ``exceeded`` (written by the tool Step): the message of the
  ``UnexpectedModelBehavior`` Pydantic AI raised: the tool ran out of retries.

The model Step also writes the tool Step's context under ``context``
(`dex_agents.adapters.pydantic_ai._tool_context`). Whatever the tool Step
ends with replaces the whole object (``retries`` kept, ``{}`` when nothing is
left): the context is for the tool Step alone, and a finished record is read
by every later model Step of the turn.

A resumed run rebuilds the call's result from ``result`` (`result_parts`), so
it gets back the value the tool returned, not its text. A record without
``result`` (a reconciled call, or a record written before the runner kept
values: the state was ``None`` then) falls back to its text
(`AgentToolCall.output` / ``error``); text that is not this JSON object
decodes as an empty state.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai import ModelMessagesTypeAdapter
from pydantic_ai.messages import ModelRequest, ModelRequestPart

_PARTS: TypeAdapter[list[ModelRequestPart]] = TypeAdapter(list[ModelRequestPart])


def load_state(text: str | None) -> dict[str, Any] | None:
    """Return the per-call JSON object of ``text``, or ``None`` when it is empty or not such an object."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class ToolCallState:
    """The decoded per-call state (see the module docstring)."""

    retries: int = 0
    """The tool's retry count in the turn when the call runs."""
    result: tuple[ModelRequestPart, ...] | None = None
    """What the tool gave Pydantic AI, or ``None`` when the tool Step kept no value."""
    exceeded: str | None = None
    """Pydantic AI's message when the tool ran out of retries in its Step."""

    def encode(self) -> str | None:
        """Return the state as text, or ``None`` when it holds nothing."""
        data = self.to_data()
        return json.dumps(data, separators=(",", ":")) if data else None

    def to_data(self) -> dict[str, Any]:
        """Return the state as the JSON object `encode` writes (empty when it holds nothing)."""
        data: dict[str, Any] = {}
        if self.retries:
            data["retries"] = self.retries
        if self.result is not None:
            data["parts"] = _PARTS.dump_json(list(self.result)).decode()
        if self.exceeded is not None:
            data["exceeded"] = self.exceeded
        return data

    @classmethod
    def decode(cls, text: str | None) -> "ToolCallState":
        """Read a state; ``None`` or text this runner did not write is an empty state."""
        return cls.from_data(load_state(text))

    @classmethod
    def from_data(cls, data: dict[str, Any] | None) -> "ToolCallState":
        """Read a state from its loaded JSON object (`load_state`); ``None`` is an empty state."""
        if data is None:
            return cls()
        retries = data.get("retries", 0)
        parts_text = data.get("parts")
        request_text = data.get("result")
        exceeded = data.get("exceeded")
        result: tuple[ModelRequestPart, ...] | None = None
        if isinstance(parts_text, str):
            result = tuple(_PARTS.validate_json(parts_text))
        elif isinstance(request_text, str):
            messages = ModelMessagesTypeAdapter.validate_json(request_text)
            result = tuple(part for message in messages if isinstance(message, ModelRequest) for part in message.parts)
        return cls(
            retries=retries if isinstance(retries, int) else 0,
            result=result,
            exceeded=exceeded if isinstance(exceeded, str) else None,
        )

    def with_result(self, parts: Sequence[ModelRequestPart]) -> "ToolCallState":
        """This state with the tool Step's ``result``."""
        return ToolCallState(retries=self.retries, result=tuple(parts), exceeded=self.exceeded)
