"""The README's quick start (and docs/testing.md's example), as written, on the shipped in-memory host."""

from dex_agents import AgentStatus, ToolCallStatus, ToolEffect, ToolPolicy, TurnCompleted
from dex_agents.testing import (
    InMemorySessionHost,
    ManualClock,
    ScriptedRunner,
    assistant_message,
    deferred_tool_call,
    tool_calls_requested,
)


async def test_the_readme_example_runs_a_turn_with_an_approval_without_an_engine() -> None:
    # --- the documented example ---
    runner = ScriptedRunner(
        [
            tool_calls_requested(
                deferred_tool_call(
                    "c1",
                    "refund",
                    '{"order": 7}',
                    policy=ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
                ),
            ),
            TurnCompleted(new_messages=[assistant_message("Refunded order 7.")]),
        ],
        tool_replies={"refund": "refund R-1 issued"},
    )
    host = InMemorySessionHost(runner, clock=ManualClock())
    waiting = await host.drive(await host.start("Refund order 7"))  # runs until the approval
    (interrupt,) = (await host.get_agent_snapshot()).pending_interrupts
    await host.resolve_interrupt(interrupt.interrupt_id, approved=True)
    waiting = await host.drive(*waiting)  # the refund runs, the model answers, the turn ends
    snapshot = await host.get_agent_snapshot()
    # --- end of the example ---

    assert interrupt.tool_name == "refund"
    assert snapshot.state is not None
    assert (snapshot.state.status, snapshot.state.turn_count) == (AgentStatus.WAITING_FOR_USER_MESSAGE, 1)
    assert [m.text for m in snapshot.messages] == ["Refund order 7", "Refunded order 7."]
    assert runner.executed_tool_call_ids == ("c1",)
    assert [r.status for r in runner.model_turns[1].tool_calls.values()] == [ToolCallStatus.SUCCEEDED]
    assert len(waiting) == 1  # the session waits for the next user message
