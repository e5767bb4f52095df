"""Doubles for unit-testing a framework runner, or the session, without an engine.

- `ScriptedRunner` implements `AgentFrameworkRunner` from scripts: one reply
  per model call, and replies per tool name or tool-call ID. It records every
  call it received.
- `RecordingEventSink` is a thread-safe `EventSink` that keeps every event;
  `make_event_writer` binds an `AgentEventWriter` to one.
- `RecordingHeartbeat` counts heartbeats.
- `make_turn_context`, `make_tool_execution` and `make_tool_call` build what
  the session hands a runner, with defaults for everything a test does not
  care about.

Example:
    ```python
    sink = RecordingEventSink()
    turn = make_turn_context(user_text="Find my tickets", sink=sink)
    outcome = await MyRunner(agent).run_model_step(turn)
    assert isinstance(outcome, ToolCallsRequested)
    ```

Nothing here imports pytest or an engine.
"""

import inspect
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TypeAlias

from dex_agents.application.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    ToolExecutionResult,
)
from dex_agents.domain.messages import FrameworkMessage
from dex_agents.domain.turns import AgentTurnOutcome, ToolCallsRequested, TurnCompleted
from dex_agents.testing._runner_inputs import (
    RecordingEventSink,
    RecordingHeartbeat,
    assistant_message,
    deferred_tool_call,
    framework_message,
    make_event_writer,
    make_tool_call,
    make_tool_execution,
    make_turn_context,
    tool_calls_requested,
    user_message,
)

__all__ = [
    "ModelReply",
    "RecordingEventSink",
    "RecordingHeartbeat",
    "ScriptExhaustedError",
    "ScriptedRunner",
    "ToolReplies",
    "ToolReply",
    "assistant_message",
    "deferred_tool_call",
    "framework_message",
    "make_event_writer",
    "make_tool_call",
    "make_tool_execution",
    "make_turn_context",
    "tool_calls_requested",
    "user_message",
]

ModelReply: TypeAlias = (
    TurnCompleted
    | ToolCallsRequested
    | BaseException
    | Callable[[AgentTurnContext], AgentTurnOutcome | Awaitable[AgentTurnOutcome]]
)
"""One scripted model call: an outcome to return, an exception to raise, or a
function of the turn (sync or async) that returns the outcome."""

ToolReply: TypeAlias = (
    ToolExecutionResult
    | str
    | BaseException
    | Callable[[DeferredToolExecution], ToolExecutionResult | str | Awaitable[ToolExecutionResult | str]]
)
"""One scripted tool call: a result (``str`` is the output text), an exception
to raise (`ToolExecutionError` for a failure the model sees), or a function of
the execution (sync or async) that returns the result."""

ToolReplies: TypeAlias = ToolReply | list[ToolReply] | tuple[ToolReply, ...]
"""The replies for one tool name or tool-call ID: one reply for every call, or a
list consumed one per call whose last reply then repeats."""


class ScriptExhaustedError(AssertionError):
    """A `ScriptedRunner` was called for something its script does not cover."""


class _ToolScript:
    """Replies for one key: consumed one per call; the last one repeats."""

    def __init__(self, replies: Sequence[ToolReply]) -> None:
        if not replies:
            raise ValueError("a tool script needs at least one reply")
        self._replies = list(replies)
        self._used = 0

    def next(self) -> ToolReply:
        reply = self._replies[min(self._used, len(self._replies) - 1)]
        self._used += 1
        return reply


def _tool_scripts(replies: Mapping[str, ToolReplies]) -> dict[str, _ToolScript]:
    scripts: dict[str, _ToolScript] = {}
    for key, reply in replies.items():
        if isinstance(reply, list | tuple):
            scripts[key] = _ToolScript(reply)
        else:
            scripts[key] = _ToolScript([reply])
    return scripts


