"""OpenTelemetry spans of session Steps (the ``[otel]`` extra): one span per Step attempt, one trace per turn.

`OpenTelemetryStepTracer` is the `StepTracer` a host uses when
`AgentSessionOptions.tracing` is on; only then is this module (and
OpenTelemetry) imported.

- **One trace per turn.** The attempt that begins a turn (``AwaitUserMessage``,
  or ``StartAgentSession`` with a first message) opens a root span; its context
  is stored with the turn as a W3C ``traceparent`` (``AgentState.turn_traceparent``,
  staged with that attempt's own writes). Every later Step attempt of the turn,
  on any Worker, after any retry or restart, reads it from the state and opens
  its span as a child of it. A turn begun while tracing was off gets a trace
  named by its session and turn ID (the same on every Worker).
- **A span per attempt.** A retried attempt is a new span (``dex_agents.step.retry``
  true, ``dex_agents.step.attempt`` > 1); an attempt killed with its Worker never
  ends its span, so nothing of it is exported and its retry is the only span.
  A live run (the Pydantic AI runner continuing one run across the model Steps
  of a turn) is no special case: each Step attempt opens exactly one span.
- **Current while the use case runs.** The span is the current span while the
  runner works, so a framework's own spans (Pydantic AI's ``Agent.instrument_all()``,
  Logfire) are its children.
- **What the attempt did.** The attempt's live events (deltas excepted) become
  span events with their IDs and statuses (never texts, arguments or outputs);
  token usage, the tool's outcome and the attempt's outcome become attributes.
  An approval wait shows as the ``interrupt_raised`` event on the span of the
  Step that asked and the ``AwaitToolApproval`` span that applies the answer
  (``dex_agents.approval.approved``, ``.approver``), hours later if need be.

Tracing never fails a Step: a span that cannot read what it describes says less.
"""

import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar, cast

import attrs
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from dex_agents.application.invocation import StepCall
from dex_agents.application.next import StepName
from dex_agents.application.options import TracerSource
from dex_agents.application.ports import EventSink
from dex_agents.application.tracing import StepTrace
from dex_agents.application.wiring import SessionPorts
from dex_agents.domain.events import AgentEvent, AgentEventType, UsageRecordedPayload
from dex_agents.domain.session import AgentState
from dex_agents.domain.tools import AgentToolCall

TRACER_NAME = "dex_agents"
"""The instrumentation scope of every span this module opens."""

TOOL_STEPS = frozenset(
    {
        StepName.AWAIT_TOOL_APPROVAL,
        StepName.CALL_TOOL,
        StepName.CALL_SINGLE_ATTEMPT_TOOL,
        StepName.RECONCILE_TOOL_CALL,
        StepName.RECORD_TOOL_FAILURE,
        StepName.RECORD_TOOL_OUTCOME_UNKNOWN,
    }
)
"""The Steps whose input is a tool-call ID: their spans name the tool."""

_QUIET_EVENTS = frozenset({AgentEventType.TEXT_DELTA, AgentEventType.REASONING_DELTA})

_EVENT_FIELDS = (
    "tool_call_id",
    "tool_name",
    "status",
    "effect",
    "requires_approval",
    "interrupt_id",
    "approved",
    "approver",
    "sequence",
    "message_count",
    "outcome",
    "summary_number",
    "through_sequence",
    "landed",
    "finished_tool_calls",
)
"""Payload fields a span event carries: IDs, statuses and counts, never a text the model or a person wrote."""

_OUTCOMES = (
    (AgentEventType.TURN_CANCELLED, "turn_cancelled"),
    (AgentEventType.TURN_FAILED, "turn_failed"),
    (AgentEventType.TURN_COMPLETED, "turn_completed"),
    (AgentEventType.INTERRUPT_RAISED, "approval_requested"),
    (AgentEventType.TOOL_CALL_DEFERRED, "tool_calls"),
    (AgentEventType.INTERRUPT_RESOLVED, "approval_answered"),
    (AgentEventType.HISTORY_COMPACTED, "compacted"),
)
"""The attempt's outcome by the first of these events it wrote (else its tool's status, else ``continued``)."""

