"""Between sagent's values and the session's, for `SagentRunner`.

The stored summary (and the tool state its first line carries), usage, the
run state a turn carries across its Steps, and each answered call's
``ToolResult``.
"""

import json
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from sagent.agent.agent import Agent
from sagent.types.exceptions import ContextOverflowError as SagentContextOverflowError
from sagent.types.model import Model, ModelRequest, ModelResponse, PromptTooLongError, RequestTooLargeError
from sagent.types.runtime import AgentSendMessage, AssistantMessage, RuntimeEvent, ToolCall, ToolResult, UserMessage

from dex_agents.adapters.sagent import _effects
from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.failure_note import describe_tool_call_outcome
from dex_agents.domain.history import HistorySummary
from dex_agents.domain.tools import AgentToolCall, ToolCallStatus
from dex_agents.domain.turn_control import cancel_rejection_message
from dex_agents.domain.usage import AgentUsage

TOOL_STATE_LINE = "[sagent tool state] "
"""How a stored summary's first line starts when it carries the session's tool state (JSON follows)."""


def split_summary(text: str) -> tuple[str, dict[str, object] | None]:
    """Return a stored summary's text for the model and the tool state its first line carries, if any.

    `SagentRunner.compact` puts the newest tool state of what it covers on
    the summary's first line, so a compaction that covers every completed
    turn does not lose it (Edit/Write's read cache, the Bash working
    directory); the model never reads that line. A line that does not parse
    (a summary cut short by the session's size limit) carries nothing.
    """
    if not text.startswith(TOOL_STATE_LINE):
        return text, None
    line, _, rest = text.partition("\n\n")
    try:
        loaded = json.loads(line.removeprefix(TOOL_STATE_LINE))
    except ValueError:
        return rest, None
    return rest, loaded if isinstance(loaded, dict) else None


def summary_message(summary: HistorySummary) -> UserMessage:
    """Return the stored summary as the first entry of the model's history, in place of what it covers.

    The text is what `SagentRunner.compact` returned, without its tool-state
    line: sagent's own continuation message (it says it is a handoff summary).
    """
    return UserMessage(text=split_summary(summary.text)[0])


def render_payload(payload: Sequence[object]) -> str:
    """Return a compaction splice's payload as one text: its user messages as they are, other entries labelled.

    sagent's ``SummaryCompactor`` answers with one continuation ``UserMessage``
    (the summary, with any trailing user messages it kept merged in); a
    compactor that keeps a tail of calls and results has them written out, so
    nothing it kept is lost from the stored summary.
    """
    parts: list[str] = []
    for entry in payload:
        match entry:
            case UserMessage() | AgentSendMessage():
                parts.append(entry.text)
            case AssistantMessage():
                calls = "".join(
                    f"\n[tool call {call.id}] {call.name} {json.dumps(dict(call.args), ensure_ascii=False)}"
                    for call in entry.tool_calls
                )
                parts.append(f"[assistant] {entry.text}{calls}")
            case ToolResult():
                parts.append(f"[tool result {entry.call_id}{' error' if entry.is_error else ''}] {entry.content}")
            case _:
                parts.append(str(entry))
    return "\n\n".join(part for part in parts if part.strip())


class MeteredModel:
    """The agent's model, counting the usage of every response a compaction gets through it."""

    def __init__(self, model: Model) -> None:
        self._model = model
        self.usage = AgentUsage()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    async def stream(
        self, request: ModelRequest, publish: Callable[[RuntimeEvent], None] | None = None
    ) -> ModelResponse:
        response = await self._model.stream(request=request, publish=publish)
        self.usage = self.usage + agent_usage(response)
        return response

    async def buffer(self, request: ModelRequest) -> ModelResponse:
        response = await self._model.buffer(request)
        self.usage = self.usage + agent_usage(response)
        return response


def is_context_overflow(error: BaseException, model: Model) -> bool:
    """Whether ``error`` is the provider refusing the request's context (sagent's classification)."""
    if isinstance(error, PromptTooLongError | RequestTooLargeError | SagentContextOverflowError):
        return True
    try:
        return isinstance(error, Exception) and bool(model.is_context_overflow(error))
    except Exception:  # noqa: BLE001 - a classifier that fails says nothing
        return False


def agent_usage(response: ModelResponse) -> AgentUsage:
    """Map one sagent response's tokens and spend to the session's usage."""
    tokens = response.tokens
    return AgentUsage(
        model_calls=1,
        input_tokens=tokens.prompt,
        output_tokens=tokens.response,
        cached_input_tokens=tokens.cache_read,
        cost_usd=response.total_cost,
    )


