"""What a tool Step's `RunContext` carries from the model Step that asked for the call.

In a plain run a tool runs inside the run, so its ``RunContext`` reads the
run's state. A session runs it in its own Step, later, maybe on another
Worker; the model Step that asked for the call hands that state on in the
call's record (`DeferredToolCall.framework_state`, under the key
``"context"`` of the runner's per-call JSON object), and the tool Step
rebuilds the context from it, on the direct path and in the agent run alike:

| ``RunContext``  | in the tool Step                                                       |
|-----------------|------------------------------------------------------------------------|
| ``prompt``      | the turn's user prompt (the run's ``user_prompt``)                      |
| ``run_step``    | the turn's model request that asked for the call (1 for the first)      |
| ``usage``       | the turn's usage when that response arrived; the tool adds to it, and   |
|                 | the Step reports only what it added                                     |
| ``messages``    | the turn's history up to that response (earlier turns included), for a  |
|                 | tool that declares ``metadata=run_messages()``; otherwise only the call |

Runs as a plain run has them: a plain run ends at a response with a call it
defers (one asking for approval, an external one), and the user's resumed
run has no prompt and counts its steps from 0. So a call asking for approval
gets a new run's context (no prompt, ``run_step`` 0, fresh usage), and the
calls of later responses no prompt and the steps since that response (as the
model Steps' ``run_step``, `dex_agents.adapters.pydantic_ai._run_nodes`) and
the usage of those responses (the resumed run's).

The tool's definition is the one the model Step's ``prepare`` /
``prepare_tools`` produced: its ``description``, ``strict`` and ``timeout``
travel too (``"tool"``), and the tool Step uses them instead of its own
(a direct call does not run ``prepare`` at all).

``run_messages()``: the run's messages cost a tool Step a load of every
stored message in the model's window and the turn's run state, and their
decoding, on every call; a tool that reads ``ctx.messages`` asks for them
(see ``docs/pydantic-ai-adapter.md``). A record written before this
context existed decodes as none (the context a fresh run gives).
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.usage import RunUsage

from dex_agents.adapters.pydantic_ai._history import UserPrompt
from dex_agents.adapters.pydantic_ai._tool_state import load_state
from dex_agents.adapters.pydantic_ai._usage import copy_usage, dump_run_usage, load_run_usage

RUN_MESSAGES_METADATA_KEY = "dex_agents_run_messages"
"""The tool metadata key with which a tool asks for the run's messages in its Step."""

CONTEXT_KEY = "context"
"""The key of the tool Step's context in the runner's per-call JSON object."""

_PROMPT = TypeAdapter(UserPrompt)


def run_messages() -> dict[str, Any]:
    """Return the tool metadata with which a tool reads the run's messages (``ctx.messages``) in its Step."""
    return {RUN_MESSAGES_METADATA_KEY: True}


def reads_run_messages(definition: ToolDefinition | None) -> bool:
    """Whether the tool's definition asks for the run's messages."""
    return definition is not None and (definition.metadata or {}).get(RUN_MESSAGES_METADATA_KEY) is True


@dataclass(frozen=True)
class PreparedFields:
    """What the model Step's ``prepare`` set on the tool's definition that the tool Step uses."""

    description: str | None = None
    strict: bool | None = None
    timeout: float | None = None

    @classmethod
    def of(cls, definition: ToolDefinition) -> "PreparedFields":
        """Return the fields of ``definition``."""
        return cls(description=definition.description, strict=definition.strict, timeout=definition.timeout)

    def apply(self, definition: ToolDefinition) -> ToolDefinition:
        """Return ``definition`` with these fields."""
        if (definition.description, definition.strict, definition.timeout) == (
            self.description,
            self.strict,
            self.timeout,
        ):
            return definition
        return replace(definition, description=self.description, strict=self.strict, timeout=self.timeout)


