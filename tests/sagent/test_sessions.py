"""A real sagent agent as a durable session on the dev server, its Worker in a child process.

`TestSagentSessions` runs the scenarios every adapter passes (`tests.integration.runner_conformance`)
on sagent; below are sagent's own: parallel calls, waves over one file, steering, a cancel, compaction.
"""

import json
from pathlib import Path

import pytest
from sagent.types.runtime import ToolResult

from dex_agents import AgentSessionFlow, AgentSnapshot, MessageRole
from dex_agents.adapters.sagent import _codec
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER
from dex_agents.testing import AgentTestStack, wait_for_agent_snapshot
from tests.integration.runner_conformance import (
    RunnerKit,
    SessionConformance,
    answer,
    assert_cancelled_at_its_approval,
    executed,
    idle,
)
from tests.integration.stacks import session_on_a_worker, started_session
from tests.sagent.order_agent import STATE_ENV, build_flows, gate, invocations, notes_file
from tests.sagent.scripted_model import call, script

pytestmark = pytest.mark.integration


def decode_result(framework_item: str) -> list[tuple[str, str, str]]:
    """The one tool result a stored entry holds: ``(call ID, "error" or "ok", content)``."""
    entry = _codec.decode_entry(framework_item)
    assert isinstance(entry, ToolResult)
    return [(entry.call_id, "error" if entry.is_error else "ok", entry.content)]


KIT = RunnerKit(STATE_ENV, ok="ok", failed="error", decode_results=decode_result, deltas_coalesced=False)


class TestSagentSessions(SessionConformance):
    kit = KIT

    def check_order_session(self, first: AgentSnapshot, second: AgentSnapshot) -> None:
        assert second.usage.input_tokens == 6 * 130
        assert second.usage.cost_usd == pytest.approx(6 * 0.003)


async def test_parallel_calls_run_in_parallel_steps_and_the_model_sees_every_result(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await started_session(
        stack,
        flow,
        script([call("a", "read_tool", gate="pa"), call("b", "read_tool", gate="pb"), call("c", "fail_me")]),
    )
    # Both reads park at once: their Steps run side by side.
    await gate("pa").wait_until_reached()
    await gate("pb").wait_until_reached()
    gate("pa").release()
    gate("pb").release()
    snapshot = await idle(stack, flow, "s")
    assert answer(snapshot) == "read_tool[ok]=read done; read_tool[ok]=read done; fail_me[error]=the order is locked"
    assert (await executed(stack, "s")).count("CallTool") == 3
    assert [m.tool_call_id for m in snapshot.messages if m.role is MessageRole.TOOL] == ["a", "b", "c"]


async def test_same_file_calls_run_one_after_another_and_the_tool_state_survives_a_worker_kill(
    stack: AgentTestStack, flow: AgentSessionFlow, state_dir: Path
) -> None:
    target = notes_file(state_dir)
    worker, sessions = await session_on_a_worker(
        stack,
        flow,
        script(
            [
                call("r1", "Read", file_path=str(target)),
                call("g1", "read_tool", gate="between"),
                call("w1", "Write", file_path=str(target), content="bye world\n"),
            ],
            name="files",
        ),
    )
    # The Read's wave (with the parked read_tool) is running; the Write waits for it.
    await gate("between").wait_until_reached()
    assert target.read_text() == "hello world\n"
    worker.kill()
    await stack.start_worker()
    gate("between").release()
    snapshot = await idle(stack, flow, "s")
    assert KIT.results(snapshot)["w1"][0] == "ok", KIT.results(snapshot)["w1"]
    assert target.read_text() == "bye world\n"
    assert invocations().count("model", "files") == 2  # the Write's wave came without a model call
    await sessions.send_user_message(
        "s", script([call("w2", "Write", file_path=str(target), content="again\n")], name="next")
    )
    second = await idle(stack, flow, "s", turns=2)
    assert answer(second).startswith("Write[ok]="), answer(second)  # the read cache came from the stored turn
    assert target.read_text() == "again\n"


async def test_a_message_steered_during_a_tool_step_reaches_the_next_model_call(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, script([call("a", "read_tool", gate="g")], "@context", name="steer"))
    await gate("g").wait_until_reached()

    assert await sessions.send_user_message("s", "Also: when was it delivered?", delivery="steer") is True
    await wait_for_agent_snapshot(
        sessions, "s", lambda s: s.queued_messages or None, description="the steered message to wait its turn"
    )
    gate("g").release()
    snapshot = await idle(stack, flow, "s")

    seen = json.loads(answer(snapshot))
    assert seen["users"][-1] == "Also: when was it delivered?", "after the tool result, in the same model call"
    assert [(m.role, m.text) for m in snapshot.messages[2:4]] == [
        (MessageRole.TOOL, None),
        (MessageRole.USER, "Also: when was it delivered?"),
    ]
    assert [invocations().count("model", "steer", step=n) for n in range(3)] == [1, 1, 0]
    assert snapshot.state is not None
    assert snapshot.state.turn_count == 1, "the steered message joined the running turn"


async def test_a_cancel_at_an_approval_ends_the_turn_and_the_next_turn_works(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, script([call("r1", "refund_order", order_id="7")], name="one"))
    await wait_for_agent_snapshot(sessions, "s", lambda s: s.pending_interrupts or None, description="an approval")

    assert await sessions.cancel_turn("s", "wrong order") is True
    result = await sessions.wait_for_turn("s", "turn-1", timeout=60)

    assert_cancelled_at_its_approval(result, "wrong order")
    assert invocations().count("model", "one") == 1, "no model call after the cancel"

    await sessions.send_user_message("s", script([call("f1", "find_order", order_id="7")], "@context", name="two"))
    second = await idle(stack, flow, "s", turns=2)

    (merged,) = json.loads(answer(second))["users"][:1]
    assert TURN_CANCELLED_NOTE_HEADER in merged, "the next turn's model reads the note"
    assert [(e["name"], e["key"]) for e in invocations().entries() if e["kind"] == "tool"] == [
        ("find_order", "s/turn-2/f1")
    ], "the cancelled refund never ran"
    assert invocations().count("model", "one") == 1


@pytest.mark.parametrize("flow", [build_flows()[1]], ids=["compacting"])
async def test_a_long_session_compacts_through_sagents_compactor_and_keeps_every_message(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(
        stack, flow, script([call("f1", "find_order", order_id="7")], "Order 7 was delivered.", name="one")
    )
    await idle(stack, flow, "s")
    for n in range(2, 6):
        await sessions.send_user_message("s", script(f"answer {n} " + "x" * 400, name=f"turn{n}"))
        await idle(stack, flow, "s", turns=n)
    await sessions.send_user_message("s", script("@context", name="last"))
    snapshot = await idle(stack, flow, "s", turns=6)

    state = snapshot.state
    assert state is not None
    assert state.summary_count >= 1
    assert (await executed(stack, "s")).count("CompactHistory") == state.summary_count
    assert invocations().count("model", "@compact") == state.summary_count, "one sagent compaction per summary"
    seen = json.loads(answer(snapshot))
    assert seen["users"][0].startswith("Another language model was working on this task")
    assert "script one" in seen["users"][0], "the compacted first turn lives on in the summary"
    page = await sessions.list_agent_messages("s", after_sequence=0, limit=500)
    assert [m.sequence for m in page.messages] == list(range(1, state.message_count + 1))
    kept = _codec.decode_entry(page.messages[2].framework_item)
    assert isinstance(kept, ToolResult)
    assert (kept.call_id, kept.content) == ("f1", "order 7 delivered"), "compacted messages stay readable"
