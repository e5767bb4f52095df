"""Steering a running turn, the visible and editable queue, and cancelling a turn, on the in-memory host."""

from datetime import timedelta

from dex_agents import (
    AgentSessionOptions,
    AgentStatus,
    AgentTurnContext,
    ToolCallsRequested,
    ToolCallStatus,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.application.next import End, GoTo, Next, StepName
from dex_agents.domain import events as ev
from dex_agents.domain.events import AgentEventType, SteeredLanding
from dex_agents.domain.messages import AgentUserMessage, MessageDelivery
from dex_agents.domain.snapshot import TurnStatus, turn_result
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER, cancel_rejection_message
from dex_agents.testing import (
    InMemorySessionHost,
    ScriptedRunner,
    assistant_message,
    deferred_tool_call,
    tool_calls_requested,
)
from tests.unit.application.policies import NEEDS_APPROVAL, READ

STEER = MessageDelivery.STEER


def two_call_turn(*replies: object, policy: ToolPolicy = READ) -> InMemorySessionHost:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "lookup", policy=policy)),
            TurnCompleted(new_messages=[assistant_message("done")]),
            *replies,  # type: ignore[list-item]
        ],
        tool_replies={"lookup": "found it"},
    )
    return InMemorySessionHost(runner)


async def fanned_out(*replies: object) -> tuple[InMemorySessionHost, Next]:
    """A `two_call_turn` started on "look it up", its first model Step run; its decision starts the tool Steps."""
    host = two_call_turn(*replies)
    await host.start("look it up")
    return host, await host.run_model()


def steered_texts(host: InMemorySessionHost) -> list[tuple[str, SteeredLanding, str | None]]:
    return [
        (e.payload.text, e.payload.landed, e.turn_id)
        for e in host.sink.events
        if isinstance(e.payload, ev.UserMessageSteeredPayload)
    ]


# -- steering --------------------------------------------------------------------------


async def test_a_steered_message_sent_while_idle_starts_a_turn_like_a_queued_one() -> None:
    host = two_call_turn()
    waiting = await host.drive(await host.start())
    assert await host.send_user_message("hello", delivery=STEER)
    assert host.queue.size() == 1
    assert host.steering.size() == 0
    await host.drive(*waiting)
    assert host.messages.texts[0] == "hello"


async def test_a_message_steered_during_a_tool_step_joins_the_turn_after_the_tool_results() -> None:
    host, fan_out = await fanned_out()
    assert fan_out == GoTo(step=StepName.CALL_TOOL, input="c1"), "one call: its tool Step resumes the turn"

    assert await host.send_user_message("also check the date", client_message_id="m1", delivery=STEER)
    assert host.steering.size() == 1, "taken at the next model-call boundary, not before"
    await host.drive(fan_out)

    second = host.scripted.model_turns[1]
    assert [m.text for m in second.steered_messages] == ["also check the date"]
    assert second.is_resuming, "the model sees it with the tool results of its last response"
    assert [r.status for r in second.tool_calls.values()] == [ToolCallStatus.SUCCEEDED]
    assert steered_texts(host) == [("also check the date", SteeredLanding.RUNNING_TURN, "turn-1")]
    assert host.steered.get() == (), "handed to one model call only"
    assert host.state.current.turn_count == 1, "it started no turn of its own"


async def test_steered_messages_are_taken_in_order_and_the_model_call_after_sees_none_again() -> None:
    host, fan_out = await fanned_out()
    for text in ("first", "second"):
        assert await host.send_user_message(text, delivery=STEER)
    await host.drive(fan_out)
    assert [m.text for m in host.scripted.model_turns[1].steered_messages] == ["first", "second"]


async def test_a_steered_message_the_turn_ends_before_taking_starts_the_next_turn_before_queued_ones() -> None:
    runner = ScriptedRunner([TurnCompleted(new_messages=[assistant_message(text)]) for text in ("one", "two", "three")])
    host = InMemorySessionHost(runner)
    first = await host.start("go")  # turn-1 runs its model next
    assert await host.send_user_message("queued", delivery=MessageDelivery.QUEUE)
    assert await host.send_user_message("steered", client_message_id="s1", delivery=STEER)

    await host.drive(first)

    users = [m.text for m in host.messages.all if m.role.value == "user"]
    assert users == ["go", "steered", "queued"]
    assert steered_texts(host) == [("steered", SteeredLanding.NEW_TURN, "turn-2")]
    assert host.messages.all[2].client_message_id == "s1"


async def test_a_turn_whose_resume_failed_hands_back_the_steered_messages_its_model_never_saw() -> None:
    host, _ = await fanned_out()
    host.steered.set([AgentUserMessage(text="late", delivery=STEER)])

    await host.record_turn_failure(recovery_error="the resume failed", step=StepName.RECORD_RESUME_FAILURE)

    assert host.steered.get() == ()
    assert host.steering.pending() == (AgentUserMessage(text="late", delivery=STEER),)


