"""``get_agent_snapshot`` and ``list_agent_messages``."""

import pytest

from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.session import AgentState
from dex_agents.domain.snapshot import page_sequences, snapshot_sequences
from dex_agents.domain.tools import ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.domain.usage import AgentUsage
from dex_agents.testing import ScriptedRunner, deferred_tool_call, make_tool_call, tool_calls_requested
from dex_agents.testing.memory import InMemorySessionHost


def with_messages(count: int) -> InMemorySessionHost:
    session = InMemorySessionHost()
    for sequence in range(1, count + 1):
        session.messages.append(
            AgentMessage(
                sequence=sequence, turn_id="turn-1", role=MessageRole.ASSISTANT, framework_item="{}", text=str(sequence)
            )
        )
    session.state.set(AgentState().with_messages_appended(count))
    session.messages.reads.clear()
    return session


async def test_a_snapshot_before_the_start_step_commits_has_no_state() -> None:
    snapshot = await InMemorySessionHost().get_agent_snapshot()
    assert snapshot.state is None
    assert (snapshot.messages, snapshot.pending_interrupts, snapshot.tool_calls) == ((), (), ())
    assert (snapshot.usage, snapshot.queued_message_count) == (AgentUsage(), 0)


async def test_a_snapshot_holds_the_last_200_messages_oldest_first_and_reads_only_those() -> None:
    session = with_messages(250)

    snapshot = await session.get_agent_snapshot()

    assert [m.sequence for m in snapshot.messages] == list(range(51, 251))
    assert session.messages.reads == [tuple(range(51, 251))]


@pytest.mark.parametrize(("count", "first"), [(0, None), (1, 1), (200, 1), (201, 2)])
async def test_a_snapshot_holds_every_message_up_to_200(count: int, first: int | None) -> None:
    snapshot = await with_messages(count).get_agent_snapshot()
    assert len(snapshot.messages) == min(count, 200)
    assert (snapshot.messages[0].sequence if snapshot.messages else None) == first


async def test_a_snapshot_shows_state_interrupts_the_active_turns_calls_usage_and_queue() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(
                deferred_tool_call("c2", "refund", policy=ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)),
                deferred_tool_call("c1", "search"),
            )
        ]
    )
    session = InMemorySessionHost(runner)
    await session.start("go")
    await session.run_model()
    session.tool_calls.put(make_tool_call("stale", turn_id="turn-0", deferral_order=99))
    await session.send_user_message("next one")

    snapshot = await session.get_agent_snapshot()

    assert snapshot.state == session.state.current
    assert [m.text for m in snapshot.messages] == ["go"]
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == ["turn-1.c2"]
    assert [(r.tool_call_id, r.status) for r in snapshot.tool_calls] == [
        ("c2", ToolCallStatus.AWAITING_APPROVAL),
        ("c1", ToolCallStatus.PENDING),
    ]
    assert snapshot.usage == AgentUsage(model_calls=1)
    assert snapshot.queued_message_count == 1


async def test_messages_page_oldest_first_and_chain_through_the_whole_history() -> None:
    session = with_messages(7)
    pages = []
    after = 0
    while True:
        page = await session.list_agent_messages(after_sequence=after, limit=3)
        pages.append([m.sequence for m in page.messages])
        if page.next_after_sequence is None:
            break
        after = page.next_after_sequence
    assert pages == [[1, 2, 3], [4, 5, 6], [7]]


@pytest.mark.parametrize(("limit", "size"), [(-5, 1), (0, 1), (1, 1), (50, 50), (200, 200), (201, 200), (10_000, 200)])
async def test_the_page_size_is_clamped_to_1_through_200(limit: int, size: int) -> None:
    session = with_messages(300)
    page = await session.list_agent_messages(limit=limit)
    assert [m.sequence for m in page.messages] == list(range(1, size + 1))
    assert page.next_after_sequence == size
    assert session.messages.reads == [tuple(range(1, size + 1))]


async def test_the_default_page_is_50_messages() -> None:
    page = await with_messages(60).list_agent_messages()
    assert len(page.messages) == 50


@pytest.mark.parametrize("after", [5, 6, 100])
async def test_a_page_after_the_last_message_is_empty_and_ends_the_chain(after: int) -> None:
    page = await with_messages(5).list_agent_messages(after_sequence=after)
    assert (page.messages, page.next_after_sequence) == ((), None)


async def test_a_page_of_a_session_that_has_not_started_is_empty() -> None:
    page = await InMemorySessionHost().list_agent_messages()
    assert (page.messages, page.next_after_sequence) == ((), None)


async def test_a_negative_cursor_starts_at_the_first_message() -> None:
    page = await with_messages(3).list_agent_messages(after_sequence=-4, limit=2)
    assert ([m.sequence for m in page.messages], page.next_after_sequence) == ([1, 2], 2)


def test_page_and_snapshot_sequences_are_pure_ranges() -> None:
    assert page_sequences(after_sequence=2, limit=2, message_count=10) == (range(3, 5), 4)
    assert page_sequences(after_sequence=8, limit=5, message_count=10) == (range(9, 11), None)
    assert snapshot_sequences(0) == range(1, 1)
    assert snapshot_sequences(450) == range(251, 451)