@dataclass(frozen=True)
class ToolStepContext:
    """The run state a tool Step's `RunContext` carries (see the module docstring)."""

    prompt: UserPrompt | None = None
    run_step: int = 1
    usage: RunUsage = field(default_factory=RunUsage)
    prepared: PreparedFields | None = None
    """The tool's definition as prepared; ``None``: unknown (the Step prepares it itself)."""
    retries: int = 0
    """The tool's retry count in the turn; kept under its own key (`dex_agents.adapters.pydantic_ai._tool_state`),
    not in ``"context"``."""
    messages: list[ModelMessage] | None = field(default=None, compare=False)
    """The run's messages up to the call, for a tool that asked for them (never in the record)."""

    def apply(self, ctx: RunContext[Any]) -> None:
        """Give a tool call's own context (a copy Pydantic AI makes per call) the turn's prompt and step."""
        ctx.prompt = self.prompt
        ctx.run_step = self.run_step
        if self.messages is not None:
            ctx.messages = self.messages

    def applied(self, ctx: RunContext[Any]) -> RunContext[Any]:
        """Return a copy of ``ctx`` with the turn's prompt and step."""
        if self.messages is None:
            return replace(ctx, prompt=self.prompt, run_step=self.run_step)
        return replace(ctx, prompt=self.prompt, run_step=self.run_step, messages=self.messages)

    def fresh_usage(self) -> RunUsage:
        """A copy of the turn's usage for the tool's ``ctx.usage``."""
        return copy_usage(self.usage)

    def to_json(self) -> dict[str, Any]:
        """Return the context as the JSON value of ``"context"``."""
        data: dict[str, Any] = {"run_step": self.run_step, "usage": dump_run_usage(self.usage)}
        if self.prompt is not None:
            data["prompt"] = _PROMPT.dump_python(self.prompt, mode="json")
        if self.prepared is not None:
            prepared = {
                "description": self.prepared.description,
                "strict": self.prepared.strict,
                "timeout": self.prepared.timeout,
            }
            data["tool"] = {key: value for key, value in prepared.items() if value is not None}  # absent reads as None
        return data

    @classmethod
    def from_json(cls, data: object) -> "ToolStepContext | None":
        """Read a context `to_json` wrote; ``None`` for anything else."""
        if not isinstance(data, Mapping):
            return None
        try:
            run_step = data.get("run_step", 1)
            usage = load_run_usage(data["usage"]) if "usage" in data else RunUsage()
            prompt = _PROMPT.validate_python(data["prompt"]) if "prompt" in data else None
            tool = data.get("tool")
            prepared = None
            if isinstance(tool, Mapping):
                prepared = PreparedFields(
                    description=tool.get("description"), strict=tool.get("strict"), timeout=tool.get("timeout")
                )
        except (ValidationError, KeyError, TypeError, ValueError):
            return None
        return cls(prompt=prompt, run_step=run_step if isinstance(run_step, int) else 1, usage=usage, prepared=prepared)


def encode_context(context: ToolStepContext, state: str | None = None) -> str:
    """Return the per-call JSON object ``state`` (``None``: an empty one) with ``context`` under ``"context"``."""
    data: dict[str, Any] = {}
    if state:
        try:
            loaded = json.loads(state)
        except ValueError:
            loaded = None
        if isinstance(loaded, dict):
            data = loaded
    data[CONTEXT_KEY] = context.to_json()
    return json.dumps(data, separators=(",", ":"))


class ContextTexts:
    """Writes the per-call states of the calls of one model response, over one base context.

    The calls of one response share the turn's prompt, run step and usage (``base``); their contexts
    differ only by the tool's prepared definition, and a call a plain run defers gets a new run's
    context. Each distinct context's JSON is built once, and each state's text is the one
    `encode_context` writes for that call's context. Only for one model Step's outcome: ``base``
    does not change meanwhile.
    """

    def __init__(self, base: "ToolStepContext") -> None:
        self._base = base
        self._data: dict[tuple[PreparedFields | None, bool], dict[str, Any]] = {}

    def encode(self, prepared: PreparedFields | None, *, new_run: bool, retries: int) -> str:
        """Return the per-call JSON object of one call: its context, and the tool's ``retries`` in the turn.

        The context is the base's with ``prepared``; ``new_run``: a new run's (``run_step`` 0, no prompt or usage).
        """
        key = (prepared, new_run)
        data = self._data.get(key)
        if data is None:
            data = self._data[key] = self.context(prepared, new_run=new_run).to_json()
        state: dict[str, Any] = {"retries": retries} if retries else {}
        state[CONTEXT_KEY] = data
        return json.dumps(state, separators=(",", ":"))

    def context(self, prepared: PreparedFields | None, *, new_run: bool) -> "ToolStepContext":
        """Return the call's context itself."""
        if new_run:
            return ToolStepContext(prepared=prepared, run_step=0)
        return replace(self._base, prepared=prepared)


def decode_context(state: str | None) -> ToolStepContext | None:
    """Return the context in a record's per-call state, or ``None`` when it holds none."""
    return context_of(load_state(state))


def context_of(loaded: Mapping[str, Any] | None) -> ToolStepContext | None:
    """Return the context in a loaded per-call state (`load_state`), or ``None`` when it holds none."""
    if loaded is None:
        return None
    return ToolStepContext.from_json(loaded.get(CONTEXT_KEY))
