"""An event sink that always fails, for the best-effort rule of live events."""

from dex_agents.domain.events import AgentEvent


class FailingEventSink:
    """An event sink whose every emit raises, for the best-effort rule."""

    def __init__(self) -> None:
        self.attempts = 0

    def emit(self, event: AgentEvent) -> None:
        self.attempts += 1
        raise ConnectionError(f"stream unavailable for {event.type}")
