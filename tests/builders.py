"""Domain values the unit tests build, with defaults for what a test does not care about."""

from datetime import UTC, datetime
from typing import assert_never

from dex_agents import AgentInterrupt
from dex_agents.domain.interrupts import InterruptKind, interrupt_id_for, result_interrupt_id_for

RAISED_AT = datetime(2026, 1, 1, tzinfo=UTC)


def make_interrupt(  # noqa: PLR0913 - a test builder: every field a keyword with a default
    tool_call_id: str = "c1",
    tool_name: str = "refund",
    arguments: str = "{}",
    *,
    turn_id: str = "turn-1",
    raised_at: datetime = RAISED_AT,
    deadline: datetime | None = None,
    kind: InterruptKind = InterruptKind.APPROVAL,
) -> AgentInterrupt:
    """The interrupt of call ``tool_call_id`` of ``turn_id``, under the ID the session gives one of its ``kind``."""
    match kind:
        case InterruptKind.APPROVAL:
            interrupt_id = interrupt_id_for(turn_id, tool_call_id)
        case InterruptKind.TOOL_RESULT:
            interrupt_id = result_interrupt_id_for(turn_id, tool_call_id)
        case unreachable:
            assert_never(unreachable)
    return AgentInterrupt(
        interrupt_id=interrupt_id,
        turn_id=turn_id,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        arguments=arguments,
        raised_at=raised_at,
        deadline=deadline,
        kind=kind,
    )
