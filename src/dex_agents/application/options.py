"""Per-agent session options."""

from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Protocol

import attrs

from dex_agents.application.compaction import CompactionPolicy
from dex_agents.domain.limits import DEFAULT_MAX_INPUT_TEXT_BYTES, DEFAULT_MAX_TOOL_OUTPUT_BYTES
from dex_agents.domain.tools import ToolEffect, ToolPolicy

DEFAULT_EVENT_STREAM_CAPACITY_BYTES = 10 * 1024 * 1024
"""Default byte budget of the live event Stream (10 MiB)."""

DEFAULT_MAX_EVENT_BYTES = 64 * 1024
"""Default limit of one live event as stored (64 KiB; real Dex refuses Stream messages over 100 KiB)."""

DEFAULT_DELTA_COALESCE_WINDOW = timedelta(milliseconds=40)
"""Default time text and reasoning deltas are held to be written as one live event."""

DEFAULT_DELTA_COALESCE_BYTES = 2048
"""Default size (UTF-8 bytes of text) at which held deltas are written at once."""

MIN_TEXT_LIMIT_BYTES = 1024
"""The smallest text limit an option accepts (room for a truncation notice)."""


class TracerSource(Protocol):
    """An OpenTelemetry ``TracerProvider``, as `AgentSessionOptions.tracing` takes one."""

    def get_tracer(self, instrumenting_module_name: str, /) -> object:
        """Return a tracer."""
        ...


def _check_tracing(_instance: object, _attribute: object, value: object) -> None:
    if isinstance(value, bool) or callable(getattr(value, "get_tracer", None)):
        return
    raise TypeError(f"tracing takes True, False or an OpenTelemetry TracerProvider, got {value!r}")


def _frozen_policies(policies: Mapping[str, ToolPolicy] | None) -> Mapping[str, ToolPolicy]:
    return MappingProxyType(dict(policies or {}))


def _check_deadline(
    _instance: object, _attribute: "attrs.Attribute[timedelta | None]", value: timedelta | None
) -> None:
    if value is not None and value <= timedelta(0):
        raise ValueError(f"{_attribute.name} must be positive, got {value!r}")


def _check_capacity(_instance: object, _attribute: "attrs.Attribute[int]", value: int) -> None:
    if value <= 0:
        raise ValueError(f"event_stream_capacity_bytes must be positive, got {value!r}")


def _window(value: timedelta | float) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(seconds=value)


def _check_window(_instance: object, _attribute: "attrs.Attribute[timedelta]", value: timedelta) -> None:
    if value < timedelta(0):
        raise ValueError(f"delta_coalesce_window must not be negative (0 turns coalescing off), got {value!r}")


def _check_coalesce_bytes(_instance: object, _attribute: "attrs.Attribute[int]", value: int) -> None:
    if value <= 0:
        raise ValueError(f"delta_coalesce_bytes must be positive, got {value!r}")


def _check_text_limit(_instance: object, attribute: "attrs.Attribute[int]", value: int) -> None:
    if value < MIN_TEXT_LIMIT_BYTES:
        raise ValueError(f"{attribute.name} must be at least {MIN_TEXT_LIMIT_BYTES}, got {value!r}")


@attrs.frozen(kw_only=True)
class AgentSessionOptions:
    """How one agent's sessions treat tools, approvals and live events."""

    tool_policies: Mapping[str, ToolPolicy] = attrs.field(factory=dict, converter=_frozen_policies)
    """Policies by the tool name the model calls."""
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED
    """The effect of a tool with neither a policy nor framework metadata."""
    event_stream_capacity_bytes: int = attrs.field(
        default=DEFAULT_EVENT_STREAM_CAPACITY_BYTES, validator=_check_capacity
    )
    """Byte budget of the live event Stream, shared by the agent's sessions."""
    interrupt_deadline: timedelta | None = attrs.field(default=None, validator=_check_deadline)
    """How long an approval may wait before the call counts as rejected; ``None``: forever."""
    external_result_deadline: timedelta | None = attrs.field(default=None, validator=_check_deadline)
    """How long a call may wait for its result from outside (``submit_tool_result``) before it ends ``expired``
    and the model is told it has no result; ``None``: forever. Measured by the engine, as ``interrupt_deadline``."""
    max_input_text_bytes: int = attrs.field(default=DEFAULT_MAX_INPUT_TEXT_BYTES, validator=_check_text_limit)
    """Limit of each client text (user message, first message, rejection reason), in UTF-8 bytes.

    A longer text is refused at the client and by the RPC; nothing is queued.
    """
    max_tool_output_bytes: int = attrs.field(default=DEFAULT_MAX_TOOL_OUTPUT_BYTES, validator=_check_text_limit)
    """Limit of each stored tool output or tool error, in UTF-8 bytes.

    A longer one is stored as its start plus a notice saying how much was cut,
    and the model reads that.
    """
    max_event_bytes: int = attrs.field(default=DEFAULT_MAX_EVENT_BYTES, validator=_check_text_limit)
    """Limit of one live event's payload, as JSON: longer text deltas are split, other long texts cut with a marker."""
    compaction: CompactionPolicy = attrs.field(factory=CompactionPolicy)
    """When the model's context is compacted into a summary, and what is kept verbatim."""
    delta_coalesce_window: timedelta = attrs.field(
        default=DEFAULT_DELTA_COALESCE_WINDOW, converter=_window, validator=_check_window
    )
    """How long a Step attempt holds text and reasoning deltas to write them as one live event (seconds or a
    `timedelta`); held deltas are also written at ``delta_coalesce_bytes``, before any other event and at the end of
    the Step. ``0`` writes every delta as it comes."""
    delta_coalesce_bytes: int = attrs.field(default=DEFAULT_DELTA_COALESCE_BYTES, validator=_check_coalesce_bytes)
    """Size of held delta text (UTF-8 bytes) at which it is written at once."""
    tracing: "bool | TracerSource" = attrs.field(default=False, validator=_check_tracing)
    """OpenTelemetry traces of the sessions (the ``[otel]`` extra): ``True`` traces with the global
    ``TracerProvider``, a ``TracerProvider`` traces with it; ``False`` (the default) traces nothing and imports
    no OpenTelemetry.

    Each Step attempt is one span (``RunModel``, each tool Step, ``CompactHistory``, approvals, ...), and every
    span of a turn joins the turn's one trace, across Workers, retries and restarts: the turn's trace context
    is stored with the turn. The model call runs inside its Step's span, so a framework's own instrumentation
    (Pydantic AI's ``Agent.instrument_all()``, Logfire) nests under it. ``docs/tracing.md`` lists the spans
    and their attributes."""
