"""``RunModel``: one model call, and what it stores for each outcome."""

from datetime import timedelta

import pytest

from dex_agents.application.next import GoTo, GoToMany, StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.runner import AgentTurnContext
from dex_agents.domain import events as ev
from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.events import AgentEventType, ToolCallDeferredPayload, UsageRecordedPayload
from dex_agents.domain.messages import AgentUserMessage, MessageRole
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
from tests.unit.application.policies import IDEMPOTENT, NON_IDEMPOTENT, READ, UNCLASSIFIED


async def in_first_turn(runner: ScriptedRunner, *, options: AgentSessionOptions | None = None) -> InMemorySessionHost:
    session = InMemorySessionHost(runner, options=options)
    await session.start("Find my tickets")
    session.sink.clear()
    return session


async def test_a_completed_turn_appends_its_messages_in_one_go_after_the_user_message() -> None:
    completed = TurnCompleted(
        new_messages=[
            framework_message(MessageRole.ASSISTANT, "Looking."),
            framework_message(MessageRole.TOOL, "3 tickets"),
            assistant_message("You have 3 tickets."),
        ],
        usage=AgentUsage(model_calls=1),
    )
    session = await in_first_turn(ScriptedRunner([completed]))

    decision = await session.run_model()

    assert decision == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    stored = session.messages.all
    assert [(m.sequence, m.role, m.text, m.turn_id) for m in stored] == [
        (1, MessageRole.USER, "Find my tickets", "turn-1"),
        (2, MessageRole.ASSISTANT, "Looking.", "turn-1"),
        (3, MessageRole.TOOL, "3 tickets", "turn-1"),
        (4, MessageRole.ASSISTANT, "You have 3 tickets.", "turn-1"),
    ]
    assert stored[3].framework_item == completed.new_messages[2].framework_item
    state = session.state.current
    assert (state.status, state.active_turn_id, state.message_count) == (AgentStatus.WAITING_FOR_USER_MESSAGE, None, 4)
    assert session.sink.of_type(AgentEventType.TURN_COMPLETED)[0].payload == ev.turn_completed(3)


async def test_a_completed_turn_takes_its_sequences_from_the_state() -> None:
    session = await in_first_turn(ScriptedRunner([TurnCompleted(new_messages=[assistant_message("a")])] * 2))
    await session.run_model()
    await session.await_user_message([AgentUserMessage(text="again")])

    await session.run_model()

    assert [(m.sequence, m.turn_id) for m in session.messages.all] == [
        (1, "turn-1"),
        (2, "turn-1"),
        (3, "turn-2"),
        (4, "turn-2"),
    ]


async def test_the_runner_gets_the_committed_turn() -> None:
    runner = ScriptedRunner([TurnCompleted(new_messages=[])])
    session = await in_first_turn(runner, options=AgentSessionOptions(tool_policies={"search": READ}))

    await session.run_model(attempt=2, step_execution_id="RunModel-7")

    (turn,) = runner.model_turns
    assert (turn.flow_id, turn.turn_id, turn.attempt, turn.step_execution_id) == (
        "session-1",
        "turn-1",
        2,
        "RunModel-7",
    )
    assert [m.text for m in turn.messages] == ["Find my tickets"]
    assert turn.framework_run_state is None
    assert not turn.is_resuming
    assert dict(turn.tool_calls) == {}
    assert turn.heartbeat is session.heartbeat


async def test_the_runner_resolves_policies_explicit_then_framework_effect_then_default() -> None:
    seen: list[ToolPolicy] = []

    def model(turn: AgentTurnContext) -> AgentTurnOutcome:
        seen.append(turn.resolve_tool_policy("search", ToolEffect.IDEMPOTENT_WRITE))
        seen.append(turn.resolve_tool_policy("lookup", ToolEffect.READ))
        seen.append(turn.resolve_tool_policy("lookup"))
        return TurnCompleted(new_messages=[])

    options = AgentSessionOptions(tool_policies={"search": READ}, default_tool_effect=ToolEffect.IDEMPOTENT_WRITE)
    session = await in_first_turn(ScriptedRunner([model]), options=options)
    await session.run_model()
    assert seen == [READ, READ, IDEMPOTENT]


async def test_runner_events_carry_the_turn_step_execution_and_attempt() -> None:
    def model(turn: AgentTurnContext) -> AgentTurnOutcome:
        turn.events.write_text_delta("Hel")
        return TurnCompleted(new_messages=[])

    session = await in_first_turn(ScriptedRunner([model]))
    await session.run_model(attempt=3, step_execution_id="RunModel-1")

    delta = session.sink.of_type(AgentEventType.TEXT_DELTA)[0]
    assert (delta.turn_id, delta.step_execution_id, delta.attempt) == ("turn-1", "RunModel-1", 3)
    assert {(e.turn_id, e.step_execution_id, e.attempt) for e in session.sink.events} == {("turn-1", "RunModel-1", 3)}


