"""What the session hands a framework runner, and recorders for what the runner gives back.

The builders have a default for everything a test does not care about.
`dex_agents.testing.runner_doubles` is the public name of all of it.
"""

import json
import threading
from collections.abc import Iterable, Sequence
from typing import TypeVar

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.policies import policy_resolver as resolver_for
from dex_agents.application.runner import (
    AgentTurnContext,
    DeferredToolExecution,
    HeartbeatFn,
    PolicyResolver,
)
from dex_agents.domain.events import AgentEvent, AgentEventBody, AgentEventType
from dex_agents.domain.history import HistorySummary
from dex_agents.domain.interrupts import interrupt_id_for
from dex_agents.domain.messages import AgentMessage, FrameworkMessage, MessageRole
from dex_agents.domain.tools import (
    AgentToolCall,
    ToolCallStatus,
    ToolEffect,
    ToolPolicy,
    is_approval_required,
)
from dex_agents.domain.turns import DeferredToolCall, ToolCallsRequested
from dex_agents.domain.usage import AgentUsage

_P = TypeVar("_P", bound=AgentEventBody)


def framework_message(role: MessageRole, text: str) -> FrameworkMessage:
    """Return a framework message whose ``framework_item`` is a small JSON object.

    Args:
        role: whose message it is.
        text: the message's text, also used as display text.
    """
    return FrameworkMessage(role=role, framework_item=json.dumps({"role": role.value, "text": text}), text=text)


def user_message(text: str) -> FrameworkMessage:
    """Return a user message for ``text`` (what `ScriptedRunner.build_user_message` builds)."""
    return framework_message(MessageRole.USER, text)


def assistant_message(text: str) -> FrameworkMessage:
    """Return an assistant message for ``text``."""
    return framework_message(MessageRole.ASSISTANT, text)


def deferred_tool_call(
    tool_call_id: str,
    tool_name: str,
    arguments: str = "{}",
    *,
    policy: ToolPolicy | None = None,
    sequential: bool = False,
) -> DeferredToolCall:
    """Return one requested tool call.

    Args:
        tool_call_id: the call's ID.
        tool_name: the tool's name.
        arguments: the arguments as JSON text.
        policy: the call's policy; defaults to ``ToolPolicy(ToolEffect.READ)``.
        sequential: whether the call runs alone, in model order.
    """
    return DeferredToolCall(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        arguments=arguments,
        policy=ToolPolicy(ToolEffect.READ) if policy is None else policy,
        sequential=sequential,
    )


def tool_calls_requested(
    *calls: DeferredToolCall,
    run_state: str = "run-state",
    usage: AgentUsage | None = None,
) -> ToolCallsRequested:
    """Return a `ToolCallsRequested` for ``calls``, in order.

    Args:
        *calls: the requested calls, in model order.
        run_state: the framework run state to resume from.
        usage: the model call's usage; defaults to one model call.
    """
    return ToolCallsRequested(
        framework_run_state=run_state,
        tool_calls=calls,
        usage=AgentUsage(model_calls=1) if usage is None else usage,
    )


class RecordingEventSink:
    """An `EventSink` that keeps every event it receives; safe from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[AgentEvent] = []

    def emit(self, event: AgentEvent) -> None:
        """Keep ``event``."""
        with self._lock:
            self._events.append(event)

    @property
    def events(self) -> tuple[AgentEvent, ...]:
        """Every event so far, in arrival order."""
        with self._lock:
            return tuple(self._events)

    def payloads(self, payload_type: type[_P]) -> list[_P]:
        """The payloads of class ``payload_type`` written so far, in order (typed, for reading fields)."""
        return [event.payload for event in self.events if isinstance(event.payload, payload_type)]

    def of_type(self, event_type: AgentEventType) -> tuple[AgentEvent, ...]:
        """Return the events of one type, in arrival order."""
        return tuple(event for event in self.events if event.type is event_type)

    @property
    def types(self) -> tuple[AgentEventType, ...]:
        """The type of every event so far, in arrival order."""
        return tuple(event.type for event in self.events)

    def clear(self) -> None:
        """Forget every event."""
        with self._lock:
            self._events.clear()


class RecordingHeartbeat:
    """A heartbeat (`HeartbeatFn`) that counts its beats."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    async def __call__(self) -> None:
        """Record one beat."""
        with self._lock:
            self._count += 1

    @property
    def count(self) -> int:
        """Beats so far."""
        with self._lock:
            return self._count


