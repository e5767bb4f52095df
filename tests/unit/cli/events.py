"""Builders of live events for the command line's unit tests."""

from dex_agents import AgentEvent, AgentEventType
from dex_agents.cli.views import MARK
from dex_agents.domain.events import event_body
from dex_agents.domain.json_values import JsonValue

ASSISTANT = f"assistant {MARK} "
YOU = f"you {MARK} "


def event(
    event_type: AgentEventType,
    *,
    turn_id: str | None = "turn-1",
    step: str = "RunModel-1",
    attempt: int = 1,
    **payload: JsonValue,
) -> AgentEvent:
    body = event_body(event_type, payload)
    return AgentEvent(type=event_type, payload=body, turn_id=turn_id, step_execution_id=step, attempt=attempt)


def text(delta: str, *, step: str = "RunModel-1", attempt: int = 1, turn_id: str | None = "turn-1") -> AgentEvent:
    return event(AgentEventType.TEXT_DELTA, turn_id=turn_id, step=step, attempt=attempt, text=delta)
