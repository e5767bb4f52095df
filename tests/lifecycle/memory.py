"""The lifecycle machine's backend on `InMemorySessionHost`: one Step at a time, RPCs between any two.

`MemoryBackend.advance` runs one runnable Step (the ``choice``-th, counting
round the Steps that wait), so every RPC lands at every Step boundary over
enough examples. Approvals expire on the host's `ManualClock`.
"""

import asyncio
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any, TypeVar

from dex_agents import AgentInterrupt, AgentSnapshot
from dex_agents.application.next import GoTo, StepName, WaitAgain
from dex_agents.domain.messages import AgentMessage, MessageDelivery
from dex_agents.testing import InMemorySessionHost, ManualClock
from dex_agents.testing.memory._driver import movements
from tests.lifecycle.model import Observed
from tests.lifecycle.runner import APPROVAL_DEADLINE, LifecycleRunner, lifecycle_options

T = TypeVar("T")


class MemoryBackend:
    """A session on the in-memory host, driven Step by Step."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.loop = asyncio.new_event_loop()
        self.host = InMemorySessionHost(
            LifecycleRunner(seen=lambda kind, what, _flow_id: self.seen.append((kind, what))),
            options=lifecycle_options(),
            clock=ManualClock(),
        )
        self.moves: list[GoTo] = list(movements(self.run(self.host.start(None))))

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def close(self) -> None:
        self.loop.close()

    async def send(self, text: str, *, delivery: MessageDelivery, client_message_id: str) -> bool:
        return await self.host.send_user_message(text, client_message_id=client_message_id, delivery=delivery)

    async def withdraw(self, client_message_id: str) -> bool:
        return await self.host.withdraw_user_message(client_message_id)

    async def cancel(self, reason: str) -> bool:
        return await self.host.cancel_turn(reason or None)

    async def resolve(self, interrupt: AgentInterrupt, *, approved: bool, reason: str | None) -> bool:
        return await self.host.resolve_interrupt(interrupt.interrupt_id, approved=approved, rejection_message=reason)

    async def expire(self) -> None:
        self.host.clock.advance(APPROVAL_DEADLINE + timedelta(seconds=1))

    async def advance(self, choice: int) -> None:
        await self._step(choice)

    async def _step(self, choice: int) -> bool:
        """Run one runnable Step, the ``choice``-th counting round; ``False`` when none can run."""
        count = len(self.moves)
        for offset in range(count):
            index = (choice + offset) % count
            move = self.moves[index]
            decision = await self.host.deliver(move)
            if decision is None:
                continue
            del self.moves[index]
            if isinstance(decision, WaitAgain):
                self.moves.append(GoTo(step=move.step, input=decision.input))
            else:
                self.moves.extend(movements(decision))
            return True
        return False

    async def settle(self) -> None:
        """Run every Step that can run, approving whatever waits for an answer, until the session idles."""
        for _ in range(10_000):
            if await self._step(0):
                continue
            pending = (await self.host.get_agent_snapshot()).pending_interrupts
            if not pending:
                return
            for interrupt in pending:
                await self.host.resolve_interrupt(interrupt.interrupt_id, approved=True)
        raise AssertionError(f"the session did not settle: {self.moves}")

    async def snapshot(self) -> AgentSnapshot:
        return await self.host.get_agent_snapshot()

    async def observe(self) -> Observed:
        history: list[AgentMessage] = []
        after: int | None = 0
        while after is not None:
            page = await self.host.list_agent_messages(after_sequence=after, limit=200)
            history.extend(page.messages)
            after = page.next_after_sequence
        return Observed(
            history=history, snapshot=await self.snapshot(), events=self.host.sink.events, seen=list(self.seen)
        )

    @property
    def waiting_steps(self) -> list[StepName]:
        """The Steps that wait (for a look when a check fails)."""
        return [move.step for move in self.moves]