async def test_tool_calls_requested_store_run_state_records_and_interrupts_and_go_to_one_step_per_call() -> None:
    requested = tool_calls_requested(
        deferred_tool_call("c1", "search", '{"q": "open"}', policy=READ),
        deferred_tool_call("c2", "tag", policy=IDEMPOTENT),
        deferred_tool_call("c3", "refund", '{"order": 7}', policy=NON_IDEMPOTENT),
        deferred_tool_call("c4", "mystery", policy=UNCLASSIFIED),
        deferred_tool_call("c5", "audit", policy=ToolPolicy(ToolEffect.UNCLASSIFIED, requires_approval=False)),
        deferred_tool_call("c6", "export", policy=ToolPolicy(ToolEffect.READ, requires_approval=True)),
        run_state="after-tools",
    )
    options = AgentSessionOptions(interrupt_deadline=timedelta(minutes=5))
    session = await in_first_turn(ScriptedRunner([requested]), options=options)

    decision = await session.run_model()

    assert decision == GoToMany(
        movements=[
            GoTo(step=StepName.CALL_TOOL, input="c1"),
            GoTo(step=StepName.CALL_TOOL, input="c2"),
            GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input="c3"),
            GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input="c4"),
            GoTo(step=StepName.CALL_SINGLE_ATTEMPT_TOOL, input="c5"),
            GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input="c6"),
            GoTo(step=StepName.RESUME_TURN, input=6),
        ]
    )
    assert session.run_state.value == "after-tools"
    assert session.state.current.status is AgentStatus.RUNNING_TOOLS
    records = session.tool_calls.all()
    assert [(r.tool_call_id, r.deferral_order, r.status, r.interrupt_id) for r in records] == [
        ("c1", 0, ToolCallStatus.PENDING, None),
        ("c2", 1, ToolCallStatus.PENDING, None),
        ("c3", 2, ToolCallStatus.AWAITING_APPROVAL, "turn-1.c3"),
        ("c4", 3, ToolCallStatus.AWAITING_APPROVAL, "turn-1.c4"),
        ("c5", 4, ToolCallStatus.PENDING, None),
        ("c6", 5, ToolCallStatus.AWAITING_APPROVAL, "turn-1.c6"),
    ]
    assert records[2].arguments == '{"order": 7}'
    assert records[2].policy == NON_IDEMPOTENT
    assert {r.turn_id for r in records} == {"turn-1"}
    now = session.clock.now()
    assert [
        (i.interrupt_id, i.tool_call_id, i.tool_name, i.raised_at, i.deadline) for i in session.interrupts.value
    ] == [
        ("turn-1.c3", "c3", "refund", now, now + timedelta(minutes=5)),
        ("turn-1.c4", "c4", "mystery", now, now + timedelta(minutes=5)),
        ("turn-1.c6", "c6", "export", now, now + timedelta(minutes=5)),
    ]
    assert session.interrupts.value[0].arguments == '{"order": 7}'
    assert session.messages.texts == ("Find my tickets",), "nothing of the turn is stored while tools run"


async def test_tool_calls_requested_write_deferred_and_interrupt_events() -> None:
    requested = tool_calls_requested(
        deferred_tool_call("c1", "search", policy=READ), deferred_tool_call("c2", "refund", policy=NON_IDEMPOTENT)
    )
    session = await in_first_turn(ScriptedRunner([requested]))

    await session.run_model()

    assert session.sink.types == (
        AgentEventType.USAGE_RECORDED,
        AgentEventType.TOOL_CALL_DEFERRED,
        AgentEventType.TOOL_CALL_DEFERRED,
        AgentEventType.INTERRUPT_RAISED,
    )
    deferred = session.sink.payloads(ToolCallDeferredPayload)
    assert [(p.tool_call_id, p.tool_name, p.effect, p.requires_approval) for p in deferred] == [
        ("c1", "search", ToolEffect.READ, False),
        ("c2", "refund", ToolEffect.NON_IDEMPOTENT_WRITE, True),
    ]
    assert session.sink.of_type(AgentEventType.INTERRUPT_RAISED)[0].payload == ev.interrupt_raised(
        "turn-1.c2", "c2", "refund", None
    )


async def test_an_interrupt_without_a_configured_deadline_never_expires() -> None:
    requested = tool_calls_requested(deferred_tool_call("c1", "refund", policy=NON_IDEMPOTENT))
    session = await in_first_turn(ScriptedRunner([requested]))
    await session.run_model()
    assert session.interrupts.value[0].deadline is None


