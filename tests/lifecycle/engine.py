"""The lifecycle machine's backend on an engine: the dev server and Worker children, through `AgentSessionClient`.

One stack serves every example of a run (each example is a new session), on an
event loop of its own thread (`LoopThread`), since hypothesis drives the
machine synchronously. ``advance`` lets the engine work for a few milliseconds:
the interleavings are real concurrency. ``expire`` moves the dev server's clock
past the approval deadline. With ``kills``, a rule SIGKILLs the Worker (now, or
as the session's next event arrives: at a Step's output) and starts a
replacement.
"""

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import dex

from dex_agents import AgentInterrupt, AgentSessionClient, AgentSnapshot, WorkerMode
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.messages import AgentMessage, MessageDelivery
from dex_agents.testing import AgentTestStack, InvocationLog
from tests.lifecycle.model import Observed
from tests.lifecycle.stack import lifecycle_flow
from tests.lifecycle.worker import ENGINE_DEADLINE, SEEN_LOG_ENV

T = TypeVar("T")

CALL_TIMEOUT = 120.0
"""Seconds one backend call may take (a replacement Worker starts within it)."""
SETTLE_TIMEOUT = 90.0
"""Seconds a session may take to settle at the end of an example."""
STABLE_IDLE_SECONDS = 0.3
"""How long a settled session must stay idle (a taken message's turn commits within it)."""


