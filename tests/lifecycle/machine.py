"""The model-based lifecycle test: random interleavings of everything a client can do to a session.

`LifecycleMachine` is a hypothesis `RuleBasedStateMachine` over a `Backend` (a
session on the in-memory host, or on an engine through `AgentSessionClient`).
Its rules send (queued or steered, each message with its own plan of tool
rounds, failing tools and model failures: `tests.lifecycle.runner`), withdraw
(a message it sent, or one the snapshot lists), cancel, approve, reject, expire
an approval, and let the engine work; a backend may add its own (a Worker
SIGKILL). After every rule it checks `check_safety`; at the end it settles the
session (answering what is still pending) and checks `check_settled`.
"""

import itertools
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dex_agents import AgentInterrupt, AgentSnapshot
from dex_agents.domain.messages import MessageDelivery
from tests.lifecycle.model import Observed, Sent, check_safety, check_settled
from tests.lifecycle.runner import TOOLS, Plan

PLANS = st.builds(
    Plan,
    rounds=st.lists(st.lists(st.sampled_from(sorted(TOOLS)), min_size=1, max_size=3).map(tuple), max_size=2).map(tuple),
    fails=st.sampled_from([False, False, False, True]),
)
"""A turn's plan: up to two rounds of up to three tool calls, sometimes a failing model."""

T = TypeVar("T")

_TAGS = itertools.count(1)
"""Message tags, unique in the process (sessions of one engine share its Workers' logs)."""


class Backend(Protocol):
    """One session the machine drives."""

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of this backend to its end and return its result."""
        ...

    async def send(self, text: str, *, delivery: MessageDelivery, client_message_id: str) -> bool: ...
    async def withdraw(self, client_message_id: str) -> bool: ...
    async def cancel(self, reason: str) -> bool: ...
    async def resolve(self, interrupt: AgentInterrupt, *, approved: bool, reason: str | None) -> bool: ...
    async def expire(self) -> None: ...
    async def advance(self, choice: int) -> None: ...
    async def settle(self) -> None: ...
    async def observe(self) -> Observed: ...
    async def snapshot(self) -> AgentSnapshot: ...
    def close(self) -> None: ...


class LifecycleMachine(RuleBasedStateMachine):
    """Sends, steers, withdraws, cancels and answers approvals at random; the session must keep every message."""

    def __init__(self) -> None:
        super().__init__()
        self.backend = self.make_backend()
        self.sent: list[Sent] = []

    def make_backend(self) -> Backend:
        """Build the session this example drives (one per example); each subclass gives its backend."""
        raise TypeError(f"{type(self).__name__} must say which backend it drives (make_backend)")

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.backend.run(coroutine)

    # -- rules ----------------------------------------------------------------------------------------------

    @rule(plan=PLANS, steer=st.booleans())
    def send(self, plan: Plan, steer: bool) -> None:
        tag = f"m{next(_TAGS)}"
        text = f"{tag} {plan.render()}"
        delivery = MessageDelivery.STEER if steer else MessageDelivery.QUEUE
        message = Sent(tag=tag, text=text, delivery=delivery, client_message_id=f"id-{tag}")
        self.sent.append(message)
        message.accepted = self._run(
            self.backend.send(text, delivery=delivery, client_message_id=message.client_message_id)
        )

    @precondition(lambda self: bool(self.sent))
    @rule(index=st.integers(min_value=0))
    def withdraw_sent(self, index: int) -> None:
        message = self.sent[index % len(self.sent)]
        if self._run(self.backend.withdraw(message.client_message_id)):
            assert not message.withdrawn, f"{message.tag} was withdrawn twice"
            message.withdrawn = True

    @rule(index=st.integers(min_value=0))
    def withdraw_waiting(self, index: int) -> None:
        snapshot = self._snapshot()
        waiting = [m for m in snapshot.queued_messages if m.client_message_id is not None]
        if not waiting:
            return
        chosen = waiting[index % len(waiting)]
        message = next(s for s in self.sent if s.client_message_id == chosen.client_message_id)
        if self._run(self.backend.withdraw(message.client_message_id)):
            assert not message.withdrawn, f"{message.tag} was withdrawn twice"
            message.withdrawn = True

    @rule(reason=st.sampled_from(["", "wrong customer", "stop"]))
    def cancel(self, reason: str) -> None:
        self._run(self.backend.cancel(reason))

    @rule(index=st.integers(min_value=0), approved=st.booleans())
    def answer(self, index: int, approved: bool) -> None:
        pending = self._snapshot().pending_interrupts
        if pending:
            interrupt = pending[index % len(pending)]
            self._run(self.backend.resolve(interrupt, approved=approved, reason=None if approved else "no"))

    @rule()
    def expire(self) -> None:
        self._run(self.backend.expire())

    @rule(steps=st.integers(min_value=1, max_value=6), choice=st.integers(min_value=0, max_value=7))
    def advance(self, steps: int, choice: int) -> None:
        for _ in range(steps):
            self._run(self.backend.advance(choice))

    @rule(choice=st.integers(min_value=0, max_value=7))
    def advance_once(self, choice: int) -> None:
        # A second way to let the engine work, so that it does about as often as the client acts.
        self._run(self.backend.advance(choice))

    # -- checks ---------------------------------------------------------------------------------------------

    @invariant()
    def nothing_is_lost_or_corrupted_so_far(self) -> None:
        observed = self._run(self.backend.observe())
        check_safety(self.sent, observed)

    def teardown(self) -> None:
        try:
            self._run(self.backend.settle())
            observed = self._run(self.backend.observe())
            check_safety(self.sent, observed)
            check_settled(self.sent, observed)
        finally:
            self.backend.close()

    def _snapshot(self) -> AgentSnapshot:
        return self._run(self.backend.snapshot())
