"""``StartAgentSession``, ``AwaitUserMessage`` and the ``send_user_message`` RPC."""

import pytest

from dex_agents.application.next import GoTo, StepName, WaitAgain
from dex_agents.domain import events as ev
from dex_agents.domain.events import AgentEventType
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import AgentUserMessage, MessageRole
from dex_agents.domain.session import AgentState, AgentStatus
from dex_agents.domain.usage import AgentUsage
from dex_agents.testing import ScriptedRunner, framework_message
from dex_agents.testing.memory import InMemorySessionHost
from tests.builders import make_interrupt


async def test_a_non_blank_initial_message_starts_the_first_turn() -> None:
    runner = ScriptedRunner()
    session = InMemorySessionHost(runner)

    decision = await session.start("Find my open tickets")

    assert decision == GoTo(step=StepName.RUN_MODEL, window=session.state.current.model_window())
    state = session.state.current
    assert (state.status, state.turn_count, state.active_turn_id, state.message_count) == (
        AgentStatus.RUNNING_MODEL,
        1,
        "turn-1",
        1,
    )
    (message,) = session.messages.all
    assert (message.sequence, message.turn_id, message.role, message.text) == (
        1,
        "turn-1",
        MessageRole.USER,
        "Find my open tickets",
    )
    assert runner.user_message_texts == ("Find my open tickets",)
    (started,) = session.sink.events
    assert (started.type, started.payload, started.turn_id) == (
        AgentEventType.TURN_STARTED,
        ev.turn_started(1),
        "turn-1",
    )


@pytest.mark.parametrize("initial_message", [None, "", "   ", "\n\t "])
async def test_a_blank_initial_message_starts_no_turn(initial_message: str | None) -> None:
    runner = ScriptedRunner()
    session = InMemorySessionHost(runner)

    decision = await session.start(initial_message)

    assert decision == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    assert session.state.value == AgentState()
    assert session.messages.all == ()
    assert runner.user_message_texts == ()
    assert session.sink.events == ()


async def test_start_initializes_usage_and_pending_interrupts() -> None:
    session = InMemorySessionHost()
    session.usage.set(AgentUsage(model_calls=9))
    session.interrupts.set([_stale_interrupt()])

    await session.start(None)

    assert session.usage.value == AgentUsage()
    assert session.interrupts.value == ()


async def test_a_delivered_user_message_starts_the_next_turn_at_the_next_sequence() -> None:
    session = InMemorySessionHost()
    await session.start(None)
    session.state.set(session.state.current.with_messages_appended(4))

    decision = await session.await_user_message([AgentUserMessage(text="Refund order 7")])

    assert decision == GoTo(step=StepName.RUN_MODEL, window=session.state.current.model_window())
    state = session.state.current
    assert (state.status, state.active_turn_id, state.message_count) == (AgentStatus.RUNNING_MODEL, "turn-1", 5)
    (message,) = session.messages.all
    assert (message.sequence, message.turn_id, message.text) == (5, "turn-1", "Refund order 7")
    assert session.sink.events[0].payload == ev.turn_started(5)
    assert session.sink.events[0].turn_id == "turn-1"


async def test_a_blank_delivered_message_starts_no_turn_and_waits_again() -> None:
    session = InMemorySessionHost()
    await session.start(None)

    decision = await session.await_user_message([AgentUserMessage(text="   ")])

    assert decision == WaitAgain()
    assert session.state.value == AgentState()
    assert session.messages.all == ()


async def test_a_user_message_built_with_another_role_fails_the_first_turn_and_keeps_the_session() -> None:
    session = InMemorySessionHost(
        ScriptedRunner(build_user_message=lambda text: framework_message(MessageRole.ASSISTANT, text))
    )

    next_ = await session.start("hi")

    assert next_ == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    assert session.messages.all == ()
    state = session.state.current
    assert (state.status, state.turn_count, state.active_turn_id) == (AgentStatus.WAITING_FOR_USER_MESSAGE, 1, None)
    assert state.last_turn_error is not None
    assert "RunnerContractError: build_user_message must return a user message" in state.last_turn_error
    (failed,) = session.sink.events
    assert (failed.type, failed.turn_id) == (AgentEventType.TURN_FAILED, "turn-1")


async def test_a_user_message_built_with_another_role_fails_its_turn_when_delivered() -> None:
    session = InMemorySessionHost(
        ScriptedRunner(build_user_message=lambda text: framework_message(MessageRole.SYSTEM, text))
    )
    await session.start(None)

    next_ = await session.await_user_message([AgentUserMessage(text="hi")])

    assert next_ == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    assert session.messages.all == ()
    assert session.state.current.active_turn_id is None
    assert session.state.current.turn_count == 1
    assert session.state.current.last_turn_error is not None


@pytest.mark.parametrize("text", ["", " ", "\n\t"])
async def test_sending_a_blank_user_message_returns_false_and_queues_nothing(text: str) -> None:
    session = InMemorySessionHost()
    assert await session.send_user_message(text) is False
    assert session.queue.size() == 0


async def test_sending_user_messages_queues_them_in_order() -> None:
    session = InMemorySessionHost()
    assert await session.send_user_message("first") is True
    assert await session.send_user_message(" second ") is True
    assert session.queue.size() == 2
    assert session.queue.take_one() == AgentUserMessage(text="first")
    assert session.queue.take_one() == AgentUserMessage(text=" second ")


def _stale_interrupt() -> AgentInterrupt:
    return make_interrupt(turn_id="turn-9", raised_at=InMemorySessionHost().clock.now())
