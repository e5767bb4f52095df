"""The event writer a Step hands to a runner.

It adds the envelope (turn, Step execution, attempt) to every event, may be
called from any thread (the sink it writes to must be thread-safe), and drops
every write once the Step call it belongs to has returned. Events are best
effort: a sink that fails is logged and the Step goes on. No event exceeds
``max_event_bytes`` as JSON (`fit_event_body`): a long delta becomes several
deltas, other long texts are cut with a notice.

Text and reasoning deltas are coalesced when ``coalesce_window`` is positive
(`AgentSessionOptions.delta_coalesce_window`): consecutive deltas of one kind
are held and written as one delta of their joined text when the first held one
is ``coalesce_window`` old (checked on the next write, and by a timer when the
writer is given ``schedule``), when they reach ``coalesce_bytes``, before any
other event (a delta of the other kind, a tool-lifecycle event, a turn event),
on `flush` and on `close` (the end of the Step call). Every event of a writer
carries the same envelope, so the ``(turn_id, step_execution_id, attempt)``
grouping is unchanged, and the joined text and the order of events are exactly
those written; only the number of frames drops. ``0`` writes every delta as it
comes.
"""

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import timedelta

from dex_agents.application.options import DEFAULT_DELTA_COALESCE_BYTES, DEFAULT_MAX_EVENT_BYTES
from dex_agents.application.ports import EventSink
from dex_agents.domain import events as ev
from dex_agents.domain.events import (
    AgentEvent,
    AgentEventBody,
    AgentEventType,
    ReasoningDeltaPayload,
    TextDeltaPayload,
    fit_event_body,
)
from dex_agents.domain.json_values import JsonValue
from dex_agents.domain.tools import ToolCallStatus

_log = logging.getLogger(__name__)

ScheduleFn = Callable[[float, Callable[[], None]], None]
"""Calls the callback once after the delay in seconds (on any thread); used to flush held deltas."""


class AgentEventWriter:
    """Writes live events of one Step attempt."""

    def __init__(  # noqa: PLR0913 - the writer's envelope and tuning, each by keyword
        self,
        sink: EventSink,
        *,
        turn_id: str | None,
        step_execution_id: str,
        attempt: int,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        coalesce_window: timedelta = timedelta(0),
        coalesce_bytes: int = DEFAULT_DELTA_COALESCE_BYTES,
        clock: Callable[[], float] = time.monotonic,
        schedule: ScheduleFn | None = None,
    ) -> None:
        self._sink = sink
        self._max_event_bytes = max_event_bytes
        self._turn_id = turn_id
        self._step_execution_id = step_execution_id
        self._attempt = attempt
        self._lock = threading.RLock()
        self._closed = False
        self._window = max(coalesce_window.total_seconds(), 0.0)
        self._bound = max(coalesce_bytes, 1)
        self._clock = clock
        self._schedule = schedule
        self._held_type: type[TextDeltaPayload | ReasoningDeltaPayload] | None = None
        self._held: list[str] = []
        self._held_bytes = 0
        self._held_since = 0.0
        self._generation = 0

    @property
    def closed(self) -> bool:
        """Whether writes are dropped now."""
        return self._closed

    def close(self) -> None:
        """Write the held deltas, then drop every later write (the Step call returned)."""
        with self._lock:
            self._flush_held()
            self._closed = True

    def flush(self) -> None:
        """Write the held deltas now."""
        with self._lock:
            self._flush_held()

    def write(self, body: AgentEventBody, *, turn_id: str | None = None) -> None:
        """Write one event with this writer's envelope; best effort.

        ``turn_id`` overrides the writer's turn, for the event that starts a turn.
        A text or reasoning delta may be held and joined with the next ones (see the module).
        """
        with self._lock:
            if self._closed:
                return
            if turn_id is None and self._window > 0 and isinstance(body, TextDeltaPayload | ReasoningDeltaPayload):
                self._hold(body)
                return
            self._flush_held()
            self._emit(body, self._turn_id if turn_id is None else turn_id)

    def _hold(self, body: TextDeltaPayload | ReasoningDeltaPayload) -> None:
        if self._held_type is not None and self._held_type is not type(body):
            self._flush_held()
        now = self._clock()
        if self._held_type is None:
            self._held_type = type(body)
            self._held_since = now
            self._generation += 1
            if self._schedule is not None:
                generation = self._generation
                self._schedule(self._window, lambda: self._flush_if(generation))
        self._held.append(body.text)
        self._held_bytes += len(body.text.encode("utf-8", "surrogatepass"))
        if self._held_bytes >= self._bound or now - self._held_since >= self._window:
            self._flush_held()

    def _flush_if(self, generation: int) -> None:
        with self._lock:
            if generation == self._generation and not self._closed:
                self._flush_held()

    def _flush_held(self) -> None:
        kind = self._held_type
        if kind is None:
            return
        text = "".join(self._held)
        self._held_type = None
        self._held = []
        self._held_bytes = 0
        self._emit(kind(text=text), self._turn_id)

    def _emit(self, body: AgentEventBody, turn_id: str | None) -> None:
        for fitted in fit_event_body(body, self._max_event_bytes):
            event = AgentEvent.enveloped(
                fitted, turn_id=turn_id, step_execution_id=self._step_execution_id, attempt=self._attempt
            )
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