def _str_list(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError("expected a list of strings")
    return tuple(value)


@attrs.frozen(kw_only=True)
class RunState:
    """What a model Step hands the next one."""

    entries: tuple[str, ...]
    """The turn's entries after its user message (``framework_item`` texts), the last response's results excluded."""
    calls: tuple[str, ...]
    """Every call of the last model response, in model order."""
    waves: tuple[tuple[str, ...], ...]
    """The waves not yet handed out."""
    issued: tuple[str, ...]
    """The wave handed out last."""
    tool_state: dict[str, object]
    """The session's tool state when that wave was handed out."""
    steered: tuple[str, ...] = ()
    """User messages steered into the turn while waves were handed out (``framework_item`` texts, oldest first).

    A ``RunModel`` that hands out a wave makes no model call, so the steered
    messages it got wait here for the model call after the last wave's results.
    """

    def encode(self) -> str:
        """Return the state as JSON text."""
        return json.dumps(
            {
                "entries": list(self.entries),
                "calls": list(self.calls),
                "waves": [list(wave) for wave in self.waves],
                "issued": list(self.issued),
                "tool_state": self.tool_state,
                "steered": list(self.steered),
            }
        )

    @classmethod
    def decode(cls, text: str) -> "RunState":
        """Read a state `encode` wrote.

        Raises:
            RunnerContractError: ``text`` is not one.
        """
        try:
            loaded = json.loads(text)
            state = loaded["tool_state"]
            if not isinstance(state, dict):
                raise TypeError("tool_state")
            return cls(
                entries=_str_list(loaded["entries"]),
                calls=_str_list(loaded["calls"]),
                waves=tuple(_str_list(wave) for wave in loaded["waves"]),
                issued=_str_list(loaded["issued"]),
                tool_state=state,
                steered=_str_list(loaded.get("steered", [])),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise RunnerContractError(f"not a sagent run state: {text[:60]!r}") from error


NOT_APPROVED = "The tool call was not approved"
"""How the model's error result for a rejected or expired approval starts (the reason follows)."""

_CANCELLED = cancel_rejection_message(None)
"""How a rejection or cancelled call's text starts when the turn's cancel stopped it."""


def tool_result(record: AgentToolCall) -> ToolResult:
    """Return what the model reads for a call's final record.

    | record             | ``ToolResult``                                                   |
    |--------------------|------------------------------------------------------------------|
    | ``succeeded``      | ``content=output``                                               |
    | ``failed``         | ``is_error``, ``content=error`` (what the tool or sagent said)   |
    | ``rejected``, ``expired`` | ``is_error``, ``content="<NOT_APPROVED>: <reason>"``      |
    | ``rejected`` by a cancel, ``cancelled`` | ``is_error``, the cancel's text (and reason) |
    | ``outcome_unknown``, ``not_applied`` | ``is_error``, the session's standard text      |

    A turn's cancel ends it before its next model call, so the model reads the
    cancel's results only if a runner is asked for that call anyway; the
    mapping keeps every final status answerable.
    """
    match record.status:
        case ToolCallStatus.SUCCEEDED:
            return ToolResult(call_id=record.tool_call_id, content=record.output or "")
        case ToolCallStatus.FAILED if record.error is not None:
            return ToolResult(call_id=record.tool_call_id, content=record.error, is_error=True)
        case ToolCallStatus.REJECTED if describe_tool_call_outcome(record).startswith(_CANCELLED):
            return ToolResult(call_id=record.tool_call_id, content=describe_tool_call_outcome(record), is_error=True)
        case ToolCallStatus.REJECTED | ToolCallStatus.EXPIRED:
            text = f"{NOT_APPROVED}: {describe_tool_call_outcome(record)}"
            return ToolResult(call_id=record.tool_call_id, content=text, is_error=True)
        case (
            ToolCallStatus.FAILED
            | ToolCallStatus.OUTCOME_UNKNOWN
            | ToolCallStatus.NOT_APPLIED
            | ToolCallStatus.CANCELLED
        ):
            return ToolResult(call_id=record.tool_call_id, content=describe_tool_call_outcome(record), is_error=True)
        case _:
            raise RunnerContractError(
                f"tool call {record.tool_call_id!r} has no result yet (status {record.status.value!r})"
            )


def serialize_keys(agent: Agent, calls: Sequence[ToolCall]) -> dict[str, str | None]:
    """Return sagent's ``serialize_key`` of each call, by call ID."""
    return {call.id: _effects.serialize_key(agent.tools_map.get(call.name), call, agent.tool_state) for call in calls}
