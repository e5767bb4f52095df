"""The switch of session tracing: a host's `StepTracer` from `AgentSessionOptions.tracing`, or none.

Kept apart from `dex_agents.infrastructure.tracing` so that a host with tracing
off never imports OpenTelemetry.
"""

from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.tracing import StepTracer


def step_tracer(options: AgentSessionOptions) -> StepTracer | None:
    """The tracer of ``options.tracing``, or ``None`` when sessions are not traced (nothing of OpenTelemetry imported).

    Raises:
        ImportError: tracing is on and OpenTelemetry is not installed (the ``[otel]`` extra).
    """
    if options.tracing is False:
        return None
    # The optional extra, imported only when tracing is on.
    try:
        from dex_agents.infrastructure.tracing import OpenTelemetryStepTracer
    except ImportError as error:
        raise ImportError(
            "AgentSessionOptions(tracing=...) needs OpenTelemetry: pip install 'dex-agents[otel]'"
        ) from error
    return OpenTelemetryStepTracer(options.tracing)