T = TypeVar("T")
_PROPAGATOR = TraceContextTextMapPropagator()
_log = logging.getLogger(__name__)


def traceparent(span_context: SpanContext) -> str:
    """Return ``span_context`` as a W3C ``traceparent`` header value."""
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags):02x}"


def turn_context(flow_id: str, state: AgentState | None) -> Context:
    """The parent of a Step span: the running turn's stored context, else none (the span starts a trace).

    A turn with no (or an unreadable) ``traceparent`` began while tracing was off: its
    spans join a trace whose IDs are derived from the session and turn ID.
    """
    if state is None or state.active_turn_id is None:
        return Context()
    if state.turn_traceparent:
        context = _PROPAGATOR.extract({"traceparent": state.turn_traceparent}, context=Context())
        if trace.get_current_span(context).get_span_context().is_valid:
            return context
    digest = hashlib.sha256(f"{flow_id}\0{state.active_turn_id}".encode()).digest()
    derived = SpanContext(
        trace_id=int.from_bytes(digest[:16], "big") or 1,
        span_id=int.from_bytes(digest[16:24], "big") or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(derived), Context())


class OpenTelemetryStepTracer:
    """`StepTracer` over an OpenTelemetry ``TracerProvider`` (the module docstring says what it emits)."""

    def __init__(self, tracing: bool | TracerSource = True) -> None:  # noqa: FBT001, FBT002 - True means the global provider, the one argument a public API takes
        """Trace with ``tracing`` as a ``TracerProvider``, or with the global one (``True``).

        The global provider is looked up at each span (OpenTelemetry's proxy), so an
        application may configure it after building its Flows.
        """
        if isinstance(tracing, bool):
            self._tracer = trace.get_tracer(TRACER_NAME)
        else:
            self._tracer = cast(trace.Tracer, tracing.get_tracer(TRACER_NAME))

    @contextlib.contextmanager
    def attempt(self, step: StepName, call: StepCall, ports: SessionPorts, step_input: object) -> Iterator[StepTrace]:
        """Open the span of one Step attempt (see `StepTracer.attempt`)."""
        before = _read(ports.session_state.get)
        record = None
        if step in TOOL_STEPS and isinstance(step_input, str):
            record = _read(lambda: ports.tool_calls.get(step_input))
        parent = turn_context(call.flow_id, before)
        name = step.value if record is None else f"{step.value} {record.tool_name}"
        with self._tracer.start_as_current_span(
            name, context=parent, attributes=_attempt_attributes(step, call, before, record)
        ) as span:
            observed = _AttemptTrace(span)
            try:
                yield observed
            except BaseException:
                span.set_attribute("dex_agents.step.outcome", "error")
                raise
            after = _read(ports.session_state.get)
            observed.finish(after)
            if after is not None and after.active_turn_id is not None:
                began = before is None or after.turn_count > before.turn_count
                if began and after.turn_traceparent is None and span.get_span_context().is_valid:
                    ports.session_state.set(attrs.evolve(after, turn_traceparent=traceparent(span.get_span_context())))
                    span.set_attribute("dex_agents.turn.id", after.active_turn_id)


def _read(read: Callable[[], T]) -> T | None:
    try:
        return read()
    except Exception:  # noqa: BLE001 - tracing never fails a Step; its span says less
        _log.debug("a traced Step could not read what its span describes", exc_info=True)
        return None


