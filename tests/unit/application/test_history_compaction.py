"""Compaction: the policy's decisions, the window and range arithmetic, call/result pairing, and whole sessions."""

import itertools
from collections.abc import Sequence

import attrs
import pytest

from dex_agents import (
    AgentSessionOptions,
    CompactionPolicy,
    CompactionSummary,
    ContextOverflowError,
    ExcerptCompactor,
    HistorySummary,
    TurnCompleted,
)
from dex_agents.application.compaction import (
    CHARS_PER_TOKEN,
    MAX_CONTEXT_BYTES,
    MAX_WINDOW_MESSAGES,
    CompactionReason,
    compaction_window,
    model_movement,
)
from dex_agents.application.next import GoTo, StepName
from dex_agents.application.runner import AgentTurnContext
from dex_agents.domain.events import AgentEventType, HistoryCompactedPayload
from dex_agents.domain.history import ModelWindow, compaction_cut, prefix_sequences, summary_key
from dex_agents.domain.messages import AgentMessage, MessageRole, stored_size
from dex_agents.domain.session import AgentState
from dex_agents.domain.turns import AgentTurnOutcome
from dex_agents.domain.usage import AgentUsage
from dex_agents.testing import ScriptedRunner, assistant_message
from dex_agents.testing.memory import InMemorySessionHost


def message(sequence: int, role: MessageRole = MessageRole.ASSISTANT, *, turn: int = 1, size: int = 10) -> AgentMessage:
    return AgentMessage(
        sequence=sequence, turn_id=f"turn-{turn}", role=role, framework_item="x" * size, text=f"m{sequence}"
    )