def make_event_writer(
    sink: RecordingEventSink | None = None,
    *,
    turn_id: str | None = "turn-1",
    step_execution_id: str = "step-execution-1",
    attempt: int = 1,
) -> AgentEventWriter:
    """Return an event writer with the given envelope.

    Args:
        sink: where the events go; a fresh `RecordingEventSink` by default.
        turn_id: the envelope's turn.
        step_execution_id: the envelope's Step execution.
        attempt: the envelope's attempt.
    """
    return AgentEventWriter(
        RecordingEventSink() if sink is None else sink,
        turn_id=turn_id,
        step_execution_id=step_execution_id,
        attempt=attempt,
    )


def make_tool_call(  # noqa: PLR0913 - a test builder: every field a keyword with a default
    tool_call_id: str = "call-1",
    tool_name: str = "tool",
    *,
    arguments: str = "{}",
    turn_id: str = "turn-1",
    policy: ToolPolicy | None = None,
    deferral_order: int = 0,
    status: ToolCallStatus | None = None,
    output: str | None = None,
    error: str | None = None,
    rejection_message: str | None = None,
    interrupt_id: str | None = None,
    sequential: bool = False,
) -> AgentToolCall:
    """Return a tool-call record.

    Args:
        tool_call_id: the call's ID.
        tool_name: the tool's name.
        arguments: the arguments as JSON text.
        turn_id: the call's turn.
        policy: the call's policy; ``ToolPolicy(ToolEffect.READ)`` by default.
        deferral_order: the call's position in the turn.
        status: the record's status; by default ``succeeded`` when ``output``
            is given, else ``pending``.
        output: the result text of a succeeded call.
        error: the error of a failed call or one with an unknown outcome.
        rejection_message: the reason of a rejected call.
        interrupt_id: the call's approval interrupt, if any.
        sequential: whether the call runs alone, in model order.
    """
    if status is None:
        status = ToolCallStatus.PENDING if output is None else ToolCallStatus.SUCCEEDED
    return AgentToolCall(
        tool_call_id=tool_call_id,
        turn_id=turn_id,
        tool_name=tool_name,
        arguments=arguments,
        policy=ToolPolicy(ToolEffect.READ) if policy is None else policy,
        deferral_order=deferral_order,
        status=status,
        output=output,
        error=error,
        rejection_message=rejection_message,
        interrupt_id=interrupt_id,
        sequential=sequential,
    )


