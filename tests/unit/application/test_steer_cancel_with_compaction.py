"""Steering and cancel in a session whose history is compacted, on the in-memory host."""

from collections.abc import Sequence

from dex_agents import (
    AgentSessionOptions,
    AgentTurnContext,
    CompactionPolicy,
    CompactionSummary,
    ContextOverflowError,
    ToolCallsRequested,
    ToolCallStatus,
    TurnCompleted,
)
from dex_agents.application.next import GoTo, StepName
from dex_agents.domain.events import AgentEventType, HistoryCompactedPayload, TurnCancelledPayload
from dex_agents.domain.messages import AgentMessage, MessageDelivery, MessageRole, stored_size
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER
from dex_agents.domain.turns import AgentTurnOutcome
from dex_agents.domain.usage import AgentUsage
from dex_agents.testing import (
    InMemorySessionHost,
    ScriptedRunner,
    assistant_message,
    deferred_tool_call,
    tool_calls_requested,
    user_message,
)
from tests.unit.application.policies import READ

STEER = MessageDelivery.STEER


class SummarisingRunner(ScriptedRunner):
    """A scripted runner that also compacts (failing its first ``fail_compactions`` calls)."""

    def __init__(self, *args: object, fail_compactions: int = 0, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.compactions: list[tuple[int, ...]] = []
        self.fail_compactions = fail_compactions

    async def compact(self, messages: Sequence[AgentMessage], previous_summary: str | None) -> CompactionSummary:
        self.compactions.append(tuple(m.sequence for m in messages))
        if self.fail_compactions:
            self.fail_compactions -= 1
            raise RuntimeError("summariser down")
        return CompactionSummary(f"summary through {messages[-1].sequence}", usage=AgentUsage(model_calls=1))


def reply_with(count: int, size: int = 300) -> TurnCompleted:
    return TurnCompleted(new_messages=[assistant_message("r" * size) for _ in range(count)])


def small_budget() -> AgentSessionOptions:
    """8 KiB of context: about two turns of ``reply_with(5)``."""
    return AgentSessionOptions(compaction=CompactionPolicy(context_budget_chars=8 * 1024, keep_recent_messages=4))


async def run_turns(host: InMemorySessionHost, *texts: str) -> None:
    for text in texts:
        await host.send_user_message(text)
        await host.drive(GoTo(step=StepName.AWAIT_USER_MESSAGE))


def window_bytes_of_stored_messages(host: InMemorySessionHost) -> int:
    """What ``AgentState.window_bytes`` must say: the stored sizes of every message after the summary's range."""
    through = host.state.current.summarized_through
    return sum(stored_size(message) for message in host.messages.all if message.sequence > through)


async def test_a_message_steered_into_a_compacted_session_reaches_the_retried_model_call_and_counts_in_the_window() -> (
    None
):
    host: InMemorySessionHost

    async def ask_for_a_lookup_while_the_user_steers(turn: AgentTurnContext) -> ToolCallsRequested:
        assert await host.send_user_message("also check the date", client_message_id="m1", delivery=STEER)
        return tool_calls_requested(deferred_tool_call("c1", "lookup", policy=READ))

    def overflow(turn: AgentTurnContext) -> AgentTurnOutcome:
        raise ContextOverflowError("prompt is too long")

    def answer_with_the_steered_message(turn: AgentTurnContext) -> TurnCompleted:
        joined = [user_message(message.text) for message in turn.steered_messages]
        return TurnCompleted(new_messages=[*joined, assistant_message("done, and the date is today")])

    runner = SummarisingRunner(
        [
            *(reply_with(5) for _ in range(4)),
            ask_for_a_lookup_while_the_user_steers,
            overflow,
            answer_with_the_steered_message,
        ],
        tool_replies={"lookup": "found it"},
    )
    host = InMemorySessionHost(runner, options=small_budget())
    await host.drive(await host.start())
    await run_turns(host, "one", "two", "three", "four")
    before = host.state.current
    assert before.summary_count >= 1, "the earlier history is compacted before the steered turn"

    await run_turns(host, "look it up")

    overflowed, retried = runner.model_turns[-2:]
    assert [m.text for m in overflowed.steered_messages] == ["also check the date"]
    assert [m.text for m in retried.steered_messages] == ["also check the date"], "kept for the retry"
    assert retried.summary is not None
    assert overflowed.summary is not None
    assert retried.summary.number == overflowed.summary.number + 1, "the overflow compacted once more"
    assert retried.messages[0].sequence == retried.summary.through_sequence + 1
    assert [m.text for m in retried.messages if m.turn_id == retried.turn_id] == ["look it up"], (
        "the active turn is never compacted"
    )
    (overflow_compaction,) = [p for p in host.sink.payloads(HistoryCompactedPayload) if p.reason == "overflow"]
    assert overflow_compaction.through_sequence < retried.messages[0].sequence

    state = host.state.current
    assert state.last_turn_error is None
    assert host.steered.get() == (), "a model call that returned took them"
    assert host.messages.texts[-2:] == ("also check the date", "done, and the date is today")
    assert state.window_bytes == window_bytes_of_stored_messages(host), "the steered message counts like any other"


async def test_a_cancel_that_reaches_a_compaction_ends_the_turn_uncompacted_and_the_next_turn_compacts_first() -> None:
    host: InMemorySessionHost

    async def ask_for_a_lookup_while_the_user_steers_and_cancels(turn: AgentTurnContext) -> ToolCallsRequested:
        assert await host.send_user_message("what about the date?", delivery=STEER)
        assert await host.cancel_turn("enough")
        return tool_calls_requested(deferred_tool_call("c1", "lookup", policy=READ))

    runner = SummarisingRunner(
        [
            reply_with(5),
            reply_with(5),
            ask_for_a_lookup_while_the_user_steers_and_cancels,
            TurnCompleted(new_messages=[assistant_message("about the date")]),
        ],
        tool_replies={"lookup": "found it"},
        fail_compactions=3,  # the compaction before the lookup turn's first model call fails: the turn goes on
    )
    host = InMemorySessionHost(runner, options=small_budget())
    await host.drive(await host.start())
    await run_turns(host, "one", "two")
    assert host.state.current.summary_count == 0

    await run_turns(host, "look it up")

    steps = [step for step, *_ in host.executed]
    assert steps.count(StepName.RECORD_COMPACTION_FAILURE) == 1
    compactions_before_the_cancel = 3
    # The lone call's Step resumed the turn to CompactHistory (still over budget); the cancel ended the turn there,
    # no summary asked.
    cancelled = host.sink.payloads(TurnCancelledPayload)
    assert [(p.reason, p.finished_tool_calls) for p in cancelled] == [("enough", 1)]
    resumed = steps.index(StepName.CALL_TOOL)
    assert steps[resumed + 1 : resumed + 3] == [StepName.COMPACT_HISTORY, StepName.AWAIT_USER_MESSAGE]
    assert runner.model_turns[2].turn_id == "turn-3"
    assert all(turn.turn_id != "turn-3" for turn in runner.model_turns[3:]), "no further model call in turn 3"
    (note,) = [m for m in host.messages.all if m.turn_id == "turn-3" and m.role is MessageRole.USER][1:]
    assert note.text is not None
    assert note.text.startswith(TURN_CANCELLED_NOTE_HEADER)
    assert [o.status for o in note.tool_outcomes] == [ToolCallStatus.CANCELLED]

    # The steered message no model call saw started turn 4, which compacted before its model call.
    assert len(runner.compactions) == compactions_before_the_cancel + 1
    (compacted,) = host.sink.payloads(HistoryCompactedPayload)
    assert [e.turn_id for e in host.sink.events if isinstance(e.payload, HistoryCompactedPayload)] == ["turn-4"]
    fourth = runner.model_turns[-1]
    assert fourth.turn_id == "turn-4"
    assert fourth.summary is not None
    assert fourth.summary.number == compacted.summary_number == 1
    assert [m.text for m in fourth.messages if m.turn_id == "turn-4"] == ["what about the date?"]
    state = host.state.current
    assert state.last_turn_error is None
    assert not state.last_turn_cancelled
    assert state.window_bytes == window_bytes_of_stored_messages(host)
    assert AgentEventType.TURN_CANCELLED in host.sink.types


async def test_a_cancel_during_a_model_call_that_overflows_ends_the_turn_before_the_compaction() -> None:
    host: InMemorySessionHost

    async def cancel_then_overflow(turn: AgentTurnContext) -> AgentTurnOutcome:
        assert await host.cancel_turn("stop")
        raise ContextOverflowError("prompt is too long")

    runner = SummarisingRunner([reply_with(2), cancel_then_overflow, reply_with(1)])
    host = InMemorySessionHost(runner, options=small_budget())
    await host.drive(await host.start())
    await run_turns(host, "one", "two")

    assert runner.compactions == [], "a cancelled turn runs no summarising model call"
    assert host.state.current.summary_count == 0
    steps = [step for step, *_ in host.executed]
    assert steps[-2:] == [StepName.RUN_MODEL, StepName.COMPACT_HISTORY]
    assert [p.reason for p in host.sink.payloads(TurnCancelledPayload)] == ["stop"]
    last = host.messages.all[-1]
    assert last.role is MessageRole.USER
    assert last.text is not None
    assert last.text.startswith(TURN_CANCELLED_NOTE_HEADER)
    assert not host.state.current.retry_after_overflow


async def test_a_cancel_that_arrives_while_a_compaction_fails_ends_the_turn_cancelled_in_the_failure_route() -> None:
    host: InMemorySessionHost

    class CancellingCompactor(SummarisingRunner):
        async def compact(self, messages: Sequence[AgentMessage], previous_summary: str | None) -> CompactionSummary:
            if len(self.compactions) == 2:  # the last attempt: an earlier one would see the cancel and end the turn
                assert await host.cancel_turn("stop")
            return await super().compact(messages, previous_summary)

    runner = CancellingCompactor([reply_with(5), reply_with(5), reply_with(1)], fail_compactions=3)
    host = InMemorySessionHost(runner, options=small_budget())
    await host.drive(await host.start())
    await run_turns(host, "one", "two", "three")  # the third turn is over budget before its first model call

    steps = [step for step, *_ in host.executed]
    assert steps[-4:] == [*[StepName.COMPACT_HISTORY] * 3, StepName.RECORD_COMPACTION_FAILURE]
    assert [p.reason for p in host.sink.payloads(TurnCancelledPayload)] == ["stop"]
    assert [turn.turn_id for turn in runner.model_turns] == ["turn-1", "turn-2"], "turn 3 called no model"
    assert len(runner.compactions) == 3
    state = host.state.current
    assert (state.last_turn_cancelled, state.last_turn_error, state.summary_count) == (True, None, 0)
    assert state.window_bytes == window_bytes_of_stored_messages(host)