class ScriptedRunner:
    """An `AgentFrameworkRunner` that replays scripted model and tool replies.

    Model replies are consumed one per ``run_model_step`` call, in order; a
    call beyond the script raises `ScriptExhaustedError`. Tool replies are
    looked up by tool-call ID first, then by tool name. A list or tuple of
    replies is consumed one per call and its last reply then repeats; a single
    reply answers every call. A call nobody scripted raises
    `ScriptExhaustedError` (a Step failure, like any unexpected exception).

    Every call is recorded: `model_turns`, `tool_executions` and
    `user_message_texts`. Recording is safe when tool calls run concurrently.
    Steered messages a model call got are in its recorded context
    (``model_turns[i].steered_messages``); a scripted `TurnCompleted` stores
    only the messages it lists.

    Example:
        ```python
        runner = ScriptedRunner(
            [
                tool_calls_requested(deferred_tool_call("c1", "search", '{"q": "x"}')),
                TurnCompleted(new_messages=[assistant_message("Found it.")]),
            ],
            tool_replies={"search": "3 tickets", "refund": ToolExecutionError("no such order")},
        )
        ```
    """

    def __init__(
        self,
        model_replies: Iterable[ModelReply] = (),
        *,
        tool_replies: Mapping[str, ToolReplies] | None = None,
        build_user_message: Callable[[str], FrameworkMessage] = user_message,
    ) -> None:
        """Create a runner.

        Args:
            model_replies: one reply per model call, in order.
            tool_replies: replies by tool-call ID or tool name.
            build_user_message: how `build_user_message` turns text into a
                message; `user_message` by default.
        """
        self._lock = threading.Lock()
        self._model_replies = list(model_replies)
        self._model_calls = 0
        self._tool_scripts = _tool_scripts(tool_replies or {})
        self._build_user_message = build_user_message
        self._model_turns: list[AgentTurnContext] = []
        self._tool_executions: list[DeferredToolExecution] = []
        self._user_message_texts: list[str] = []

    def script_model(self, *replies: ModelReply) -> None:
        """Append replies for later model calls."""
        with self._lock:
            self._model_replies.extend(replies)

    def script_tool(self, key: str, *replies: ToolReply) -> None:
        """Set the replies for a tool-call ID or a tool name, replacing earlier ones."""
        with self._lock:
            self._tool_scripts[key] = _ToolScript(replies)

    @property
    def model_turns(self) -> tuple[AgentTurnContext, ...]:
        """The context of every model call, in order."""
        with self._lock:
            return tuple(self._model_turns)

    @property
    def tool_executions(self) -> tuple[DeferredToolExecution, ...]:
        """Every tool execution, in call order."""
        with self._lock:
            return tuple(self._tool_executions)

    @property
    def executed_tool_call_ids(self) -> tuple[str, ...]:
        """The tool-call ID of every tool execution, in call order (repeats included)."""
        return tuple(execution.tool_call.tool_call_id for execution in self.tool_executions)

    @property
    def user_message_texts(self) -> tuple[str, ...]:
        """The text of every `build_user_message` call, in order."""
        with self._lock:
            return tuple(self._user_message_texts)

    @property
    def remaining_model_replies(self) -> int:
        """Scripted model replies not used yet."""
        with self._lock:
            return len(self._model_replies) - self._model_calls

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return the scripted user message for ``text``."""
        with self._lock:
            self._user_message_texts.append(text)
        return self._build_user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Play the next model reply."""
        with self._lock:
            self._model_turns.append(turn)
            if self._model_calls >= len(self._model_replies):
                raise ScriptExhaustedError(f"model call {self._model_calls + 1} was not scripted ({turn.turn_id})")
            reply = self._model_replies[self._model_calls]
            self._model_calls += 1
        if isinstance(reply, TurnCompleted | ToolCallsRequested):
            return reply
        if isinstance(reply, BaseException):
            raise reply
        produced = reply(turn)
        if inspect.isawaitable(produced):
            return await produced
        return produced

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Play the next reply scripted for this call's ID or tool name."""
        record = call.tool_call
        with self._lock:
            self._tool_executions.append(call)
            script = self._tool_scripts.get(record.tool_call_id) or self._tool_scripts.get(record.tool_name)
            if script is None:
                raise ScriptExhaustedError(
                    f"tool call {record.tool_call_id!r} of tool {record.tool_name!r} was not scripted"
                )
            reply = script.next()
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ToolExecutionResult | str):
            return _as_result(reply)
        produced = reply(call)
        if inspect.isawaitable(produced):
            return _as_result(await produced)
        return _as_result(produced)


def _as_result(reply: ToolExecutionResult | str) -> ToolExecutionResult:
    return ToolExecutionResult(reply) if isinstance(reply, str) else reply
