"""The Pydantic AI side of long sessions: the summary in the model's view, the summariser, old tool results, overflow.

- `summary_request`: the cumulative summary as the first message of the
  replayed history (a ``ModelRequest`` with one user prompt that says what it
  is), in place of the compacted messages.
- `ModelSummaryCompactor`: the default compactor. One summarising request to
  the agent's own model (or the runner's ``model``): instructions, the previous
  summary and a transcript of the covered messages (each tool result cut to
  `TRANSCRIPT_TOOL_RESULT_CHARS`), no tools; its usage is recorded with the
  session's.
- `shorten_old_tool_results`: the request-time budget of old tool results.
  Walking the replayed history from the newest message back, tool results
  are kept whole while their total stays within ``budget_chars``; each older
  one is shown as its start plus a notice that says how long it was and that
  the session stores it whole. Only the model's view changes: the stored
  messages are untouched (history messages are per-load copies, and a
  shortened part replaces the original in that copy's list).
- `is_context_overflow`: whether a model error is the provider refusing the
  context (`ModelContextWindowExceededError`, or an HTTP 400/413 whose body
  names the context length).
- `default_compaction_policy`: the session's policy when the agent sets none.
  Where Pydantic AI knows the model's context window (``Model.context_window``
  of a model object; ``infer_model_profile`` of a model name, offline), the
  context budget is `CONTEXT_WINDOW_SHARE` of it in tokens (the rest is left
  for instructions, tool definitions and the response; the budget counts
  stored JSON, which is longer than what the model is sent); else, and never
  above it, the core's `MAX_CONTEXT_BYTES` default.
"""

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai import direct
from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError, UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, infer_model_profile

from dex_agents.adapters.pydantic_ai import _history
from dex_agents.application.compaction import CompactionPolicy, CompactionSummary
from dex_agents.domain.history import HistorySummary
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.usage import AgentUsage

SUMMARY_HEADER = "[dex-agents: summary of the earlier conversation, which the session compacted]"
"""The first line of the summary message the model reads."""

SUMMARY_INSTRUCTIONS = (
    "You summarise a conversation between a user and an AI assistant so the assistant can continue it "
    "without the original messages. Keep every fact, decision, name, number, identifier, open question and "
    "promise the assistant made; note which tool calls ran and what they returned in short. Fold the previous "
    "summary in. Write plain prose and lists, no preamble."
)
"""The system prompt of the summarising request."""

TRANSCRIPT_TOOL_RESULT_CHARS = 2000
"""Characters of each tool result the summariser reads."""

DEFAULT_TOOL_RESULT_BUDGET_CHARS = 200_000
"""Default characters of old tool results the model reads whole, newest first."""

SHORTENED_TOOL_RESULT_CHARS = 1000
"""Characters an old tool result beyond the budget keeps in the model's view."""

CONTEXT_WINDOW_SHARE = 0.75
"""The share of the model's context window (tokens) the default compaction budget gives the history."""


def model_context_window(model: Model | str | None) -> int | None:
    """Return the context window (tokens) Pydantic AI knows for ``model``, or ``None``.

    A model object answers from its profile; a model name from the profile
    Pydantic AI infers without a provider (no API key, no network). A name
    whose provider package is missing, or that Pydantic AI does not know,
    gives ``None``.
    """
    if model is None:
        return None
    try:
        window = model.context_window if isinstance(model, Model) else infer_model_profile(model).get("context_window")
    except (ImportError, ValueError, UserError):
        return None
    return window if isinstance(window, int) and window > 0 else None


def default_compaction_policy(model: Model | str | None) -> CompactionPolicy:
    """Return the compaction policy of a session whose agent sets none (see the module docstring)."""
    window = model_context_window(model)
    if window is None:
        return CompactionPolicy()
    return CompactionPolicy(context_budget_tokens=max(1024, int(window * CONTEXT_WINDOW_SHARE)))


def summary_request(summary: HistorySummary) -> ModelRequest:
    """Return the summary as the history's first message."""
    return ModelRequest(parts=[UserPromptPart(f"{SUMMARY_HEADER}\n{summary.text}")])


