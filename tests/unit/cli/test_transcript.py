"""The live-text grouping rule of the spec: by (turn_id, step_execution_id, attempt), highest attempt wins."""

import pytest

from dex_agents import AgentEventType
from dex_agents.cli.transcript import DeltaOutcome, LiveText, TextKind
from tests.unit.cli.events import event, text


def test_deltas_of_one_step_execution_join_into_one_block() -> None:
    live = LiveText()
    live.apply(text("Let me "))
    live.apply(text("look."))
    assert [b.text for b in live.blocks("turn-1")] == ["Let me look."]


def test_a_higher_attempt_discards_the_partial_text_of_the_lower_one() -> None:
    live = LiveText()
    live.apply(text("half an ans", attempt=1))
    result = live.apply(text("The answer", attempt=2))
    assert result.outcome is DeltaOutcome.REPLACED
    assert result.replaced_text == "half an ans"
    [block] = live.blocks("turn-1")
    assert (block.attempt, block.text, block.discarded_attempts) == (2, "The answer", (1,))


def test_a_late_delta_of_a_lower_attempt_is_dropped() -> None:
    live = LiveText()
    live.apply(text("new", attempt=2))
    assert live.apply(text("old", attempt=1)).outcome is DeltaOutcome.DROPPED
    assert live.text("turn-1") == "new"


def test_different_step_executions_of_a_turn_keep_their_own_text() -> None:
    live = LiveText()
    live.apply(text("First call.", step="RunModel-1"))
    live.apply(text("Second call.", step="RunModel-2", attempt=3))
    assert live.text("turn-1") == "First call.\n\nSecond call."


def test_reasoning_and_text_of_one_step_are_separate_blocks() -> None:
    live = LiveText()
    live.apply(event(AgentEventType.REASONING_DELTA, text="thinking"))
    live.apply(text("answer"))
    assert [(b.kind, b.text) for b in live.blocks("turn-1")] == [
        (TextKind.REASONING, "thinking"),
        (TextKind.TEXT, "answer"),
    ]
    assert live.text("turn-1") == "answer"


def test_ending_a_turn_forgets_only_that_turns_text() -> None:
    live = LiveText()
    live.apply(text("one", turn_id="turn-1"))
    live.apply(text("two", turn_id="turn-2"))
    assert [b.text for b in live.end_turn("turn-1")] == ["one"]
    assert live.blocks("turn-1") == []
    assert live.text("turn-2") == "two"


def test_only_text_events_are_accepted() -> None:
    with pytest.raises(ValueError, match="not a text event"):
        LiveText().apply(event(AgentEventType.TURN_STARTED, sequence=1))
