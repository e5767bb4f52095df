"""Steering and cancel in a session whose history is compacted, end to end on the dev server.

The scripted runner's ``overflow`` makes a model call raise `ContextOverflowError`
while its window has no summary, so ``CompactHistory`` runs at a known point
of the turn; the `InvocationLog` says what each model call got (``model``:
steered texts; ``window``: the summary) and each compaction (``compact``).
"""

from pathlib import Path

import pytest

from dex_agents import MessageRole, ToolCallStatus
from dex_agents.domain.messages import MessageDelivery
from dex_agents.domain.snapshot import TurnStatus
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER
from tests.integration.agent.scripted_agent import gate, invocations
from tests.integration.agent.test_long_sessions import compacting_session
from tests.integration.agent.test_sessions import idle, tool, turn
from tests.integration.runner_conformance import executed

pytestmark = pytest.mark.integration

STEER = MessageDelivery.STEER


def lines(kind: str) -> list[dict[str, object]]:
    return [entry for entry in invocations().entries() if entry["kind"] == kind]


async def test_a_message_steered_into_a_turn_whose_model_call_overflows_reaches_the_retry_after_the_compaction(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with compacting_session(tmp_path, state_dir, monkeypatch) as (stack, flow, sessions):
        script = turn(tool("c1", "read_tool", gate="g"), tool_results="each", overflow="resuming")
        receipt = await sessions.submit_user_message("s", script)
        await gate("g").wait_until_reached()
        assert await sessions.send_user_message("s", "also check the date", delivery=STEER)
        gate("g").release()
        result = await sessions.wait_for_turn("s", receipt, timeout=60)
        snapshot = await idle(stack, flow, "s")
        steps = await executed(stack, "s")

    assert result.status is TurnStatus.COMPLETED
    second_turn = [line for line in lines("model") if line["name"] == "turn-2"]
    assert [line["steered"] for line in second_turn] == [[], ["also check the date"], ["also check the date"]]
    assert [line["summary"] for line in lines("window")][-3:] == [None, None, 1], "the retry read the summary"
    assert steps.count("CompactHistory") == 1
    assert invocations().count("compact") == 1
    state = snapshot.state
    assert state is not None
    assert (state.summary_count, state.last_turn_error) == (1, None)
    turn_two = [m for m in snapshot.messages if m.turn_id == "turn-2"]
    assert [(m.role, m.tool_call_id) for m in turn_two[:3]] == [
        (MessageRole.USER, None),
        (MessageRole.TOOL, "c1"),
        (MessageRole.USER, None),
    ], "the steered message follows the call's result"
    assert turn_two[2].text == "also check the date"
    assert [m.sequence for m in snapshot.messages] == list(range(1, state.message_count + 1)), "nothing lost"


async def test_a_cancel_during_a_model_call_that_overflows_ends_the_turn_in_compact_history_without_compacting(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with compacting_session(tmp_path, state_dir, monkeypatch) as (stack, flow, sessions):
        script = turn(tool("c1", "read_tool"), tool_results="each", overflow="resuming", overflow_gate="o")
        receipt = await sessions.submit_user_message("s", script)
        await gate("o").wait_until_reached()
        assert await sessions.cancel_turn("s", "stop") is True
        gate("o").release()
        result = await sessions.wait_for_turn("s", receipt, timeout=60)
        snapshot = await idle(stack, flow, "s")
        steps = await executed(stack, "s")

    assert result.status is TurnStatus.CANCELLED
    assert steps.count("CompactHistory") == 1, "the overflow went to CompactHistory, which ended the turn"
    assert invocations().count("compact") == 0, "a cancelled turn runs no summarising model call"
    assert [line["name"] for line in lines("model")] == ["turn-1", "turn-2", "turn-2"]
    assert invocations().count("tool", "read_tool") == 1
    state = snapshot.state
    assert state is not None
    assert (state.summary_count, state.last_turn_cancelled) == (0, True)
    note = snapshot.messages[-1]
    assert note.role is MessageRole.USER
    assert note.text is not None
    assert note.text.startswith(TURN_CANCELLED_NOTE_HEADER)
    assert [(o.tool_call_id, o.status) for o in note.tool_outcomes] == [("c1", ToolCallStatus.SUCCEEDED)], (
        "CompactHistory read the turn's records (it loads them) and the finished read's result is kept"
    )
    assert snapshot.tool_calls == (), "the turn's records are cleared"