def _part_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content, default=str)
    except (TypeError, ValueError):
        return str(content)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]} [...{len(text) - limit:,} more characters]"


def transcript(messages: Sequence[ModelMessage]) -> str:
    """Return ``messages`` as plain text for the summariser, each tool result cut to a bounded length."""
    lines: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                lines.append(f"User: {_part_text(part.content)}")
            elif isinstance(part, TextPart):
                lines.append(f"Assistant: {part.content}")
            elif isinstance(part, ToolCallPart):
                lines.append(f"Assistant called {part.tool_name}({part.args_as_json_str()})")
            elif isinstance(part, ToolReturnPart):
                result = _cut(part.model_response_str(), TRANSCRIPT_TOOL_RESULT_CHARS)
                lines.append(f"Tool {part.tool_name} returned: {result}")
    return "\n".join(lines)


class ModelSummaryCompactor:
    """Summarises with one request to a Pydantic AI model (the runner's default compactor)."""

    def __init__(self, model: Model | str) -> None:
        """``model``: the model that summarises (the agent's own by default)."""
        self._model = model

    async def compact(self, messages: Sequence[AgentMessage], previous_summary: str | None) -> CompactionSummary:
        """Return the new cumulative summary and the request's usage."""
        covered = _history.load_messages([message.framework_item for message in messages])
        previous = "(none: this is the first summary)" if previous_summary is None else previous_summary
        prompt = (
            f"Previous summary:\n{previous}\n\nConversation since then:\n{transcript(covered)}\n\n"
            "Write the new summary of the whole conversation."
        )
        request = ModelRequest(parts=[SystemPromptPart(SUMMARY_INSTRUCTIONS), UserPromptPart(prompt)])
        response = await direct.model_request(self._model, [request])
        usage = AgentUsage(
            model_calls=1,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            cached_input_tokens=response.usage.cache_read_tokens,
            reasoning_tokens=response.usage.output_reasoning_tokens,
        )
        return CompactionSummary(_response_text(response), usage=usage)


def _response_text(response: ModelResponse) -> str:
    return "".join(part.content for part in response.parts if isinstance(part, TextPart)).strip()


def shortened_notice(length: int, kept: int) -> str:
    """The notice that ends a shortened tool result in the model's view."""
    return (
        f"\n[dex-agents: this earlier tool result was {length:,} characters; only its first {kept:,} are shown "
        "here to keep the context small. The session stores it whole; call the tool again if you need the rest.]"
    )


def shorten_old_tool_results(
    messages: list[ModelMessage], *, budget_chars: int, keep_chars: int = SHORTENED_TOOL_RESULT_CHARS
) -> int:
    """Shorten, in place, the tool results beyond ``budget_chars`` (counted from the newest); return how many."""
    used = 0
    shortened = 0
    for message in reversed(messages):
        if not isinstance(message, ModelRequest):
            continue
        if not isinstance(message.parts, list):
            message.parts = list(message.parts)
        for index in range(len(message.parts) - 1, -1, -1):
            part = message.parts[index]
            if type(part) is not ToolReturnPart:
                continue  # a framework's own return kind (tool search, capabilities) is left whole
            text = part.model_response_str()
            if used + len(text) <= budget_chars or len(text) <= keep_chars:
                used += len(text)
                continue
            replace: Any = dataclasses.replace
            message.parts[index] = replace(part, content=text[:keep_chars] + shortened_notice(len(text), keep_chars))
            used += keep_chars
            shortened += 1
    return shortened


_OVERFLOW_WORDS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "maximum context",
    "request too large",
)


def is_context_overflow(error: BaseException) -> bool:
    """Whether ``error`` is the provider refusing the model call's context as too long."""
    if isinstance(error, ModelContextWindowExceededError):
        return True
    if isinstance(error, ModelHTTPError) and error.status_code in (400, 413):
        body = f"{error.body} {error.message}".lower()
        return any(word in body for word in _OVERFLOW_WORDS)
    return False
