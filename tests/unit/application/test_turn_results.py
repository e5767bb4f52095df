"""How a finished turn is read: `turn_result` from a snapshot, and ``turn_committed`` once the end is committed."""

import attrs
import pytest

from dex_agents import (
    AgentMessage,
    AgentSnapshot,
    AgentState,
    AgentStatus,
    AgentUsage,
    MessageRole,
    TurnCompleted,
    TurnStatus,
    turn_result,
)
from dex_agents.domain import events as ev
from dex_agents.domain.events import AgentEventType
from dex_agents.domain.session import turn_number
from dex_agents.testing import ScriptedRunner, assistant_message
from dex_agents.testing.memory import InMemorySessionHost
from tests.builders import make_interrupt


def message(sequence: int, turn_id: str, role: MessageRole, text: str | None = None) -> AgentMessage:
    return AgentMessage(sequence=sequence, turn_id=turn_id, role=role, framework_item="{}", text=text)


def snapshot_of(state: AgentState | None, *messages: AgentMessage, queued: int = 0) -> AgentSnapshot:
    return AgentSnapshot(
        state=state,
        messages=messages,
        pending_interrupts=(),
        tool_calls=(),
        usage=AgentUsage(),
        queued_message_count=queued,
    )


HISTORY = (
    message(1, "turn-1", MessageRole.USER, "hi"),
    message(2, "turn-1", MessageRole.ASSISTANT, "hello"),
    message(3, "turn-2", MessageRole.USER, "refund"),
    message(4, "turn-2", MessageRole.USER, "[Dex] note"),
    message(5, "turn-3", MessageRole.USER, "again"),
)


def test_a_turn_not_started_or_still_running_has_no_result() -> None:
    running = AgentState(status=AgentStatus.RUNNING_MODEL, turn_count=3, active_turn_id="turn-3", message_count=5)
    snapshot = snapshot_of(running, *HISTORY)
    assert turn_result(snapshot, "turn-3") is None
    assert turn_result(snapshot, "turn-4") is None
    assert turn_result(snapshot_of(None), "turn-1") is None


def test_the_latest_turn_failed_exactly_when_the_state_holds_an_error() -> None:
    failed = AgentState(turn_count=3, message_count=5, last_turn_error="model down")
    result = turn_result(snapshot_of(failed, *HISTORY), "turn-3")
    assert result is not None
    assert (result.status, result.error, [m.sequence for m in result.messages]) == (
        TurnStatus.FAILED,
        "model down",
        [5],
    )


def test_the_latest_turn_completed_when_the_state_holds_no_error() -> None:
    done = AgentState(turn_count=1, message_count=2)
    result = turn_result(snapshot_of(done, *HISTORY[:2]), "turn-1")
    assert result is not None
    assert (result.status, result.error, result.reply) == (TurnStatus.COMPLETED, None, "hello")


def test_an_earlier_turn_is_read_from_its_messages_with_the_error_its_event_gave() -> None:
    later = AgentState(turn_count=3, message_count=5)
    snapshot = snapshot_of(later, *HISTORY)
    first = turn_result(snapshot, "turn-1")
    second = turn_result(snapshot, "turn-2", error_hint="model down")
    assert first is not None
    assert second is not None
    assert (first.status, first.error) == (TurnStatus.COMPLETED, None)
    assert (second.status, second.error, second.reply) == (TurnStatus.FAILED, "model down", None)


def test_messages_given_explicitly_replace_the_snapshots() -> None:
    later = AgentState(turn_count=3, message_count=5)
    result = turn_result(snapshot_of(later), "turn-1", messages=HISTORY)
    assert result is not None
    assert [m.sequence for m in result.messages] == [1, 2]


@pytest.mark.parametrize(
    ("snapshot", "idle"),
    [
        (snapshot_of(None), False),
        (snapshot_of(AgentState()), True),
        (snapshot_of(AgentState(turn_count=1)), True),
        (snapshot_of(AgentState(turn_count=1), queued=1), False),
        (snapshot_of(AgentState(status=AgentStatus.RUNNING_TOOLS, turn_count=1, active_turn_id="turn-1")), False),
    ],
)
def test_a_session_is_idle_once_started_with_no_turn_running_nothing_queued_and_no_approval_pending(
    snapshot: AgentSnapshot, *, idle: bool
) -> None:
    assert snapshot.is_idle is idle


def test_a_session_with_an_approval_pending_is_not_idle() -> None:
    interrupt = make_interrupt()
    snapshot = attrs.evolve(snapshot_of(AgentState(turn_count=1)), pending_interrupts=(interrupt,))
    assert not snapshot.is_idle


def test_turn_numbers_are_read_back_from_turn_ids() -> None:
    assert turn_number("turn-12") == 12
    for bad in ("turn-0", "turn-", "12", "turn-x"):
        with pytest.raises(ValueError, match="not a turn ID"):
            turn_number(bad)


def hello() -> TurnCompleted:
    return TurnCompleted(new_messages=[assistant_message("hello")], usage=AgentUsage(model_calls=1))


async def test_turn_committed_is_written_before_the_next_wait_with_the_turns_outcome() -> None:
    session = InMemorySessionHost(
        ScriptedRunner([hello(), RuntimeError("down"), RuntimeError("down"), RuntimeError("down")])
    )
    session.announce_finished_turn()
    assert session.sink.events == ()  # no turn ran yet

    waiting = await session.drive(await session.start("hi"))
    session.announce_finished_turn()
    assert await session.send_user_message("again")
    await session.drive(*waiting)
    session.announce_finished_turn()

    committed = session.sink.of_type(AgentEventType.TURN_COMMITTED)
    assert [(e.turn_id, e.payload) for e in committed] == [
        ("turn-1", ev.turn_committed(failed_with=None, message_count=2)),
        ("turn-2", ev.turn_committed(failed_with="RuntimeError: down", message_count=3)),
    ]


async def test_the_user_message_of_a_turn_keeps_the_applications_message_id() -> None:
    session = InMemorySessionHost(ScriptedRunner([hello()]))
    waiting = await session.drive(await session.start(None))
    assert await session.send_user_message("hi", client_message_id="m-7")

    await session.drive(*waiting)

    user = session.messages.all[0]
    assert (user.turn_id, user.client_message_id) == ("turn-1", "m-7")
