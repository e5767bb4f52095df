"""A Step attempt's writer joins text and reasoning deltas into fewer live events without changing what they say.

Time is a fake clock and timers are a fake scheduler: no test waits or measures time.
"""

from collections.abc import Callable
from datetime import timedelta

import pytest

from dex_agents import AgentEventWriter, AgentSessionOptions
from dex_agents.domain import events as ev
from dex_agents.domain.events import AgentEventBody, ReasoningDeltaPayload, TextDeltaPayload
from dex_agents.domain.tools import ToolCallStatus
from dex_agents.testing import RecordingEventSink

WINDOW = timedelta(milliseconds=40)


class FakeTime:
    """A monotonic clock the test moves, and the timers the writer scheduled."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def clock(self) -> float:
        return self.now

    def schedule(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append((self.now + delay, callback))

    def advance(self, seconds: float) -> None:
        """Move the clock and fire the timers that are due, as the Worker loop would."""
        self.now += seconds
        due = [timer for timer in self.timers if timer[0] <= self.now]
        self.timers = [timer for timer in self.timers if timer[0] > self.now]
        for _, callback in due:
            callback()


def coalescing_writer(
    sink: RecordingEventSink, time: FakeTime, *, window: timedelta = WINDOW, size: int = 64, attempt: int = 2
) -> AgentEventWriter:
    return AgentEventWriter(
        sink,
        turn_id="turn-3",
        step_execution_id="RunModel-4",
        attempt=attempt,
        coalesce_window=window,
        coalesce_bytes=size,
        clock=time.clock,
        schedule=time.schedule,
    )


def bodies(sink: RecordingEventSink) -> list[AgentEventBody]:
    return [event.payload for event in sink.events]


def test_deltas_written_within_the_window_arrive_as_one_delta_of_their_joined_text_when_the_step_ends() -> None:
    sink, time = RecordingEventSink(), FakeTime()
    writer = coalescing_writer(sink, time)
    for piece in ("Hel", "lo, ", "wor", "ld"):
        writer.write_text_delta(piece)
        time.now += 0.001
    assert not sink.events  # held
    writer.close()
    assert bodies(sink) == [ev.text_delta("Hello, world")]
    event = sink.events[0]
    assert (event.turn_id, event.step_execution_id, event.attempt) == ("turn-3", "RunModel-4", 2)


def test_a_tool_lifecycle_event_first_flushes_the_held_deltas_so_the_order_is_unchanged() -> None:
    sink, time = RecordingEventSink(), FakeTime()
    writer = coalescing_writer(sink, time)
    writer.write_text_delta("Let me ")
    writer.write_text_delta("look.")
    writer.write_tool_call_started("c1", "lookup")
    writer.write_text_delta("Found ")
    writer.write_text_delta("it.")
    writer.write_tool_call_finished("c1", "lookup", ToolCallStatus.SUCCEEDED)
    writer.close()
    assert bodies(sink) == [
        ev.text_delta("Let me look."),
        ev.tool_call_started("c1", "lookup"),
        ev.text_delta("Found it."),
        ev.tool_call_finished("c1", "lookup", ToolCallStatus.SUCCEEDED),
    ]


def test_reasoning_and_text_are_never_joined_and_keep_their_interleaving() -> None:
    sink, time = RecordingEventSink(), FakeTime()
    writer = coalescing_writer(sink, time)
    writer.write_reasoning_delta("think ")
    writer.write_reasoning_delta("hard")
    writer.write_text_delta("An")
    writer.write_text_delta("swer")
    writer.write_reasoning_delta("again")
    writer.close()
    assert bodies(sink) == [
        ReasoningDeltaPayload(text="think hard"),
        TextDeltaPayload(text="Answer"),
        ReasoningDeltaPayload(text="again"),
    ]


def test_held_text_reaching_the_size_bound_is_written_at_once() -> None:
    sink, time = RecordingEventSink(), FakeTime()
    writer = coalescing_writer(sink, time, size=10)
    writer.write_text_delta("12345")
    assert not sink.events
    writer.write_text_delta("67890")
    assert bodies(sink) == [ev.text_delta("1234567890")]
    writer.write_text_delta("é" * 5)  # 10 UTF-8 bytes
    assert bodies(sink)[-1] == ev.text_delta("ééééé")


def test_the_window_timer_writes_held_deltas_when_the_model_pauses() -> None:
    sink, time = RecordingEventSink(), FakeTime()
    writer = coalescing_writer(sink, time)
    writer.write_text_delta("a")
    writer.write_text_delta("b")
    time.advance(0.039)
    assert not sink.events
    time.advance(0.001)
    assert bodies(sink) == [ev.text_delta("ab")]
    writer.write_text_delta("c")
    time.advance(0.040)
    assert bodies(sink) == [ev.text_delta("ab"), ev.text_delta("c")]


def test_a_delta_written_after_the_window_passed_flushes_even_without_a_timer() -> None:
    sink, time = RecordingEventSink(), FakeTime()
    writer = AgentEventWriter(
        sink, turn_id="t", step_execution_id="s", attempt=1, coalesce_window=WINDOW, clock=time.clock
    )
    writer.write_text_delta("a")
    time.now += 0.05
    writer.write_text_delta("b")
    assert bodies(sink) == [ev.text_delta("ab")]


def test_a_stale_timer_does_not_flush_a_later_batch_early() -> None:
    sink, time = RecordingEventSink(), FakeTime()
    writer = coalescing_writer(sink, time, size=2)
    writer.write_text_delta("ab")  # written by the size bound; its timer stays scheduled
    time.now += 0.030
    writer.write_text_delta("c")  # a new batch with its own timer
    time.advance(0.010)  # the first batch's timer fires
    assert bodies(sink) == [ev.text_delta("ab")]
    time.advance(0.030)
    assert bodies(sink) == [ev.text_delta("ab"), ev.text_delta("c")]


def test_a_timer_firing_after_the_step_returned_writes_nothing() -> None:
    sink, time = RecordingEventSink(), FakeTime()
    writer = coalescing_writer(sink, time)
    writer.write_text_delta("a")
    writer.close()
    time.advance(1)
    writer.write_text_delta("late")
    assert bodies(sink) == [ev.text_delta("a")]


def test_a_zero_window_writes_every_delta_as_it_comes() -> None:
    sink, time = RecordingEventSink(), FakeTime()
    writer = coalescing_writer(sink, time, window=timedelta(0))
    writer.write_text_delta("a")
    writer.write_text_delta("b")
    assert bodies(sink) == [ev.text_delta("a"), ev.text_delta("b")]
    assert time.timers == []


def test_flush_writes_the_held_deltas_now() -> None:
    sink, time = RecordingEventSink(), FakeTime()
    writer = coalescing_writer(sink, time)
    writer.write_text_delta("a")
    writer.flush()
    writer.flush()
    assert bodies(sink) == [ev.text_delta("a")]


def test_a_joined_delta_longer_than_an_event_is_split_in_order() -> None:
    sink, time = RecordingEventSink(), FakeTime()
    writer = AgentEventWriter(
        sink,
        turn_id="t",
        step_execution_id="s",
        attempt=1,
        max_event_bytes=1024,
        coalesce_window=WINDOW,
        coalesce_bytes=100_000,
        clock=time.clock,
    )
    for index in range(50):
        writer.write_text_delta(f"{index:03d}-" * 10)
    writer.close()
    texts = [body.text for body in bodies(sink) if isinstance(body, TextDeltaPayload)]
    assert len(texts) > 1
    assert "".join(texts) == "".join(f"{index:03d}-" * 10 for index in range(50))


def test_the_session_options_default_to_a_short_window_and_accept_seconds_and_zero() -> None:
    options = AgentSessionOptions()
    assert timedelta(0) < options.delta_coalesce_window <= timedelta(milliseconds=100)
    assert options.delta_coalesce_bytes > 0
    assert AgentSessionOptions(delta_coalesce_window=0).delta_coalesce_window == timedelta(0)
    assert AgentSessionOptions(delta_coalesce_window=0.02).delta_coalesce_window == timedelta(milliseconds=20)
    with pytest.raises(ValueError, match="must not be negative"):
        AgentSessionOptions(delta_coalesce_window=-1)
    with pytest.raises(ValueError, match="delta_coalesce_bytes must be positive"):
        AgentSessionOptions(delta_coalesce_bytes=0)
