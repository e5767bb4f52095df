"""The event writer a Step hands to a runner.

It adds the envelope (turn, Step execution, attempt) to every event, may be
called from any thread (the sink it writes to must be thread-safe), and drops
every write once the Step call it belongs to has returned. Events are best
effort: a sink that fails is logged and the Step goes on. No event exceeds
``max_event_bytes`` as JSON (`fit_event_body`): a long delta becomes several
deltas, other long texts are cut with a notice.
"""

import logging
import threading
from collections.abc import Mapping

from dex_agents.application.options import DEFAULT_MAX_EVENT_BYTES
from dex_agents.application.ports import EventSink
from dex_agents.domain import events as ev
from dex_agents.domain.events import AgentEvent, AgentEventBody, AgentEventType, fit_event_body
from dex_agents.domain.json_values import JsonValue
from dex_agents.domain.tools import ToolCallStatus

_log = logging.getLogger(__name__)


class AgentEventWriter:
    """Writes live events of one Step attempt."""

    def __init__(
        self,
        sink: EventSink,
        *,
        turn_id: str | None,
        step_execution_id: str,
        attempt: int,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self._sink = sink
        self._max_event_bytes = max_event_bytes
        self._turn_id = turn_id
        self._step_execution_id = step_execution_id
        self._attempt = attempt
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether writes are dropped now."""
        return self._closed

    def close(self) -> None:
        """Drop every later write (the Step call returned)."""
        with self._lock:
            self._closed = True

    def write(self, body: AgentEventBody, *, turn_id: str | None = None) -> None:
        """Write one event with this writer's envelope; best effort.

        ``turn_id`` overrides the writer's turn, for the event that starts a turn.
        """
        for fitted in fit_event_body(body, self._max_event_bytes):
            event = AgentEvent.enveloped(
                fitted,
                turn_id=self._turn_id if turn_id is None else turn_id,
                step_execution_id=self._step_execution_id,
                attempt=self._attempt,
            )
            with self._lock:
                if self._closed:
                    return
                try:
                    self._sink.emit(event)
                except Exception:  # noqa: BLE001 - live events are best effort by contract
                    _log.warning("dropped live event %s", event.type, exc_info=True)

    def write_text_delta(self, text: str) -> None:
        """Write a piece of the model's text."""
        self.write(ev.text_delta(text))

    def write_reasoning_delta(self, text: str) -> None:
        """Write a piece of the model's reasoning."""
        self.write(ev.reasoning_delta(text))

    def write_tool_call_started(self, tool_call_id: str, tool_name: str, *, delivery: str | None = None) -> None:
        """Write that a tool call starts (in the delivery ``delivery``, when marked)."""
        self.write(ev.tool_call_started(tool_call_id, tool_name, delivery=delivery))

    def write_tool_call_finished(self, tool_call_id: str, tool_name: str, status: ToolCallStatus) -> None:
        """Write that a tool call finished with ``status``."""
        self.write(ev.tool_call_finished(tool_call_id, tool_name, status))

    def write_event(self, event_type: AgentEventType | str, payload: Mapping[str, JsonValue]) -> None:
        """Write any event from its wire form; ``event_type`` must be an `AgentEventType` value.

        ``payload`` has exactly the fields of the type's payload class (`dex_agents.domain.events.event_body`).
        """
        self.write(ev.event_body(event_type, payload))
