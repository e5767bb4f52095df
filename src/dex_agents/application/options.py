"""Per-agent session options."""

from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType

import attrs

from dex_agents.domain.tools import ToolEffect, ToolPolicy

DEFAULT_EVENT_STREAM_CAPACITY_BYTES = 10 * 1024 * 1024
"""Default byte budget of the live event Stream (10 MiB)."""


def _frozen_policies(policies: Mapping[str, ToolPolicy] | None) -> Mapping[str, ToolPolicy]:
    return MappingProxyType(dict(policies or {}))


def _check_deadline(
    _instance: object, _attribute: "attrs.Attribute[timedelta | None]", value: timedelta | None
) -> None:
    if value is not None and value <= timedelta(0):
        raise ValueError(f"interrupt_deadline must be positive, got {value!r}")


def _check_capacity(_instance: object, _attribute: "attrs.Attribute[int]", value: int) -> None:
    if value <= 0:
        raise ValueError(f"event_stream_capacity_bytes must be positive, got {value!r}")


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
