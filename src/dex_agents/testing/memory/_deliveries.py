"""`InMemoryDeliveryLedger`: the session's recorded live events read back as the engine's stored Stream."""

from dex_agents.domain.errors import DeliveryUnconfirmedError
from dex_agents.domain.events import started_deliveries
from dex_agents.testing.runner_doubles import RecordingEventSink


class InMemoryDeliveryLedger:
    """A `DeliveryLedger` over a `RecordingEventSink`: an event is stored as soon as it is emitted."""

    def __init__(self, sink: RecordingEventSink) -> None:
        self._sink = sink

    async def started(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int
    ) -> tuple[str, ...]:
        """Return the delivery markers of this Step attempt's recorded ``tool_call_started`` events."""
        return started_deliveries(self._sink.events, tool_call_id, step_execution_id=step_execution_id, attempt=attempt)

    async def confirm(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int, delivery: str
    ) -> tuple[str, ...]:
        """Return the markers when ``delivery`` was recorded.

        Raises:
            DeliveryUnconfirmedError: it was not (the writer dropped it).
        """
        stored = await self.started(flow_id, tool_call_id, step_execution_id=step_execution_id, attempt=attempt)
        if delivery not in stored:
            raise DeliveryUnconfirmedError(f"tool_call_started of delivery {delivery!r} was not recorded")
        return stored
