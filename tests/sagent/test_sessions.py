"""A real sagent agent as a durable session on the dev server, with the Worker in a child process.

Mirrors the Pydantic AI adapter's suite: each test states its invariant
through the `InvocationLog` (real model and tool calls across every Worker
process) and the Step shape from the Flow's history.
"""

import json
from pathlib import Path

import pytest
from sagent.types.runtime import ToolResult

from dex_agents import OUTCOME_UNKNOWN_TOOL_RESULT, AgentSessionFlow, AgentSnapshot, MessageRole, ToolCallStatus
from dex_agents.adapters.sagent import _codec
from dex_agents.domain.events import ReasoningDeltaPayload, TextDeltaPayload
from dex_agents.domain.snapshot import TurnStatus
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER, cancel_rejection_message
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    session_is_idle,
    wait_for_agent_snapshot,
)
from tests.sagent.order_agent import build_flows, gate, invocations
from tests.sagent.scripted_model import call, script

pytestmark = pytest.mark.integration


async def idle(stack: AgentTestStack, flow: AgentSessionFlow, session_id: str, turns: int = 1) -> AgentSnapshot:
    def done(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        state = snapshot.state
        return snapshot if state and state.turn_count == turns and state.active_turn_id is None else None

    return await wait_for_agent_snapshot(stack.sessions(flow), session_id, done, description=f"turn {turns} to end")


async def executed(stack: AgentTestStack, session_id: str) -> list[str]:
    history = await stack.read_step_history(session_id)
    return [entry.step_type for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]


async def approve_until_idle(stack: AgentTestStack, flow: AgentSessionFlow, session_id: str) -> AgentSnapshot:
    sessions = stack.sessions(flow)

    def next_step(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        return snapshot if snapshot.pending_interrupts or session_is_idle(snapshot) else None

    while True:
        snapshot = await wait_for_agent_snapshot(sessions, session_id, next_step, description="an approval or idle")
        if session_is_idle(snapshot) is not None:
            return snapshot
        for interrupt in snapshot.pending_interrupts:
            await sessions.resolve_interrupt(session_id, interrupt.interrupt_id, approved=True)


def answer(snapshot: AgentSnapshot) -> str:
    text = snapshot.messages[-1].text
    assert text is not None
    return text


def results(snapshot: AgentSnapshot) -> dict[str, tuple[bool, str]]:
    """Return what the model was given for each call of the turn: ``{call ID: (is_error, content)}``."""
    found: dict[str, tuple[bool, str]] = {}
    for message in snapshot.messages:
        if message.role is MessageRole.TOOL:
            entry = _codec.decode_entry(message.framework_item)
            assert isinstance(entry, ToolResult)
            found[entry.call_id] = (entry.is_error, entry.content)
    return found


async def test_a_multi_turn_order_session_finds_refunds_after_approval_and_emails(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await stack.start_worker()
    sessions = stack.sessions(flow)
    await sessions.start_session(
        "s",
        script(
            [call("f1", "find_order", order_id="7")],
            [call("r1", "refund_order", order_id="7")],
            [call("e1", "email_customer", order_id="7", text="Your refund is on its way.")],
            "Order 7 is refunded and the customer knows.",
            name="order",
        ),
    )
    snapshot = await approve_until_idle(stack, flow, "s")
    assert answer(snapshot) == "Order 7 is refunded and the customer knows."
    assert await executed(stack, "s") == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "ResumeTurn",
        "RunModel",
        "AwaitToolApproval",
        "CallTool",
        "ResumeTurn",
        "RunModel",
        "AwaitToolApproval",
        "CallSingleAttemptTool",
        "ResumeTurn",
        "RunModel",
    ]
    assert [invocations().count("model", "order", step=n) for n in range(4)] == [1, 1, 1, 1]
    tools = [(e["name"], e["key"]) for e in invocations().entries() if e["kind"] == "tool"]
    assert tools == [("find_order", "s/turn-1/f1"), ("refund_order", "s/turn-1/r1"), ("email_customer", "s/turn-1/e1")]
    assert results(snapshot)["r1"] == (False, "refund of 7 with key s/turn-1/r1")
    assert snapshot.tool_calls == ()
    await sessions.send_user_message("s", script([call("f1", "find_order", order_id="8")], name="second"))
    second = await idle(stack, flow, "s", turns=2)
    assert answer(second) == "find_order[ok]=order 8 delivered"
    assert [e["key"] for e in invocations().entries() if e["name"] == "find_order"] == ["s/turn-1/f1", "s/turn-2/f1"]
    assert second.usage.model_calls == 6
    assert second.usage.input_tokens == 6 * 130
    assert second.usage.cost_usd == pytest.approx(6 * 0.003)


async def test_parallel_calls_run_in_parallel_steps_and_the_model_sees_every_result(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await stack.start_worker()
    await stack.sessions(flow).start_session(
        "s",
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


async def test_worker_killed_during_a_model_step_repeats_only_that_model_call(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    worker = await stack.start_worker()
    await stack.sessions(flow).start_session(
        "s", script([call("c1", "read_tool")], {"gate": "m1", "text": "@summary"}, name="kill")
    )
    await gate("m1").wait_until_reached()
    worker.kill()
    await stack.start_worker()
    gate("m1").release()
    snapshot = await idle(stack, flow, "s")
    assert answer(snapshot) == "read_tool[ok]=read done"
    assert invocations().count("model", "kill", step=0) == 1
    assert invocations().count("model", "kill", step=1) == 2
    assert invocations().count("tool", "read_tool") == 1
    history = await stack.read_step_history("s")
    run_model = [e for e in history if e.step_type == "RunModel" and e.event_type == EXECUTE_COMPLETED_EVENT]
    assert [e.step_execution_id for e in run_model] == ["RunModel-1", "RunModel-2"]


async def test_worker_killed_during_each_tool_effect_repeats_only_the_calls_whose_effect_allows_it(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    worker = await stack.start_worker()
    sessions = stack.sessions(flow)
    effects = ["read_tool", "idempotent_write", "write", "unclassified_write"]
    await sessions.start_session("s", script([call(f"c{i}", name, gate=name) for i, name in enumerate(effects)]))
    interrupt = await wait_for_agent_snapshot(
        sessions, "s", lambda s: next(iter(s.pending_interrupts), None), description="the unclassified approval"
    )
    assert interrupt.tool_name == "unclassified_write"
    await sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=True)
    for name in effects:
        await gate(name).wait_until_reached()
    worker.kill()
    await stack.start_worker()
    for name in effects:
        gate(name).release()
    snapshot = await idle(stack, flow, "s")
    assert results(snapshot) == {
        "c0": (False, "read done"),
        "c1": (False, "written with key s/turn-1/c1"),
        "c2": (True, OUTCOME_UNKNOWN_TOOL_RESULT),
        "c3": (True, OUTCOME_UNKNOWN_TOOL_RESULT),
    }
    keys = {name: [e["key"] for e in invocations().entries() if e["name"] == name] for name in effects}
    assert keys == {
        "read_tool": ["s/turn-1/c0", "s/turn-1/c0"],
        "idempotent_write": ["s/turn-1/c1", "s/turn-1/c1"],
        "write": ["s/turn-1/c2"],
        "unclassified_write": ["s/turn-1/c3"],
    }
    assert (await executed(stack, "s")).count("RecordToolOutcomeUnknown") == 2
    assert invocations().count("model") == 2


async def test_same_file_calls_run_one_after_another_and_the_tool_state_survives_a_worker_kill(
    stack: AgentTestStack, flow: AgentSessionFlow, state_dir: Path
) -> None:
    target = state_dir / "notes.txt"
    target.write_text("hello world\n")
    worker = await stack.start_worker()
    sessions = stack.sessions(flow)
    await sessions.start_session(
        "s",
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
    assert results(snapshot)["w1"][0] is False, results(snapshot)["w1"]
    assert target.read_text() == "bye world\n"
    assert invocations().count("model", "files") == 2  # the Write's wave came without a model call
    await sessions.send_user_message(
        "s", script([call("w2", "Write", file_path=str(target), content="again\n")], name="next")
    )
    second = await idle(stack, flow, "s", turns=2)
    assert answer(second).startswith("Write[ok]="), answer(second)  # the read cache came from the stored turn
    assert target.read_text() == "again\n"


async def test_text_and_reasoning_stream_live_from_model_steps(stack: AgentTestStack, flow: AgentSessionFlow) -> None:
    await stack.start_worker()
    sessions = stack.sessions(flow)
    await sessions.start_session(
        "s",
        script(
            {
                "think": "Let me check.",
                "text": "Checking the order.",
                "calls": [call("f1", "find_order", order_id="7")],
            },
            "All good.",
        ),
    )
    await idle(stack, flow, "s")
    pieces: list[tuple[str, str, str]] = []
    token = ""
    while True:
        message = await sessions.read_agent_event("s", token)
        token = message.resume_token
        event = message.event
        if isinstance(event.payload, TextDeltaPayload | ReasoningDeltaPayload):
            pieces.append((event.type.value, event.payload.text, event.step_execution_id))
        if event.type == "turn_completed":
            break
    first, second = sorted({execution for _, _, execution in pieces})

    def joined(execution: str) -> list[tuple[str, str]]:
        # Deltas of one kind may arrive coalesced or not (AgentSessionOptions.delta_coalesce_window): join runs.
        runs: list[tuple[str, str]] = []
        for kind, text, of in pieces:
            if of != execution:
                continue
            if runs and runs[-1][0] == kind:
                runs[-1] = (kind, runs[-1][1] + text)
            else:
                runs.append((kind, text))
        return runs

    assert joined(first) == [("reasoning_delta", "Let me check."), ("text_delta", "Checking the order.")]
    assert joined(second) == [("text_delta", "All good.")]


async def test_a_message_steered_during_a_tool_step_reaches_the_next_model_call(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await stack.start_worker()
    sessions = stack.sessions(flow)
    await sessions.start_session("s", script([call("a", "read_tool", gate="g")], "@context", name="steer"))
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
    await stack.start_worker()
    sessions = stack.sessions(flow)
    await sessions.start_session("s", script([call("r1", "refund_order", order_id="7")], name="one"))
    await wait_for_agent_snapshot(sessions, "s", lambda s: s.pending_interrupts or None, description="an approval")

    assert await sessions.cancel_turn("s", "wrong order") is True
    result = await sessions.wait_for_turn("s", "turn-1", timeout=60)

    assert result.status is TurnStatus.CANCELLED
    (outcome,) = result.tool_outcomes
    assert (outcome.status, outcome.rejection_message) == (
        ToolCallStatus.REJECTED,
        cancel_rejection_message("wrong order"),
    )
    note = result.messages[-1]
    assert note.text is not None
    assert note.text.startswith(f"{TURN_CANCELLED_NOTE_HEADER} (reason: wrong order).")
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
    await stack.start_worker()
    sessions = stack.sessions(flow)
    await sessions.start_session(
        "s", script([call("f1", "find_order", order_id="7")], "Order 7 was delivered.", name="one")
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
