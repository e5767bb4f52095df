"""`AgentSessionClient` follows a sent message to its turn's end, on a dev server client over an in-memory host."""

import asyncio
from datetime import timedelta
from typing import cast

import dex
import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow, ToolEffect, ToolPolicy, TurnCompleted, TurnStatus
from dex_agents.domain.usage import AgentUsage
from dex_agents.infrastructure.dex import _client_waits as client_module
from dex_agents.testing import ScriptedRunner, assistant_message, deferred_tool_call, tool_calls_requested
from dex_agents.testing.memory import InMemorySessionHost
from tests.fakes.dex_client import FakeSessionDexClient

SESSION = "session-1"
NEEDS_APPROVAL = ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)


def hello(text: str = "hello") -> TurnCompleted:
    return TurnCompleted(new_messages=[assistant_message(text)], usage=AgentUsage(model_calls=1))


def client_for(session: InMemorySessionHost) -> tuple[AgentSessionClient, FakeSessionDexClient]:
    fake = FakeSessionDexClient(session)
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="ClientWaits")
    return AgentSessionClient(cast(dex.AsyncClient, fake), flow), fake


@pytest.fixture(autouse=True)
def no_rechecks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the fallback recheck far away, so a wait that ends was woken by an event."""
    monkeypatch.setattr(client_module, "RECHECK_INTERVAL", timedelta(seconds=60))


async def test_send_user_message_still_answers_a_plain_bool() -> None:
    sessions, _ = client_for(InMemorySessionHost())
    assert await sessions.send_user_message(SESSION, "hi") is True
    assert await sessions.send_user_message(SESSION, " ") is False


async def test_a_receipt_is_followed_to_the_turn_it_started() -> None:
    session = InMemorySessionHost(ScriptedRunner([hello("first"), hello("second")]))
    sessions, _ = client_for(session)
    waiting = await session.drive(await session.start("opening"))

    receipt = await sessions.submit_user_message(SESSION, "hi", client_message_id="m-1")
    await session.drive(*waiting)
    result = await sessions.wait_for_turn(SESSION, receipt, timeout=5)

    assert (receipt.client_message_id, receipt.message_count, receipt.accepted) == ("m-1", 2, True)
    assert (result.turn_id, result.status, result.reply) == ("turn-2", TurnStatus.COMPLETED, "second")
    assert result.messages[0].client_message_id == "m-1"


async def test_a_wait_blocks_on_the_stream_until_turn_committed_not_turn_completed() -> None:
    session = InMemorySessionHost(ScriptedRunner([hello()]))
    sessions, fake = client_for(session)
    await session.drive(await session.start(None))
    receipt = await sessions.submit_user_message(SESSION, "hi")
    waiter = asyncio.create_task(sessions.wait_for_turn(SESSION, receipt, timeout=30))
    await fake.wait_for_reader()

    message = session.queue.take_one()
    assert message is not None
    await session.await_user_message([message])  # turn_started: the waiter finds its turn, still running
    await fake.wait_for_reader()
    snapshots = fake.rpc_calls.count("get_agent_snapshot")
    await session.run_model()  # writes turn_completed; the fake commits at once, but the waiter is not told
    await fake.wait_for_reader()

    assert not waiter.done()
    assert fake.rpc_calls.count("get_agent_snapshot") == snapshots
    session.announce_finished_turn()  # AwaitUserMessage's wait_for, after the commit
    result = await waiter
    assert (result.turn_id, result.status) == ("turn-1", TurnStatus.COMPLETED)


async def test_a_failed_turn_is_reported_with_its_error() -> None:
    session = InMemorySessionHost(ScriptedRunner([RuntimeError("model down")] * 3))
    sessions, _ = client_for(session)
    await session.drive(await session.start("hi"))

    result = await sessions.wait_for_turn(SESSION, "turn-1", timeout=5)

    assert (result.status, result.error) == (TurnStatus.FAILED, "RuntimeError: model down")


async def test_a_turn_that_does_not_end_in_time_raises_timeout_error() -> None:
    session = InMemorySessionHost(ScriptedRunner([hello()]))
    sessions, _ = client_for(session)
    await session.drive(await session.start(None))
    receipt = await sessions.submit_user_message(SESSION, "hi")
    with pytest.raises(TimeoutError, match="timed out"):
        await sessions.wait_for_turn(SESSION, receipt, timeout=0.05)


async def test_a_wait_for_something_that_is_not_a_turn_id_is_refused() -> None:
    sessions, _ = client_for(InMemorySessionHost())
    with pytest.raises(ValueError, match="not a turn ID"):
        await sessions.wait_for_turn(SESSION, "session-1", timeout=1)


async def test_wait_until_idle_returns_once_no_turn_runs_and_nothing_is_queued() -> None:
    session = InMemorySessionHost(ScriptedRunner([hello()]))
    sessions, fake = client_for(session)
    waiting = await session.drive(await session.start(None))
    await sessions.submit_user_message(SESSION, "hi")
    idle = asyncio.create_task(sessions.wait_until_idle(SESSION, timeout=30))
    await fake.wait_for_reader()
    assert not idle.done()  # a message is queued

    await session.drive(*waiting)
    session.announce_finished_turn()
    snapshot = await idle

    assert snapshot.state is not None
    assert (snapshot.state.turn_count, snapshot.queued_message_count) == (1, 0)


async def test_the_latest_resume_token_skips_every_event_written_before() -> None:
    session = InMemorySessionHost(ScriptedRunner([hello()]))
    sessions, _ = client_for(session)
    await session.drive(await session.start("hi"))
    token = await sessions.latest_resume_token(SESSION)
    with pytest.raises(dex.LongPollTimeoutError):
        await sessions.read_agent_event(SESSION, token, long_poll=timedelta(milliseconds=10))


async def test_a_cancelled_turn_is_reported_cancelled_and_a_withdrawn_message_starts_no_turn() -> None:
    session = InMemorySessionHost(
        ScriptedRunner([tool_calls_requested(deferred_tool_call("c1", "refund", policy=NEEDS_APPROVAL)), hello()])
    )
    sessions, _ = client_for(session)
    waiting = await session.drive(await session.start("refund it"))
    queued = await sessions.submit_user_message(SESSION, "and then this")
    assert [m.client_message_id for m in (await sessions.get_agent_snapshot(SESSION)).queued_messages] == [
        queued.client_message_id
    ]

    assert await sessions.withdraw_user_message(SESSION, queued.client_message_id) is True
    assert await sessions.cancel_turn(SESSION, "not now") is True
    await session.drive(*waiting)
    session.announce_finished_turn()
    result = await sessions.wait_for_turn(SESSION, "turn-1", timeout=5)

    assert result.status is TurnStatus.CANCELLED
    assert await sessions.cancel_turn(SESSION) is False, "no turn runs"
    snapshot = await sessions.get_agent_snapshot(SESSION)
    assert snapshot.state is not None
    assert (snapshot.state.turn_count, snapshot.queued_message_count) == (1, 0)


async def test_a_message_sent_with_send_user_message_can_be_withdrawn_by_the_id_the_snapshot_lists() -> None:
    session = InMemorySessionHost(ScriptedRunner([hello()]))
    sessions, _ = client_for(session)
    await session.start("opening")  # the turn runs: what is sent now waits

    assert await sessions.send_user_message(SESSION, "later") is True
    (waiting,) = (await sessions.get_agent_snapshot(SESSION)).queued_messages
    assert waiting.message_id is not None

    assert await sessions.withdraw_user_message(SESSION, waiting.message_id) is True
    assert (await sessions.get_agent_snapshot(SESSION)).queued_messages == ()
