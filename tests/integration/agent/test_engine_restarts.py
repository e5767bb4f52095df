"""Sessions survive a SIGKILL of the engine: the dev server in a child process, restarted on its port and data dir.

Each case parks a session at a known point (a running tool, a pending approval, a
queued message, a compaction, a cancel request), SIGKILLs the dev server, starts it
again on the same port and data dir, and checks that the session goes on with
nothing lost or run twice. The Workers reconnect by themselves (pull: a new task
stream; listening: the server calls them at their address again); one case kills
a Worker as well.
"""

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import dex
import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow, AgentSnapshot, ToolCallStatus
from dex_agents.domain.snapshot import TurnStatus
from dex_agents.testing import AgentTestStack, session_is_idle, wait_for_agent_snapshot, wait_until
from dex_agents.testing.probes import engine_unreachable
from tests.integration.agent.scripted_agent import COMPACT_GATE_ENV, KEEP_RECENT_ENV, gate
from tests.integration.agent.scripted_agent import invocations as log
from tests.integration.agent.test_sessions import fake_stack_with, tool, turn
from tests.integration.stacks import session_on_a_worker, started_session

pytestmark = pytest.mark.integration

T = TypeVar("T")

RESTART_WAIT = 60.0
"""Seconds a probe keeps trying while Clients and Workers reconnect to the restarted engine."""


async def settled(call: Callable[[], Awaitable[T]]) -> T:
    """Await ``call`` once the engine answers again (its Client reconnects with back-off)."""
    outcome: list[T] = []

    async def attempt() -> bool:
        try:
            outcome.append(await call())
        except dex.DexServiceError as error:
            if engine_unreachable(error):
                return False
            raise
        return True

    await wait_until("the restarted engine to answer", attempt, timeout=RESTART_WAIT)
    return outcome[0]


async def snapshot_where(
    sessions: AgentSessionClient, session_id: str, probe: Callable[[AgentSnapshot], T | None], what: str
) -> T:
    """Poll the session's snapshot (through engine restarts) until ``probe`` holds."""
    return await wait_for_agent_snapshot(
        sessions, session_id, probe, description=what, timeout=RESTART_WAIT, across_restarts=True
    )


def write_succeeded(snapshot: AgentSnapshot) -> bool:
    return any(c.tool_call_id == "c2" and c.status is ToolCallStatus.SUCCEEDED for c in snapshot.tool_calls)


def answer(snapshot: AgentSnapshot) -> dict[str, str]:
    text = snapshot.messages[-1].text
    assert text is not None
    loaded: dict[str, str] = json.loads(text)
    return loaded


@pytest.fixture
async def engine_stack(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[AgentTestStack, AgentSessionFlow]]:
    env = {KEEP_RECENT_ENV: "2"}
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, env, engine_data_dir=tmp_path / "engine") as both:
        yield both


async def crash_engine(stack: AgentTestStack) -> None:
    await stack.kill_engine()
    await stack.restart_engine()


async def test_a_running_read_survives_an_engine_restart_and_a_worker_kill_and_runs_again(
    engine_stack: tuple[AgentTestStack, AgentSessionFlow],
) -> None:
    stack, flow = engine_stack
    worker, sessions = await session_on_a_worker(
        stack, flow, turn(tool("c1", "read_tool", gate="g"), tool("c2", "idempotent_write"))
    )
    await gate("g").wait_until_reached()
    await snapshot_where(sessions, "s", write_succeeded, "the write to be recorded")
    await stack.kill_engine()
    worker.kill()
    await stack.restart_engine()
    await stack.start_worker()
    gate("g").release()
    snapshot = await snapshot_where(sessions, "s", session_is_idle, "the turn to end")
    assert answer(snapshot) == {
        "c1": "succeeded: read_tool done with key s/turn-1/c1",
        "c2": "succeeded: idempotent_write done with key s/turn-1/c2",
    }
    assert log().count("tool", "read_tool") == 2, "the read the engine was running ran again, once"
    assert log().count("tool", "idempotent_write") == 1
    assert [m.sequence for m in snapshot.messages] == [1, 2], "nothing lost or doubled"