def make_turn_context(  # noqa: PLR0913 - a test builder: every field a keyword with a default
    *,
    user_text: str = "Hello",
    messages: Sequence[AgentMessage] | None = None,
    flow_id: str = "session-1",
    turn_id: str = "turn-1",
    attempt: int = 1,
    step_execution_id: str = "run-model-1",
    framework_run_state: str | None = None,
    tool_calls: Iterable[AgentToolCall] = (),
    options: AgentSessionOptions | None = None,
    policy_resolver: PolicyResolver | None = None,
    sink: RecordingEventSink | None = None,
    events: AgentEventWriter | None = None,
    heartbeat: HeartbeatFn | None = None,
    summary: HistorySummary | None = None,
) -> AgentTurnContext:
    """Return the context of one ``RunModel`` call, as the session would build it.

    Args:
        user_text: the text of the turn's one stored user message, used when
            ``messages`` is not given.
        messages: the stored messages; by default one user message with
            ``user_text`` at sequence 1.
        flow_id: the session ID.
        turn_id: the turn's ID.
        attempt: the ``RunModel`` attempt.
        step_execution_id: the ``RunModel`` execution.
        framework_run_state: the run state of a resuming call, or ``None``.
        tool_calls: the turn's records (final ones when resuming).
        options: the options whose policies `AgentTurnContext.resolve_tool_policy`
            applies; default options when not given.
        policy_resolver: replaces the resolution from ``options``.
        sink: where the context's events go, when ``events`` is not given.
        events: the context's event writer; by default one bound to ``sink``
            with this context's envelope.
        heartbeat: the heartbeat; a fresh `RecordingHeartbeat` by default.
        summary: the summary of compacted messages the window starts with, if any.
    """
    if messages is None:
        messages = (AgentMessage.stored(user_message(user_text), sequence=1, turn_id=turn_id),)
    if policy_resolver is None:
        policy_resolver = resolver_for(AgentSessionOptions() if options is None else options)
    if events is None:
        events = make_event_writer(sink, turn_id=turn_id, step_execution_id=step_execution_id, attempt=attempt)
    return AgentTurnContext(
        flow_id=flow_id,
        turn_id=turn_id,
        attempt=attempt,
        step_execution_id=step_execution_id,
        messages=tuple(messages),
        framework_run_state=framework_run_state,
        tool_calls={record.tool_call_id: record for record in tool_calls},
        events=events,
        heartbeat=RecordingHeartbeat() if heartbeat is None else heartbeat,
        policy_resolver=policy_resolver,
        summary=summary,
    )


def make_tool_execution(  # noqa: PLR0913 - a test builder: every field a keyword with a default
    tool_name: str = "tool",
    arguments: str = "{}",
    *,
    tool_call_id: str = "call-1",
    flow_id: str = "session-1",
    turn_id: str = "turn-1",
    attempt: int = 1,
    policy: ToolPolicy | None = None,
    tool_call: AgentToolCall | None = None,
    step_execution_id: str = "call-tool-1",
    sink: RecordingEventSink | None = None,
    events: AgentEventWriter | None = None,
    heartbeat: HeartbeatFn | None = None,
) -> DeferredToolExecution:
    """Return what ``CallTool`` or ``CallSingleAttemptTool`` hands the runner for one call.

    Args:
        tool_name: the tool's name.
        arguments: the arguments as JSON text.
        tool_call_id: the call's ID.
        flow_id: the session ID.
        turn_id: the call's turn.
        attempt: the tool Step's attempt.
        policy: the call's policy; ``ToolPolicy(ToolEffect.READ)`` by default.
        tool_call: the whole record; replaces the fields above. By default the
            record is ``approved`` when the policy requires approval, else
            ``pending``.
        step_execution_id: the tool Step's execution.
        sink: where the execution's events go, when ``events`` is not given.
        events: the execution's event writer; by default one bound to ``sink``.
        heartbeat: the heartbeat; a fresh `RecordingHeartbeat` by default.
    """
    if tool_call is None:
        resolved = ToolPolicy(ToolEffect.READ) if policy is None else policy
        tool_call = make_tool_call(
            tool_call_id,
            tool_name,
            arguments=arguments,
            turn_id=turn_id,
            policy=resolved,
            status=ToolCallStatus.APPROVED if is_approval_required(resolved) else ToolCallStatus.PENDING,
            interrupt_id=interrupt_id_for(turn_id, tool_call_id) if is_approval_required(resolved) else None,
        )
    if events is None:
        events = make_event_writer(
            sink, turn_id=tool_call.turn_id, step_execution_id=step_execution_id, attempt=attempt
        )
    return DeferredToolExecution.of_attempt(
        flow_id,
        tool_call,
        attempt=attempt,
        events=events,
        heartbeat=RecordingHeartbeat() if heartbeat is None else heartbeat,
    )
