"""The tracing port: what a host asks of a tracer around each Step attempt.

A host (the Dex binding, the in-memory host) that has a `StepTracer` runs
every Step attempt's use case inside `StepTracer.attempt` and hands the
attempt's event writer the sink `StepTrace.sink` returns, so the span sees the
attempt's events. A host without one does nothing per Step: tracing off costs
one ``None`` check. The OpenTelemetry tracer is
`dex_agents.infrastructure.tracing.OpenTelemetryStepTracer`; nothing here
knows OpenTelemetry.
"""

from contextlib import AbstractContextManager
from typing import Protocol

from dex_agents.application.invocation import StepCall
from dex_agents.application.next import StepName
from dex_agents.application.ports import EventSink
from dex_agents.application.wiring import SessionPorts


class StepTrace(Protocol):
    """The span of one Step attempt, open while its use case runs."""

    def sink(self, sink: EventSink) -> EventSink:
        """Return a sink that writes to ``sink`` and shows the attempt's events on the span."""
        ...


class StepTracer(Protocol):
    """Opens the span of each Step attempt (see the module docstring)."""

    def attempt(
        self, step: StepName, call: StepCall, ports: SessionPorts, step_input: object
    ) -> AbstractContextManager[StepTrace]:
        """Open the span of ``call`` (an attempt of ``step`` on ``step_input``), current while the block runs.

        On a block that returns, the span records what the attempt did, and an attempt
        that began a turn stores the turn's trace context on the session state
        (``AgentState.turn_traceparent``) through ``ports``. A block that raises marks
        the span failed and stores nothing.
        """
        ...