async def test_a_pending_approval_is_answerable_after_an_engine_sigkill_and_its_tool_runs_once(
    engine_stack: tuple[AgentTestStack, AgentSessionFlow],
) -> None:
    stack, flow = engine_stack
    sessions = await started_session(stack, flow, turn(tool("c1", "approved_write")))
    interrupt = await snapshot_where(
        sessions, "s", lambda s: next(iter(s.pending_interrupts), None), "a pending approval"
    )
    await crash_engine(stack)
    after = await snapshot_where(sessions, "s", lambda s: s, "the session after the restart")
    assert [i.interrupt_id for i in after.pending_interrupts] == [interrupt.interrupt_id]
    assert after.pending_interrupts[0].deadline == interrupt.deadline, "the deadline keeps its server time"
    assert await settled(lambda: sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=True))
    snapshot = await snapshot_where(sessions, "s", session_is_idle, "the turn to end")
    assert answer(snapshot) == {"c1": "succeeded: approved_write done with key s/turn-1/c1"}
    assert log().count("tool", "approved_write") == 1


async def test_a_queued_message_and_a_cancel_request_are_kept_across_an_engine_sigkill(
    engine_stack: tuple[AgentTestStack, AgentSessionFlow],
) -> None:
    stack, flow = engine_stack
    sessions = await started_session(stack, flow, turn(tool("c1", "read_tool", gate="g")))
    await gate("g").wait_until_reached()
    receipt = await sessions.submit_user_message("s", turn(tool("c2", "idempotent_write")))
    assert await sessions.cancel_turn("s", reason="changed my mind") is True
    await crash_engine(stack)
    gate("g").release()
    second = await settled(lambda: sessions.wait_for_turn("s", receipt, timeout=RESTART_WAIT))
    assert second.status is TurnStatus.COMPLETED, "the queued message ran as the next turn"
    snapshot = await snapshot_where(sessions, "s", session_is_idle, "the second turn to end")
    state = snapshot.state
    assert state is not None
    assert state.turn_count == 2
    texts = [m.text or "" for m in snapshot.messages]
    assert any("changed my mind" in text for text in texts), "the first turn ended cancelled, with its note"
    assert answer(snapshot) == {"c2": "succeeded: idempotent_write done with key s/turn-2/c2"}
    assert log().count("tool", "idempotent_write") == 1
    assert log().count("model", "turn-2") == 2


async def test_a_compaction_interrupted_by_an_engine_sigkill_is_summarised_once_and_the_turn_goes_on(
    engine_stack: tuple[AgentTestStack, AgentSessionFlow], monkeypatch: pytest.MonkeyPatch
) -> None:
    stack, flow = engine_stack
    monkeypatch.setenv(COMPACT_GATE_ENV, "compact")
    sessions = await started_session(stack, flow, turn(emit=30))
    await snapshot_where(sessions, "s", session_is_idle, "the first turn to end")
    receipt = await sessions.submit_user_message("s", turn(tool("c1", "read_tool"), overflow="resuming"))
    await gate("compact").wait_until_reached()
    await crash_engine(stack)
    gate("compact").release()
    result = await settled(lambda: sessions.wait_for_turn("s", receipt, timeout=RESTART_WAIT))
    snapshot = await snapshot_where(sessions, "s", session_is_idle, "the turn to end")
    assert result.status is TurnStatus.COMPLETED
    state = snapshot.state
    assert state is not None
    assert (state.summary_count, state.last_turn_error) == (1, None), "one summary, kept"
    assert [m.sequence for m in snapshot.messages] == list(range(1, state.message_count + 1)), "nothing lost"
    assert snapshot.tool_calls == ()
    assert log().count("tool", "read_tool") == 1
    assert ToolCallStatus.SUCCEEDED.value in answer(snapshot)["c1"]