def _attempt_attributes(
    step: StepName, call: StepCall, state: AgentState | None, record: AgentToolCall | None
) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "dex_agents.session.id": call.flow_id,
        "dex_agents.step.name": step.value,
        "dex_agents.step.execution_id": call.step_execution_id,
        "dex_agents.step.attempt": call.attempt,
        "dex_agents.step.retry": call.attempt > 1,
    }
    if state is not None and state.active_turn_id is not None:
        attributes["dex_agents.turn.id"] = state.active_turn_id
    if record is not None:
        attributes["dex_agents.tool.name"] = record.tool_name
        attributes["dex_agents.tool.call_id"] = record.tool_call_id
        attributes["dex_agents.tool.effect"] = record.policy.effect.value
        attributes["dex_agents.tool.requires_approval"] = record.policy.requires_approval
    return attributes


class _AttemptTrace:
    """One attempt's span and what its events said (events may come from any thread)."""

    def __init__(self, span: Span) -> None:
        self.span = span
        self._lock = threading.Lock()
        self._kinds: set[AgentEventType] = set()
        self._tool_status: str | None = None
        self._usage: dict[str, int] = {}
        self._answer: dict[str, AttributeValue] = {}

    def sink(self, sink: EventSink) -> EventSink:
        """Return a sink writing to ``sink`` that also shows the events on the span."""
        return _TracedSink(sink, self)

    def saw(self, event: AgentEvent) -> None:
        """Note ``event`` on the span."""
        if event.type in _QUIET_EVENTS:
            return
        attributes = _event_attributes(event)
        self.span.add_event(event.type.value, attributes=attributes)
        with self._lock:
            self._kinds.add(event.type)
            match event.type:
                case AgentEventType.TOOL_CALL_FINISHED:
                    self._tool_status = str(attributes.get("dex_agents.status"))
                case AgentEventType.INTERRUPT_RESOLVED:
                    self._answer = {
                        f"dex_agents.approval.{key.removeprefix('dex_agents.')}": value
                        for key, value in attributes.items()
                    }
                case AgentEventType.USAGE_RECORDED:
                    assert isinstance(event.payload, UsageRecordedPayload)
                    usage = event.payload.recorded
                    for key, value in (
                        ("gen_ai.usage.input_tokens", usage.input_tokens),
                        ("gen_ai.usage.output_tokens", usage.output_tokens),
                        ("dex_agents.usage.cached_input_tokens", usage.cached_input_tokens),
                        ("dex_agents.usage.reasoning_tokens", usage.reasoning_tokens),
                        ("dex_agents.usage.model_calls", usage.model_calls),
                    ):
                        self._usage[key] = self._usage.get(key, 0) + value
                case _:
                    pass

    def finish(self, state: AgentState | None) -> None:
        """Set the attempt's outcome, tool status, usage and the session's status after it."""
        with self._lock:
            outcome = next((word for kind, word in _OUTCOMES if kind in self._kinds), None)
            if outcome is None:
                outcome = "continued" if self._tool_status is None else f"tool_{self._tool_status}"
            attributes: dict[str, AttributeValue] = {"dex_agents.step.outcome": outcome, **self._usage, **self._answer}
            if self._tool_status is not None:
                attributes["dex_agents.tool.status"] = self._tool_status
        if state is not None:
            attributes["dex_agents.session.status"] = state.status.value
        self.span.set_attributes(attributes)


def _event_attributes(event: AgentEvent) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {}
    for field in _EVENT_FIELDS:
        value = getattr(event.payload, field, None)
        if isinstance(value, (bool, int, float, str)):
            attributes[f"dex_agents.{field}"] = value
    return attributes


@attrs.frozen
class _TracedSink:
    """Writes to the Step's sink, then notes the event on the attempt's span."""

    inner: EventSink
    trace: _AttemptTrace

    def emit(self, event: AgentEvent) -> None:
        """Send ``event`` on, and show it on the span."""
        self.inner.emit(event)
        try:
            self.trace.saw(event)
        except Exception:  # noqa: BLE001 - tracing never fails a Step
            _log.debug("could not note an event on its Step's span", exc_info=True)
