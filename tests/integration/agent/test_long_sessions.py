"""Long sessions on the dev server: the model reads a bounded window, compaction is durable, nothing stored is lost.

The scripted runner records each model call's window (message count, bytes,
summary) and each compaction in the `InvocationLog`, so the cases assert what
the Worker was actually handed.
"""

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.testing import AgentTestStack
from tests.integration.agent.scripted_agent import (
    COMPACT_GATE_ENV,
    CONTEXT_BUDGET_ENV,
    KEEP_RECENT_ENV,
    gate,
    invocations,
)
from tests.integration.agent.test_sessions import fake_stack_with, idle, tool, turn
from tests.integration.runner_conformance import executed

pytestmark = pytest.mark.integration


def windows() -> list[dict[str, object]]:
    return [entry for entry in invocations().entries() if entry["kind"] == "window"]


@contextlib.asynccontextmanager
async def compacting_session(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[AgentTestStack, AgentSessionFlow, AgentSessionClient]]:
    """Session ``s`` on a dev-server stack keeping 2 turns in full, its first turn (30 messages) ended."""
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, {KEEP_RECENT_ENV: "2"}) as (stack, flow):
        await stack.start_worker()
        sessions = stack.sessions(flow)
        await sessions.start_session("s", turn(emit=30))
        await idle(stack, flow, "s")
        yield stack, flow, sessions


async def send_and_wait(stack: AgentTestStack, flow: AgentSessionFlow, session_id: str, text: str) -> None:
    sessions = stack.sessions(flow)
    before = (await sessions.get_agent_snapshot(session_id)).state
    assert before is not None
    assert await sessions.send_user_message(session_id, text) is True
    snapshot = await idle(stack, flow, session_id)
    while snapshot.state is None or snapshot.state.turn_count <= before.turn_count:
        snapshot = await idle(stack, flow, session_id)


async def test_a_session_of_20000_stored_messages_keeps_answering_with_bounded_loads_and_every_message_readable(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {CONTEXT_BUDGET_ENV: str(64 * 1024), KEEP_RECENT_ENV: "20"}
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, env) as (stack, flow):
        await stack.start_worker()
        sessions = stack.sessions(flow)
        await sessions.start_session("s", turn(emit=2000))
        await idle(stack, flow, "s")
        for _ in range(9):
            await send_and_wait(stack, flow, "s", turn(emit=2000))
        await send_and_wait(stack, flow, "s", turn())
        snapshot = await idle(stack, flow, "s")
        state = snapshot.state
        assert state is not None
        assert state.message_count >= 20_000
        assert state.last_turn_error is None
        assert state.summary_count >= 9
        first_page = await sessions.list_agent_messages("s", after_sequence=0, limit=200)
        assert [m.sequence for m in first_page.messages] == list(range(1, 201))  # compacted, still readable
        assert snapshot.messages[-1].sequence == state.message_count

    seen = windows()
    assert len(seen) == 11
    later = seen[2:]
    assert all(w["summary"] is not None for w in later)
    assert max(int(w["messages"]) for w in later) <= 200  # type: ignore[call-overload]
    assert max(int(w["bytes"]) for w in later) <= 64 * 1024  # type: ignore[call-overload]
    assert invocations().count("compact") == state.summary_count  # each compaction ran once and stored one summary


async def test_a_session_with_80_tool_results_of_100_kib_completes(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Default options: only the hard limit on the model's context applies.
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, {}) as (stack, flow):
        await stack.start_worker()

        def four(round_: int) -> str:
            calls = [tool(f"c{round_}-{n}", "read_tool", big_output=100 * 1024) for n in range(4)]
            return turn(*calls, tool_results="each")

        await stack.sessions(flow).start_session("s", four(0))
        await idle(stack, flow, "s")
        for round_ in range(1, 20):
            await send_and_wait(stack, flow, "s", four(round_))
        snapshot = await idle(stack, flow, "s")
    state = snapshot.state
    assert state is not None
    assert state.turn_count == 20
    assert state.last_turn_error is None
    assert invocations().count("tool", "read_tool") == 80
    assert state.summary_count >= 1
    assert max(int(w["bytes"]) for w in windows()) <= 2 * 1024 * 1024  # type: ignore[call-overload]
    answer = json.loads(snapshot.messages[-1].text or "{}")
    assert sorted(answer) == [f"c19-{n}" for n in range(4)]


async def test_a_worker_killed_during_compact_history_repeats_only_the_compaction_and_stores_one_summary(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {CONTEXT_BUDGET_ENV: str(16 * 1024), KEEP_RECENT_ENV: "4", COMPACT_GATE_ENV: "compact"}
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, env) as (stack, flow):
        first = await stack.start_worker()
        sessions = stack.sessions(flow)
        await sessions.start_session("s", turn(emit=100))
        await idle(stack, flow, "s")
        assert await sessions.send_user_message("s", turn()) is True
        await gate("compact").wait_until_reached()
        first.kill()
        await stack.start_worker()
        gate("compact").release()
        snapshot = await idle(stack, flow, "s")
        while snapshot.state is None or snapshot.state.turn_count < 2:
            snapshot = await idle(stack, flow, "s")
        steps = await executed(stack, "s")
    state = snapshot.state
    assert state.last_turn_error is None
    assert invocations().count("compact") == 2  # the killed attempt and its repeat
    assert steps.count("CompactHistory") == 1
    assert state.summary_count == 1
    model_calls = [entry for entry in invocations().entries() if entry["kind"] == "model"]
    assert [entry["name"] for entry in model_calls] == ["turn-1", "turn-2"]  # no model call repeated
    assert windows()[-1]["summary"] == 1


async def test_a_provider_context_overflow_compacts_the_history_and_the_retried_model_call_succeeds(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with compacting_session(tmp_path, state_dir, monkeypatch) as (stack, flow, sessions):
        await send_and_wait(stack, flow, "s", turn(overflow=True))
        snapshot = await idle(stack, flow, "s")
        steps = await executed(stack, "s")
        page = await sessions.list_agent_messages("s", after_sequence=0, limit=500)
    state = snapshot.state
    assert state is not None
    assert state.last_turn_error is None
    assert state.summary_count == 1
    assert not state.retry_after_overflow
    assert steps.count("CompactHistory") == 1
    overflowed = [w for w in windows() if w["name"] == "turn-2"]
    assert [w["summary"] for w in overflowed] == [None, 1]
    assert [m.sequence for m in page.messages] == list(range(1, state.message_count + 1))
