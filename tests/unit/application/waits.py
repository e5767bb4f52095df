"""A turn run to where its calls wait (an approval, a result from outside), and a wait left past its deadline."""

from datetime import timedelta

from dex_agents.application.next import GoTo, StepName
from dex_agents.domain.tools import AgentToolCall
from dex_agents.testing.memory import InMemorySessionHost


async def at_the_wait(session: InMemorySessionHost, text: str) -> tuple[GoTo, ...]:
    """Start ``session`` on ``text``, run its model Step and drive the Steps that follow: those left wait."""
    await session.start(text)
    return await session.drive(await session.run_model())


async def resumed_past_the_deadline(
    session: InMemorySessionHost, left: tuple[GoTo, ...], tool_call_id: str, deadline: timedelta
) -> AgentToolCall:
    """The record of ``tool_call_id`` the model resumes with once its one interrupt's ``deadline`` passed unanswered.

    Checks the interrupt's deadline is ``deadline`` after it was raised, moves the clock a second past it,
    and drives the Steps ``left`` until the turn ends.
    """
    (interrupt,) = session.interrupts.get()
    assert interrupt.deadline == interrupt.raised_at + deadline
    session.clock.advance(deadline + timedelta(seconds=1))
    assert await session.drive(*left) == (GoTo(step=StepName.AWAIT_USER_MESSAGE),)
    return session.scripted.model_turns[1].tool_calls[tool_call_id]
