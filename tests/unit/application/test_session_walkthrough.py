"""Whole turns on fakes, Step after Step, as the spec's Flow shape runs them."""

from dex_agents.application.next import GoTo, StepName
from dex_agents.application.runner import AgentTurnContext
from dex_agents.domain import events as ev
from dex_agents.domain.events import AgentEventType, ToolCallFinishedPayload
from dex_agents.domain.failure_note import describe_tool_call_outcome
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.session import AgentStatus
from dex_agents.domain.tools import ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.domain.turns import AgentTurnOutcome, TurnCompleted
from dex_agents.domain.usage import AgentUsage
from dex_agents.testing import (
    ScriptedRunner,
    assistant_message,
    deferred_tool_call,
    framework_message,
    tool_calls_requested,
)
from dex_agents.testing.memory import InMemorySessionHost

E = AgentEventType


def final_answer(turn: AgentTurnContext) -> AgentTurnOutcome:
    """Answer with every tool result the turn recorded, the way a real runner replays them."""
    results = [
        framework_message(MessageRole.TOOL, describe_tool_call_outcome(turn.recorded_tool_call(call_id)))
        for call_id in sorted(turn.tool_calls, key=lambda call_id: turn.tool_calls[call_id].deferral_order)
    ]
    return TurnCompleted(
        new_messages=[assistant_message("Let me check."), *results, assistant_message("Refunded order 7.")],
        usage=AgentUsage(model_calls=1, output_tokens=5),
    )


async def test_a_turn_with_a_read_and_an_approved_write_runs_end_to_end() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(
                deferred_tool_call("c1", "find_order", '{"order": 7}', policy=ToolPolicy(ToolEffect.READ)),
                deferred_tool_call("c2", "refund", '{"order": 7}', policy=ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)),
                run_state="after-tools",
            ),
            final_answer,
        ],
        tool_replies={"find_order": "order 7: 20 EUR", "refund": "refund R-1 issued"},
    )
    session = InMemorySessionHost(runner)

    waiting = await session.drive(await session.start("Refund order 7"))

    assert waiting == (GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input="c2"), GoTo(step=StepName.RESUME_TURN, input=2))
    snapshot = await session.get_agent_snapshot()
    assert snapshot.state is not None
    assert snapshot.state.status is AgentStatus.RUNNING_TOOLS
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == ["turn-1.c2"]
    assert [(r.tool_call_id, r.status) for r in snapshot.tool_calls] == [
        ("c1", ToolCallStatus.SUCCEEDED),
        ("c2", ToolCallStatus.AWAITING_APPROVAL),
    ]
    assert list(runner.executed_tool_call_ids) == ["c1"], "the write waits for its approval"

    assert await session.resolve_interrupt("turn-1.c2", approved=True)
    waiting = await session.drive(*waiting)

    assert waiting == (GoTo(step=StepName.AWAIT_USER_MESSAGE),)
    assert runner.executed_tool_call_ids == ("c1", "c2")
    resumed = runner.model_turns[1]
    assert (resumed.is_resuming, resumed.framework_run_state) == (True, "after-tools")
    assert all(record.is_final for record in resumed.tool_calls.values())
    assert session.messages.texts == (
        "Refund order 7",
        "Let me check.",
        "order 7: 20 EUR",
        "refund R-1 issued",
        "Refunded order 7.",
    )
    snapshot = await session.get_agent_snapshot()
    assert snapshot.state is not None
    assert (snapshot.state.status, snapshot.state.active_turn_id) == (AgentStatus.WAITING_FOR_USER_MESSAGE, None)
    assert (snapshot.tool_calls, snapshot.pending_interrupts) == ((), ())
    assert snapshot.usage == AgentUsage(model_calls=2, output_tokens=5)
    assert session.sink.types == (
        E.TURN_STARTED,
        E.USAGE_RECORDED,
        E.TOOL_CALL_DEFERRED,
        E.TOOL_CALL_DEFERRED,
        E.INTERRUPT_RAISED,
        E.TOOL_CALL_STARTED,
        E.TOOL_CALL_FINISHED,
        E.INTERRUPT_RESOLVED,
        E.TOOL_CALL_STARTED,
        E.TOOL_CALL_FINISHED,
        E.USAGE_RECORDED,
        E.TURN_COMPLETED,
    )
    assert {event.turn_id for event in session.sink.events} == {"turn-1"}
    assert session.sink.of_type(E.TURN_COMPLETED)[0].payload == ev.turn_completed(4)


async def test_tool_call_ids_may_repeat_in_a_later_turn_with_a_new_idempotency_key() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "tag", policy=ToolPolicy(ToolEffect.IDEMPOTENT_WRITE))),
            TurnCompleted(new_messages=[assistant_message("tagged")]),
            tool_calls_requested(deferred_tool_call("c1", "tag", policy=ToolPolicy(ToolEffect.IDEMPOTENT_WRITE))),
            TurnCompleted(new_messages=[assistant_message("tagged again")]),
        ],
        tool_replies={"tag": "ok"},
    )
    session = InMemorySessionHost(runner)
    waiting = await session.drive(await session.start("tag it"))
    await session.send_user_message("tag it again")

    await session.drive(*waiting)

    assert [e.idempotency_key for e in runner.tool_executions] == ["session-1/turn-1/c1", "session-1/turn-2/c1"]
    assert session.state.current.turn_count == 2
    assert session.messages.texts == ("tag it", "tagged", "tag it again", "tagged again")


async def test_retried_attempts_of_one_step_share_its_step_execution_id() -> None:
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "search")), TurnCompleted(new_messages=[])],
        tool_replies={"search": [ConnectionError("a"), ConnectionError("b"), "rows"]},
    )
    session = InMemorySessionHost(runner)

    await session.drive(await session.start("go"))

    started = session.sink.of_type(E.TOOL_CALL_STARTED)
    assert [event.attempt for event in started] == [1, 2, 3]
    assert len({event.step_execution_id for event in started}) == 1
    finished = session.sink.of_type(E.TOOL_CALL_FINISHED)
    assert [event.attempt for event in finished] == [3]
    assert [p.status for p in session.sink.payloads(ToolCallFinishedPayload)] == [ToolCallStatus.SUCCEEDED]


async def test_queued_user_messages_wait_until_the_running_turn_ends() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "refund", policy=ToolPolicy(ToolEffect.UNCLASSIFIED))),
            TurnCompleted(new_messages=[assistant_message("first done")]),
            TurnCompleted(new_messages=[assistant_message("second done")]),
        ],
        tool_replies={"refund": "ok"},
    )
    session = InMemorySessionHost(runner)
    waiting = await session.drive(await session.start("first"))
    assert await session.send_user_message("second")
    waiting = await session.drive(*waiting)
    assert session.queue.size() == 1, "a running turn is not steered"

    assert await session.resolve_interrupt("turn-1.c1", approved=False, rejection_message="not now")
    waiting = await session.drive(*waiting)

    assert waiting == (GoTo(step=StepName.AWAIT_USER_MESSAGE),)
    assert session.queue.size() == 0
    assert session.messages.texts == ("first", "first done", "second", "second done")
    assert runner.model_turns[1].recorded_tool_call("c1").rejection_message == "not now"