async def test_a_turn_whose_model_step_failed_stores_the_steered_messages_its_failed_attempts_were_given() -> None:
    host, _ = await fanned_out()
    host.steered.set([AgentUserMessage(text="late", delivery=STEER, client_message_id="s1")])

    await host.record_turn_failure(recovery_error="the model is down")

    assert host.steered.get() == ()
    assert host.steering.pending() == (), "a model was sent it: it is not handed back to run (or be withdrawn) again"
    assert await host.withdraw_user_message("s1") is False
    assert "late" in [m.text for m in host.messages.all], "stored with the failed turn"


# -- the queue -------------------------------------------------------------------------


async def test_the_snapshot_lists_waiting_messages_and_the_steered_ones_the_turn_took() -> None:
    host, _ = await fanned_out()
    assert await host.send_user_message("next question", client_message_id="q1")
    assert await host.send_user_message("steer me", client_message_id="s1", delivery=STEER)
    host.steered.set([AgentUserMessage(text="taken", client_message_id="s0", delivery=STEER)])

    snapshot = await host.get_agent_snapshot()

    assert [(m.text, m.client_message_id, m.delivery) for m in snapshot.queued_messages] == [
        ("next question", "q1", MessageDelivery.QUEUE),
        ("steer me", "s1", MessageDelivery.STEER),
    ]
    assert snapshot.queued_message_count == 2
    assert [m.text for m in snapshot.steered_messages] == ["taken"]


async def test_withdrawing_removes_only_a_message_no_turn_has_taken() -> None:
    host, _ = await fanned_out()
    assert await host.send_user_message("queued", client_message_id="q1")
    assert await host.send_user_message("steered", client_message_id="s1", delivery=STEER)

    assert await host.withdraw_user_message("q1") is True
    assert await host.withdraw_user_message("q1") is False, "already withdrawn"
    assert await host.withdraw_user_message("s1") is True
    assert await host.withdraw_user_message("never-sent") is False
    assert await host.withdraw_user_message("bad\x00id") is False
    assert host.queue.size() == host.steering.size() == 0


async def test_a_message_a_turn_took_can_no_longer_be_withdrawn() -> None:
    host = two_call_turn()
    waiting = await host.drive(await host.start())
    assert await host.send_user_message("look it up", client_message_id="q1")
    await host.drive(*waiting)
    assert await host.withdraw_user_message("q1") is False


# -- cancel ----------------------------------------------------------------------------


async def test_cancelling_while_no_turn_runs_returns_false_and_records_nothing() -> None:
    host = two_call_turn()
    assert await host.cancel_turn("nothing to stop") is False  # not even started
    await host.drive(await host.start())
    assert await host.cancel_turn("nothing to stop") is False
    assert host.cancel_request.get() is None


async def test_cancelling_while_waiting_for_approval_rejects_it_and_ends_the_turn_without_a_model_call() -> None:
    host = two_call_turn(policy=NEEDS_APPROVAL)
    waiting = await host.drive(await host.start("refund it"))
    assert list(host.interrupts.ids) == ["turn-1.c1"]

    assert await host.cancel_turn("changed my mind") is True
    assert not host.interrupts.ids, "answered in the RPC's commit"
    await host.drive(*waiting)

    assert len(host.scripted.model_turns) == 1, "no further model call"
    assert host.scripted.executed_tool_call_ids == ()
    state = host.state.current
    assert (state.status, state.active_turn_id, state.last_turn_cancelled) == (
        AgentStatus.WAITING_FOR_USER_MESSAGE,
        None,
        True,
    )
    note = host.messages.all[-1]
    assert note.text is not None
    assert note.text.startswith(f"{TURN_CANCELLED_NOTE_HEADER} (reason: changed my mind).")
    assert "lookup {} -> rejected" in note.text
    (outcome,) = note.tool_outcomes
    assert (outcome.status, outcome.rejection_message) == (
        ToolCallStatus.REJECTED,
        cancel_rejection_message("changed my mind"),
    )
    assert host.tool_calls.all() == ()
    assert host.run_state.get() is None
    cancelled = [e for e in host.sink.events if e.type is AgentEventType.TURN_CANCELLED]
    assert [e.payload for e in cancelled] == [ev.turn_cancelled("changed my mind", finished_tool_calls=1)]


async def test_a_tool_call_not_started_when_the_cancel_arrives_is_cancelled_without_running() -> None:
    host, fan_out = await fanned_out()
    assert await host.cancel_turn(None)

    decision = await host.call_tool("c1")

    assert decision == GoTo(step=StepName.RUN_MODEL, window=host.state.current.model_window()), "it ends the turn"
    record = host.tool_calls["c1"]
    assert (record.status, record.rejection_message) == (ToolCallStatus.CANCELLED, cancel_rejection_message(None))
    assert host.scripted.executed_tool_call_ids == ()
    assert host.results.published == [], "the lone call resumes its turn: no ResumeTurn waits for a result"
    assert await host.run_model() == GoTo(step=StepName.AWAIT_USER_MESSAGE)
    assert host.state.current.last_turn_cancelled
    del fan_out