class LoopThread:
    """An event loop on a thread of its own, for async work driven from synchronous code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="lifecycle-engine", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = CALL_TIMEOUT) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()


class EngineStack:
    """The dev server, a Client and a Worker child, shared by the examples of one run."""

    def __init__(self, tmp_path: Path, project_root: Path) -> None:
        self.thread = LoopThread()
        self.seen_log = InvocationLog(tmp_path / "seen.jsonl")
        self.flow = lifecycle_flow(deadline=ENGINE_DEADLINE)
        self.stack = AgentTestStack(
            tmp_path / "stack",
            [self.flow],
            "tests.lifecycle.worker",
            worker_cwd=project_root,
            worker_env={SEEN_LOG_ENV: str(self.seen_log.path)},
            worker_mode=WorkerMode.LISTEN,
        )
        self.thread.run(self.stack.__aenter__())
        self.thread.run(self.stack.start_worker())
        self.sessions: AgentSessionClient = self.stack.sessions(self.flow)

    def close(self) -> None:
        try:
            self.thread.run(self.stack.__aexit__(None, None, None))
        finally:
            self.thread.close()


@contextmanager
def engine_stack(tmp_path: Path, project_root: Path) -> Iterator[EngineStack]:
    """An `EngineStack` for the block."""
    stack = EngineStack(tmp_path, project_root)
    try:
        yield stack
    finally:
        stack.close()


class EngineBackend:
    """One session on the shared engine."""

    def __init__(self, engine: EngineStack, *, kills: bool = False) -> None:
        self.engine = engine
        self.sessions = engine.sessions
        self.session_id = f"lifecycle-{uuid.uuid4().hex[:12]}"
        self.kills = kills
        self.run(self.sessions.start_session(self.session_id))

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.engine.thread.run(coroutine)

    def close(self) -> None:
        """Nothing to close: the stack outlives the example."""

    async def send(self, text: str, *, delivery: MessageDelivery, client_message_id: str) -> bool:
        receipt = await self.sessions.submit_user_message(
            self.session_id, text, client_message_id=client_message_id, delivery=delivery
        )
        return receipt.accepted

    async def withdraw(self, client_message_id: str) -> bool:
        return await self.sessions.withdraw_user_message(self.session_id, client_message_id)

    async def cancel(self, reason: str) -> bool:
        return await self.sessions.cancel_turn(self.session_id, reason or None)

    async def resolve(self, interrupt: AgentInterrupt, *, approved: bool, reason: str | None) -> bool:
        return await self.sessions.resolve_interrupt(
            self.session_id, interrupt.interrupt_id, approved=approved, rejection_message=reason
        )

    async def expire(self) -> None:
        self.engine.stack.devserver.clock.advance((ENGINE_DEADLINE + timedelta(seconds=1)).total_seconds())

    async def advance(self, choice: int) -> None:
        await asyncio.sleep(0.004 * choice)

    async def kill_worker(self, *, at_next_event: bool) -> None:
        """SIGKILL the Worker (now, or as the session's next event arrives) and start a replacement."""
        if at_next_event:
            token = await self.sessions.latest_resume_token(self.session_id)
            with contextlib.suppress(dex.LongPollTimeoutError):
                await self.sessions.read_agent_event(self.session_id, token, long_poll=timedelta(seconds=1))
        for worker in list(self.engine.stack._workers):
            if worker.returncode is None:
                worker.kill()
        await self.engine.stack.start_worker(timeout=CALL_TIMEOUT)

    async def settle(self) -> None:
        """Approve whatever waits, until no turn runs and nothing waits (or `SETTLE_TIMEOUT` passes)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_TIMEOUT
        while loop.time() < deadline:
            snapshot = await self.sessions.get_agent_snapshot(self.session_id)
            if snapshot.is_idle and await self._still_idle(snapshot):
                return
            for interrupt in snapshot.pending_interrupts:
                await self.sessions.resolve_interrupt(self.session_id, interrupt.interrupt_id, approved=True)
            try:
                await self.sessions.wait_until_idle(self.session_id, timeout=1)
            except TimeoutError:
                continue
        raise AssertionError(f"{self.session_id} did not settle in {SETTLE_TIMEOUT:g} s: {await self.describe()}")

    async def _still_idle(self, idle: AgentSnapshot) -> bool:
        """Whether the session is idle again a moment later, with no turn started meanwhile.

        A snapshot reads committed state: between ``AwaitUserMessage`` taking a queued message and its new turn
        committing, the session looks idle (`AgentSessionClient.wait_until_idle` says so too).
        """
        await asyncio.sleep(STABLE_IDLE_SECONDS)
        again = await self.sessions.get_agent_snapshot(self.session_id)
        assert idle.state is not None
        return again.is_idle and again.state is not None and again.state.turn_count == idle.state.turn_count

    async def describe(self) -> str:
        """The session as a failure message shows it: its state, approvals, records, queue and latest Steps."""
        snapshot = await self.snapshot()
        records = [(r.tool_call_id, r.tool_name, r.status.value) for r in snapshot.tool_calls]
        history = await self.engine.stack.read_step_history(self.session_id)
        steps = [(e.step_execution_id, e.event_type, e.final_attempt) for e in history[-40:]]
        events = [
            (e.turn_id, e.step_execution_id, e.type.value, e.payload.to_dict())
            for e in await self._events()
            if "interrupt" in e.type.value or "turn_" in e.type.value or "cancel" in e.type.value
        ]
        return (
            f"state={snapshot.state} pending={[i.interrupt_id for i in snapshot.pending_interrupts]} "
            f"records={records} queued={snapshot.queued_message_count} steered={len(snapshot.steered_messages)} "
            f"latest steps={steps} events={events}"
        )

    async def snapshot(self) -> AgentSnapshot:
        return await self.sessions.get_agent_snapshot(self.session_id)

    async def observe(self) -> Observed:
        # The snapshot first: the history read after it holds every message it shows (messages are only appended).
        snapshot = await self.snapshot()
        history: list[AgentMessage] = []
        after: int | None = 0
        while after is not None:
            page = await self.sessions.list_agent_messages(self.session_id, after_sequence=after, limit=200)
            history.extend(page.messages)
            after = page.next_after_sequence
        seen = [
            (entry["kind"], entry["name"])
            for entry in self.engine.seen_log.entries()
            if entry.get("session") == self.session_id
        ]
        return Observed(history=history, snapshot=snapshot, events=await self._events(), seen=seen)

    async def _events(self) -> list[AgentEvent]:
        client = self.engine.stack.client
        newest_first: list[AgentEvent] = []
        token = ""
        while True:
            page = await client.list_stream_messages(self.session_id, self.engine.flow.events_stream, 200, token)
            newest_first.extend(message.value for message in page.messages)
            token = page.next_page_token
            if not token or not page.messages:
                return newest_first[::-1]