def conversation(count: int, *, size: int = 10) -> list[AgentMessage]:
    """user, assistant(call), tool(result), assistant, ... in turns of four."""
    roles = [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL, MessageRole.ASSISTANT]
    return [message(s, roles[(s - 1) % 4], turn=(s - 1) // 4 + 1, size=size) for s in range(1, count + 1)]


def window_bytes(messages: Sequence[AgentMessage]) -> int:
    return sum(stored_size(m) for m in messages)


# -- range arithmetic and pairing --------------------------------------------------------------------------------


def test_a_cut_keeps_the_latest_messages_verbatim_and_covers_everything_before() -> None:
    messages = conversation(40)
    cut = compaction_cut(
        messages, window_bytes=window_bytes(messages), target_bytes=10**9, keep_recent=8, window_last=40,
        protected_from=None,
    )  # fmt: skip
    assert cut is not None
    assert (cut.first_sequence, cut.through_sequence) == (1, 32)
    assert cut.covered_bytes == window_bytes(messages[:32])


@pytest.mark.parametrize("keep_recent", range(12))
def test_a_cut_never_leaves_a_tool_result_first_so_no_call_loses_its_result(keep_recent: int) -> None:
    messages = conversation(24)
    cut = compaction_cut(
        messages, window_bytes=window_bytes(messages), target_bytes=10**9, keep_recent=keep_recent,
        window_last=24, protected_from=None,
    )  # fmt: skip
    assert cut is not None
    retained = [m for m in messages if m.sequence > cut.through_sequence]
    assert not retained or retained[0].role is not MessageRole.TOOL
    assert len(retained) >= keep_recent


def test_a_cut_never_covers_the_active_turn() -> None:
    messages = conversation(20)
    cut = compaction_cut(
        messages, window_bytes=window_bytes(messages), target_bytes=0, keep_recent=0, window_last=20,
        protected_from=17,
    )  # fmt: skip
    assert cut is not None
    assert cut.through_sequence == 16


def test_a_cut_reaches_into_the_recent_messages_when_they_alone_exceed_the_target() -> None:
    messages = conversation(40, size=1000)
    total = window_bytes(messages)
    target = window_bytes(messages[-4:])
    cut = compaction_cut(
        messages, window_bytes=total, target_bytes=target, keep_recent=20, window_last=40, protected_from=None
    )
    assert cut is not None
    assert cut.through_sequence == 36
    assert total - cut.covered_bytes <= target


def test_a_cut_in_a_prefix_is_never_placed_before_a_message_it_has_not_seen() -> None:
    messages = conversation(40)
    prefix = messages[:10]  # the message after the prefix is unknown
    cut = compaction_cut(
        prefix, window_bytes=window_bytes(messages), target_bytes=0, keep_recent=0, window_last=40,
        protected_from=None,
    )  # fmt: skip
    assert cut is not None
    assert cut.through_sequence == 9  # 10 would need to know message 11


def test_nothing_to_cover_gives_no_cut_and_gaps_are_refused() -> None:
    assert compaction_cut([], window_bytes=0, target_bytes=0, keep_recent=0, window_last=0, protected_from=None) is None
    only_turn = conversation(1)
    assert (
        compaction_cut(only_turn, window_bytes=99, target_bytes=0, keep_recent=0, window_last=1, protected_from=1)
        is None
    )
    with pytest.raises(ValueError, match="consecutive"):
        compaction_cut(
            [message(1), message(3)], window_bytes=99, target_bytes=0, keep_recent=0, window_last=3,
            protected_from=None,
        )  # fmt: skip


def test_a_prefix_fits_its_budget_by_the_size_estimates_and_holds_at_least_one_message() -> None:
    assert prefix_sequences(5, 100, large_messages=(), budget=8 * 1024 * 3) == range(5, 8)
    assert prefix_sequences(5, 100, large_messages=[(5, 10**6)], budget=1000) == range(5, 6)
    assert prefix_sequences(5, 6, large_messages=(), budget=10**9) == range(5, 7)


def test_summary_keys_sort_like_their_numbers() -> None:
    assert summary_key(7) == "000000000007"
    with pytest.raises(ValueError, match="summary number"):
        summary_key(0)


# -- the state's window -----------------------------------------------------------------------------------------


def test_the_state_tracks_the_window_and_a_compaction_moves_its_start() -> None:
    messages = conversation(8)
    state = AgentState().with_messages_stored(messages)
    assert state.model_window() == ModelWindow(first_sequence=1, last_sequence=8)
    assert state.window_bytes == window_bytes(messages)
    summary = HistorySummary(number=1, through_sequence=4, text="earlier")
    compacted = state.with_history_compacted(summary, covered_bytes=window_bytes(messages[:4]))
    assert compacted.model_window() == ModelWindow(first_sequence=5, last_sequence=8, summary_number=1)
    assert compacted.window_bytes == window_bytes(messages[4:])
    assert compacted.context_bytes == compacted.window_bytes + summary.size
    with pytest.raises(ValueError, match="not the next"):
        compacted.with_history_compacted(summary, covered_bytes=0)
    with pytest.raises(ValueError, match="must cover"):
        compacted.with_history_compacted(attrs.evolve(summary, number=2, through_sequence=3), covered_bytes=0)


# -- the policy -------------------------------------------------------------------------------------------------


def test_the_budget_is_the_smallest_of_characters_tokens_and_the_hard_limit() -> None:
    assert CompactionPolicy().budget_bytes == MAX_CONTEXT_BYTES
    assert CompactionPolicy(context_budget_chars=50_000).budget_bytes == 50_000
    assert CompactionPolicy(context_budget_tokens=10_000).budget_bytes == 10_000 * CHARS_PER_TOKEN
    assert CompactionPolicy(context_budget_chars=50_000, context_budget_tokens=10_000).budget_bytes == 40_000
    assert CompactionPolicy(context_budget_chars=10**9).budget_bytes == MAX_CONTEXT_BYTES
    assert CompactionPolicy().summary_limit_bytes == 32 * 1024
    assert CompactionPolicy(context_budget_chars=16 * 1024).summary_limit_bytes == 4 * 1024  # a quarter of it
    with pytest.raises(ValueError, match="context_budget_chars"):
        CompactionPolicy(context_budget_chars=10)
    with pytest.raises(ValueError, match="keep_recent_messages"):
        CompactionPolicy(keep_recent_messages=-1)


def test_the_policy_compacts_only_over_budget_and_with_something_before_the_active_turn() -> None:
    policy = CompactionPolicy(context_budget_chars=2048)
    small = AgentState().with_messages_stored(conversation(4))
    assert not policy.should_compact(small)
    big = AgentState().with_messages_stored(conversation(40, size=200))
    assert policy.should_compact(big)
    lone = AgentState().with_messages_stored([message(1, size=10_000)])
    assert not policy.should_compact(lone)  # one message: nothing before it to fold in
    many = AgentState().with_messages_stored(conversation(MAX_WINDOW_MESSAGES + 1, size=1))
    assert CompactionPolicy().should_compact(many)


def test_a_turn_goes_to_the_model_through_compaction_when_over_budget_each_movement_naming_its_loads() -> None:
    policy = CompactionPolicy(context_budget_chars=2048)
    small = AgentState().with_messages_stored(conversation(4))
    assert model_movement(small, policy) == GoTo(step=StepName.RUN_MODEL, window=small.model_window())
    big = AgentState().with_messages_stored(conversation(40, size=200))
    assert model_movement(big, policy) == GoTo(
        step=StepName.COMPACT_HISTORY, input=CompactionReason.POLICY.value, window=compaction_window(big)
    )
    assert compaction_window(big) == ModelWindow(first_sequence=1, last_sequence=40)


def test_a_compaction_loads_the_whole_window_when_its_tracked_size_fits_one_load() -> None:
    state = AgentState().with_messages_stored(conversation(1000))
    assert compaction_window(state) == ModelWindow(first_sequence=1, last_sequence=1000)


def test_a_compaction_of_a_window_over_one_load_reads_a_bounded_prefix_plus_one_message() -> None:
    state = AgentState().with_messages_stored(conversation(1000, size=4000))
    window = compaction_window(state)
    assert window.first_sequence == 1
    assert 1 < window.last_sequence < 1000
    assert len(window.sequences) * 8 * 1024 <= 2 * 1024 * 1024 + 8 * 1024


def test_a_state_stored_before_windows_were_tracked_still_counts_its_messages() -> None:
    legacy = attrs.evolve(AgentState().with_messages_stored(conversation(10_000)), window_bytes=0)
    assert legacy.context_bytes == 256 * 10_000
    assert CompactionPolicy().should_compact(legacy)
    window = compaction_window(legacy)
    assert len(window.sequences) < 10_000  # no tracked size to trust: loads by the per-message estimate


async def test_the_excerpt_compactor_folds_the_previous_summary_and_each_message_text() -> None:
    result = await ExcerptCompactor().compact([message(1), message(2, MessageRole.USER)], "before")
    assert result.text == "before\n[1 assistant] m1\n[2 user] m2"


# -- whole sessions on the in-memory host -----------------------------------------------------------------------


class SummarisingRunner(ScriptedRunner):
    """A scripted runner that also compacts, recording what it was asked."""

    def __init__(self, *args: object, fail_compactions: int = 0, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.compactions: list[tuple[tuple[int, ...], str | None]] = []
        self.fail_compactions = fail_compactions

    async def compact(self, messages: Sequence[AgentMessage], previous_summary: str | None) -> CompactionSummary:
        self.compactions.append((tuple(m.sequence for m in messages), previous_summary))
        if self.fail_compactions:
            self.fail_compactions -= 1
            raise RuntimeError("summariser down")
        return CompactionSummary(
            f"summary through {messages[-1].sequence}", usage=AgentUsage(model_calls=1, input_tokens=5)
        )


def reply_with(count: int, size: int = 300) -> "TurnCompleted":
    return TurnCompleted(new_messages=[assistant_message("r" * size) for _ in range(count)])


def small_budget(**changes: int) -> AgentSessionOptions:
    policy = CompactionPolicy(context_budget_chars=8 * 1024, keep_recent_messages=4)
    return AgentSessionOptions(compaction=attrs.evolve(policy, **changes))


async def run_turns(host: InMemorySessionHost, turns: int) -> None:
    for number in range(turns):
        await host.send_user_message(f"question {number}")
        await host.drive(GoTo(step=StepName.AWAIT_USER_MESSAGE))


async def test_a_long_session_reads_a_bounded_window_and_keeps_every_message_readable() -> None:
    runner = SummarisingRunner([reply_with(5) for _ in range(30)])
    host = InMemorySessionHost(runner, options=small_budget())
    await host.drive(await host.start())
    await run_turns(host, 30)
    state = host.state.current
    assert state.message_count == 30 * 6
    assert state.summary_count >= 5
    for turn in runner.model_turns[5:]:
        assert turn.summary is not None
        assert len(turn.messages) <= 40
        assert turn.messages[0].sequence == turn.summary.through_sequence + 1
        assert turn.messages[0].role is not MessageRole.TOOL
    compacted = host.sink.payloads(HistoryCompactedPayload)
    assert len(compacted) == state.summary_count
    assert [p.summary_number for p in compacted] == list(range(1, state.summary_count + 1))
    for earlier, later in itertools.pairwise(compacted):
        assert later.first_sequence == earlier.through_sequence + 1
    assert set(host.summaries.by_number) == set(range(1, state.summary_count + 1))
    assert runner.compactions[1][1] == "summary through " + str(compacted[0].through_sequence)
    assert host.usage.value.model_calls == state.summary_count  # scripted replies spend nothing; compactions do
    page = await host.list_agent_messages(after_sequence=0, limit=200)
    assert [m.sequence for m in page.messages] == list(range(1, 181))


async def test_a_provider_overflow_compacts_and_retries_the_model_call_once() -> None:
    def overflow_then_answer(turn: AgentTurnContext) -> AgentTurnOutcome:
        raise ContextOverflowError("prompt is too long")

    runner = SummarisingRunner([reply_with(5), reply_with(5), overflow_then_answer, reply_with(1)])
    host = InMemorySessionHost(runner, options=AgentSessionOptions())
    await host.drive(await host.start())
    await run_turns(host, 3)
    state = host.state.current
    assert state.last_turn_error is None
    assert state.summary_count == 1
    assert not state.retry_after_overflow
    (compacted,) = host.sink.payloads(HistoryCompactedPayload)
    assert compacted.reason == "overflow"
    retried = runner.model_turns[-1]
    assert retried.summary is not None
    assert retried.summary.number == 1
    assert [step for step, *_ in host.executed].count(StepName.COMPACT_HISTORY) == 1


async def test_a_second_overflow_after_the_compaction_fails_the_turn() -> None:
    overflow = ContextOverflowError("prompt is too long")
    runner = SummarisingRunner([reply_with(5), *[overflow] * 4])
    host = InMemorySessionHost(runner, options=AgentSessionOptions())
    await host.drive(await host.start())
    await run_turns(host, 2)
    state = host.state.current
    assert state.last_turn_error is not None
    assert "prompt is too long" in state.last_turn_error
    assert AgentEventType.TURN_FAILED in host.sink.types


async def test_a_failed_compaction_leaves_history_unchanged_and_the_turn_goes_on_when_it_fits() -> None:
    runner = SummarisingRunner([reply_with(5) for _ in range(4)], fail_compactions=3)
    host = InMemorySessionHost(runner, options=small_budget())
    await host.drive(await host.start())
    await run_turns(host, 4)
    steps = [step for step, *_ in host.executed]
    assert StepName.RECORD_COMPACTION_FAILURE in steps
    state = host.state.current
    assert state.last_turn_error is None
    assert state.message_count == 24
    assert host.summaries.by_number[1].number == 1  # a later compaction succeeded
    assert runner.model_turns[2].summary is None  # the turn after the failure ran on the whole window


async def test_a_runner_without_a_compactor_gets_the_excerpt_compactor() -> None:
    runner = ScriptedRunner([reply_with(5) for _ in range(10)])
    host = InMemorySessionHost(runner, options=small_budget())
    await host.drive(await host.start())
    await run_turns(host, 10)
    summary = host.summaries.by_number[host.state.current.summary_count]
    assert "[1 user] question 0" in summary.text
    assert runner.model_turns[-1].summary == summary


async def test_a_summary_longer_than_its_limit_is_cut_with_a_notice() -> None:
    class Verbose(SummarisingRunner):
        async def compact(self, messages: Sequence[AgentMessage], previous_summary: str | None) -> CompactionSummary:
            return CompactionSummary("s" * 5000)

    host = InMemorySessionHost(Verbose([reply_with(5) for _ in range(6)]), options=small_budget(max_summary_bytes=1024))
    await host.drive(await host.start())
    await run_turns(host, 6)
    text = host.summaries.by_number[1].text
    assert len(text.encode()) <= 1024
    assert "dex-agents: the summary was 5,000 bytes" in text


def test_a_new_turn_clears_an_earlier_turns_overflow_retry() -> None:
    state = attrs.evolve(AgentState(), retry_after_overflow=True)
    assert not state.start_turn().retry_after_overflow


async def test_a_failed_compaction_fails_the_turn_when_the_context_no_longer_fits() -> None:
    runner = SummarisingRunner([reply_with(1)])
    host = InMemorySessionHost(runner, options=AgentSessionOptions())
    await host.drive(await host.start())
    await host.send_user_message("hello")
    await host.drive(GoTo(step=StepName.AWAIT_USER_MESSAGE))
    state = host.state.current
    host.state.set(attrs.evolve(state.start_turn(), window_bytes=MAX_CONTEXT_BYTES + 1))
    decision = await host.record_compaction_failure("policy", recovery_error="RuntimeError: summariser down")
    assert decision == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    error = host.state.current.last_turn_error
    assert error == "history compaction failed: RuntimeError: summariser down"


def test_a_compaction_prefix_does_not_load_a_large_message_only_to_learn_its_role() -> None:
    messages = conversation(1000, size=4000)
    state = AgentState().with_messages_stored(messages)
    plain = compaction_window(state)
    following = plain.last_sequence  # the extra message of the prefix
    big = attrs.evolve(messages[following - 1], framework_item="b" * 1_000_000)
    heavy = AgentState().with_messages_stored([*messages[: following - 1], big, *messages[following:]])
    assert compaction_window(heavy).last_sequence == following - 1


def test_the_in_memory_host_refuses_reads_outside_the_window_a_movement_loaded() -> None:
    host = InMemorySessionHost()
    for stored in conversation(4):
        host.messages.append(stored)
    with host.messages.loading(ModelWindow(first_sequence=3, last_sequence=4)):
        assert [m.sequence for m in host.messages.read([3, 4])] == [3, 4]
        with pytest.raises(AssertionError, match="outside the loaded window"):
            host.messages.read([2, 3])
    assert len(host.messages.read([1, 2, 3, 4])) == 4