async def test_deferral_order_continues_across_the_model_calls_of_one_turn() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "a"), deferred_tool_call("c2", "b"), run_state="s1"),
            tool_calls_requested(deferred_tool_call("c3", "c"), deferred_tool_call("c4", "d"), run_state="s2"),
        ]
    )
    session = await in_first_turn(runner)
    await session.run_model()
    for tool_call_id in ("c1", "c2"):
        session.tool_calls.put(session.tool_calls[tool_call_id].succeed("ok"))
    await session.resume_turn(session.results.take(2))

    decision = await session.run_model()

    resuming = runner.model_turns[1]
    assert resuming.is_resuming
    assert resuming.framework_run_state == "s1"
    assert set(resuming.tool_calls) == {"c1", "c2"}
    assert resuming.recorded_tool_call("c1").output == "ok"
    assert [(r.tool_call_id, r.deferral_order) for r in session.tool_calls.all()] == [
        ("c1", 0),
        ("c2", 1),
        ("c3", 2),
        ("c4", 3),
    ]
    assert isinstance(decision, GoToMany)
    assert decision.movements[-1] == GoTo(step=StepName.RESUME_TURN, input=2)
    assert session.run_state.value == "s2"


async def test_a_completed_turn_clears_its_records_and_run_state() -> None:
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "a")), TurnCompleted(new_messages=[assistant_message("done")])]
    )
    session = await in_first_turn(runner)
    await session.run_model()
    session.tool_calls.put(session.tool_calls["c1"].succeed("ok"))
    await session.resume_turn(session.results.take(1))

    await session.run_model()

    assert session.tool_calls.all() == ()
    assert session.run_state.value is None
    assert session.messages.texts == ("Find my tickets", "done")


async def test_each_model_call_adds_its_usage_to_the_session_and_records_it() -> None:
    first = AgentUsage(model_calls=1, input_tokens=100, output_tokens=10)
    second = AgentUsage(model_calls=1, input_tokens=150, output_tokens=20, cached_input_tokens=100)
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "a"), usage=first), TurnCompleted(new_messages=[], usage=second)]
    )
    session = await in_first_turn(runner)
    await session.run_model()
    session.tool_calls.put(session.tool_calls["c1"].succeed("ok"))
    await session.resume_turn(session.results.take(1))
    await session.run_model()

    assert session.usage.value == first + second
    recorded = session.sink.payloads(UsageRecordedPayload)
    assert [p.recorded for p in recorded] == [
        AgentUsage(model_calls=1, input_tokens=100, output_tokens=10),
        AgentUsage(model_calls=1, input_tokens=150, output_tokens=20, cached_input_tokens=100),
    ]
    assert recorded[1].session == AgentUsage(
        model_calls=2, input_tokens=250, output_tokens=30, cached_input_tokens=100, reasoning_tokens=0
    )


@pytest.mark.parametrize(
    ("requested", "message"),
    [
        pytest.param(tool_calls_requested(deferred_tool_call("", "a")), "must not be empty", id="empty-id"),
        pytest.param(tool_calls_requested(deferred_tool_call("x/y", "a")), "must not contain", id="slash"),
        pytest.param(
            tool_calls_requested(deferred_tool_call("c1", "a"), deferred_tool_call("c1", "a")),
            "used twice",
            id="duplicate",
        ),
        pytest.param(tool_calls_requested(deferred_tool_call("c1", "a"), run_state=""), "run state", id="no-state"),
    ],
)
async def test_a_contract_breaking_model_reply_fails_the_attempt_and_stores_nothing(
    requested: AgentTurnOutcome, message: str
) -> None:
    session = await in_first_turn(ScriptedRunner([requested]))
    before = session.state.current

    with pytest.raises(RunnerContractError, match=message):
        await session.run_model()

    assert session.state.current == before
    assert session.tool_calls.all() == ()
    assert session.run_state.value is None
    assert session.interrupts.value == ()
    assert session.usage.value == AgentUsage()
    assert session.sink.events == ()


async def test_a_tool_call_id_used_earlier_in_the_turn_breaks_the_contract() -> None:
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "a")), tool_calls_requested(deferred_tool_call("c1", "a"))]
    )
    session = await in_first_turn(runner)
    await session.run_model()
    session.tool_calls.put(session.tool_calls["c1"].succeed("ok"))
    await session.resume_turn(session.results.take(1))

    with pytest.raises(RunnerContractError, match="used twice in one turn"):
        await session.run_model()

    assert [r.tool_call_id for r in session.tool_calls.all()] == ["c1"]


async def test_a_runner_exception_fails_the_attempt_and_stores_nothing() -> None:
    session = await in_first_turn(ScriptedRunner([TimeoutError("model timed out")]))
    before = session.state.current

    with pytest.raises(TimeoutError):
        await session.run_model()

    assert session.state.current == before
    assert session.messages.texts == ("Find my tickets",)
    assert session.usage.value == AgentUsage()


async def test_run_model_reads_every_stored_message_in_sequence_order() -> None:
    runner = ScriptedRunner([TurnCompleted(new_messages=[assistant_message(str(n))]) for n in range(3)])
    session = InMemorySessionHost(runner)
    await session.start("m")
    for text in ("a", "b"):
        await session.run_model()
        await session.await_user_message([AgentUserMessage(text=text)])
    await session.run_model()

    assert [m.sequence for m in runner.model_turns[2].messages] == [1, 2, 3, 4, 5]
    assert [m.text for m in runner.model_turns[2].messages] == ["m", "0", "a", "1", "b"]