async def test_a_retried_tool_attempt_is_not_recorded_cancelled_it_may_have_started() -> None:
    host, _ = await fanned_out()
    assert await host.cancel_turn("stop")
    await host.call_tool("c1", attempt=2)
    assert host.tool_calls["c1"].status is ToolCallStatus.SUCCEEDED
    assert host.scripted.executed_tool_call_ids == ("c1",)


async def test_a_tool_that_finished_keeps_its_result_and_the_next_model_call_ends_the_turn_instead() -> None:
    host, _ = await fanned_out()
    resumed = await host.call_tool("c1")  # the turn's one call: its Step resumes the turn
    assert resumed == GoTo(step=StepName.RUN_MODEL, window=host.state.current.model_window())
    assert await host.cancel_turn("enough")  # it came while the call ran; the model Step is next

    assert await host.run_model() == GoTo(step=StepName.AWAIT_USER_MESSAGE)

    assert len(host.scripted.model_turns) == 1
    note = host.messages.all[-1]
    assert note.text is not None
    assert "lookup {} -> succeeded: found it" in note.text
    assert [o.status for o in note.tool_outcomes] == [ToolCallStatus.SUCCEEDED]


async def test_an_approval_raised_after_the_cancel_was_accepted_is_rejected_without_waiting() -> None:
    host: InMemorySessionHost

    async def cancel_during_the_model_call(turn: AgentTurnContext) -> ToolCallsRequested:
        assert await host.cancel_turn("stop")  # no interrupt is pending yet: the RPC answers none
        return tool_calls_requested(deferred_tool_call("c1", "refund", policy=NEEDS_APPROVAL))

    host = InMemorySessionHost(ScriptedRunner([cancel_during_the_model_call]))
    await host.start("refund it")
    await host.run_model()  # the model answered with a call needing approval
    assert list(host.interrupts.ids) == ["turn-1.c1"]

    assert host.plan_approval("c1") is None, "nothing to wait for"
    assert await host.await_tool_approval("c1") == End()

    record = host.tool_calls["c1"]
    assert (record.status, record.rejection_message) == (ToolCallStatus.REJECTED, cancel_rejection_message("stop"))
    assert not host.interrupts.ids


async def test_a_cancel_hands_back_steered_messages_the_model_never_saw() -> None:
    host, fan_out = await fanned_out(TurnCompleted(new_messages=[assistant_message("about the date")]))
    assert await host.send_user_message("what about the date?", delivery=STEER)
    assert await host.cancel_turn("stop")

    await host.drive(fan_out)

    users = [m.text for m in host.messages.all if m.role.value == "user"]
    assert users[0] == "look it up"
    assert users[1] is not None
    assert users[1].startswith(TURN_CANCELLED_NOTE_HEADER)
    assert users[2] == "what about the date?", "it started the next turn"
    assert host.state.current.turn_count == 2


async def test_a_cancel_for_an_earlier_turn_does_not_touch_a_later_one() -> None:
    host = InMemorySessionHost(
        ScriptedRunner(
            [
                tool_calls_requested(deferred_tool_call("c1", "lookup", policy=READ)),
                tool_calls_requested(deferred_tool_call("c1", "lookup", policy=READ)),
                TurnCompleted(new_messages=[assistant_message("second done")]),
            ],
            tool_replies={"lookup": "found it"},
        )
    )
    await host.start("look it up")
    await host.run_model()
    assert await host.cancel_turn("stop")
    waiting = await host.drive(GoTo(step=StepName.CALL_TOOL, input="c1"), GoTo(step=StepName.RESUME_TURN, input=1))
    assert await host.send_user_message("again")
    await host.drive(*waiting)

    assert host.state.current.last_turn_cancelled is False
    assert host.messages.texts[-1] == "second done"


async def test_the_turn_result_and_the_committed_event_say_cancelled() -> None:
    host = two_call_turn(policy=NEEDS_APPROVAL)
    waiting = await host.drive(await host.start("refund it"))
    assert await host.cancel_turn("stop")
    await host.drive(*waiting)
    host.announce_finished_turn()

    snapshot = await host.get_agent_snapshot()
    result = turn_result(snapshot, "turn-1")
    assert result is not None
    assert result.status is TurnStatus.CANCELLED
    committed = [e.payload for e in host.sink.events if isinstance(e.payload, ev.TurnCommittedPayload)]
    assert committed[-1].outcome is ev.TurnOutcome.CANCELLED


async def test_a_cancelled_approval_keeps_no_deadline_timer_waiting() -> None:
    host = InMemorySessionHost(
        ScriptedRunner([tool_calls_requested(deferred_tool_call("c1", "refund", policy=NEEDS_APPROVAL))]),
        options=AgentSessionOptions(interrupt_deadline=timedelta(seconds=60)),
    )
    await host.drive(await host.start("refund"))
    assert await host.cancel_turn("no")
    wait = host.plan_approval("c1")
    assert wait is not None
    assert wait.timer is None, "the interrupt is answered: only the answer is waited for"
