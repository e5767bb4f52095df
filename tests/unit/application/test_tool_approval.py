"""``AwaitToolApproval`` and the ``resolve_interrupt`` RPC."""

from datetime import timedelta

import attrs
import pytest

from dex_agents.application.next import End, GoTo, StepName, WaitAgain
from dex_agents.application.options import AgentSessionOptions
from dex_agents.domain import events as ev
from dex_agents.domain.events import AgentEventType
from dex_agents.domain.interrupts import EXPIRED_REJECTION_MESSAGE, AgentInterruptResolution
from dex_agents.domain.tools import (
    ApprovalStatus,
    ToolCallCompleted,
    ToolCallStatus,
    ToolEffect,
    ToolPolicy,
    call_digest,
)
from dex_agents.testing import ScriptedRunner, deferred_tool_call, tool_calls_requested
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.application.policies import NON_IDEMPOTENT

CALL = "c1"
INTERRUPT = "turn-1.c1"


async def waiting_for_approval(
    *, policy: ToolPolicy = NON_IDEMPOTENT, deadline: timedelta | None = timedelta(seconds=90)
) -> InMemorySessionHost:
    runner = ScriptedRunner([tool_calls_requested(deferred_tool_call(CALL, "refund", '{"order": 7}', policy=policy))])
    session = InMemorySessionHost(runner, options=AgentSessionOptions(interrupt_deadline=deadline))
    await session.start("Refund order 7")
    await session.run_model()
    session.plan_approval(CALL)  # the first wait: anchors the deadline on the engine's clock (the host's clock)
    session.sink.clear()
    return session


# -- plan_wait ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("deadline", "elapsed", "timer"),
    [
        pytest.param(timedelta(seconds=90), timedelta(0), timedelta(seconds=90), id="whole-seconds"),
        pytest.param(timedelta(seconds=90), timedelta(milliseconds=200), timedelta(seconds=90), id="rounds-up"),
        pytest.param(timedelta(seconds=90.5), timedelta(0), timedelta(seconds=91), id="half-second-rounds-up"),
        pytest.param(timedelta(seconds=90), timedelta(seconds=89, microseconds=1), timedelta(seconds=1), id="last-sec"),
        pytest.param(timedelta(seconds=90), timedelta(seconds=90), timedelta(0), id="at-deadline"),
        pytest.param(timedelta(seconds=90), timedelta(seconds=200), timedelta(0), id="past-deadline"),
    ],
)
async def test_the_approval_timer_is_the_time_to_the_deadline_rounded_up_to_whole_seconds(
    deadline: timedelta, elapsed: timedelta, timer: timedelta
) -> None:
    session = await waiting_for_approval(deadline=deadline)
    session.clock.advance(elapsed)

    wait = session.plan_approval(CALL)

    assert wait is not None
    assert (wait.interrupt_id, wait.timer) == (INTERRUPT, timer)
    assert wait.timer is not None
    assert wait.timer.microseconds == 0


async def test_an_interrupt_without_a_deadline_waits_without_a_timer() -> None:
    session = await waiting_for_approval(deadline=None)
    wait = session.plan_approval(CALL)
    assert wait is not None
    assert (wait.interrupt_id, wait.timer) == (INTERRUPT, None)


async def test_an_answer_already_accepted_leaves_nothing_to_time() -> None:
    session = await waiting_for_approval()
    assert await session.resolve_interrupt(INTERRUPT, approved=True)
    wait = session.plan_approval(CALL)
    assert wait is not None
    assert (wait.interrupt_id, wait.timer) == (INTERRUPT, None)


@pytest.mark.parametrize(
    "status", [ToolCallStatus.APPROVED, ToolCallStatus.REJECTED, ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED]
)
async def test_a_call_no_longer_awaiting_approval_needs_no_wait(status: ToolCallStatus) -> None:
    session = await waiting_for_approval()
    session.tool_calls.put(attrs.evolve(session.tool_calls[CALL], status=status))
    assert session.plan_approval(CALL) is None


# -- execute ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("effect", "tool_step"),
    [
        (ToolEffect.READ, StepName.CALL_TOOL),
        (ToolEffect.IDEMPOTENT_WRITE, StepName.CALL_TOOL),
        (ToolEffect.NON_IDEMPOTENT_WRITE, StepName.CALL_SINGLE_ATTEMPT_TOOL),
        (ToolEffect.UNCLASSIFIED, StepName.CALL_SINGLE_ATTEMPT_TOOL),
    ],
)
async def test_an_approved_call_is_marked_approved_and_goes_to_its_tool_step(
    effect: ToolEffect, tool_step: StepName
) -> None:
    session = await waiting_for_approval(policy=ToolPolicy(effect, requires_approval=True))
    assert await session.resolve_interrupt(INTERRUPT, approved=True, rejection_message="ignored")
    resolution = session.resolutions.take_one(INTERRUPT)

    decision = await session.await_tool_approval(CALL, resolution=resolution)

    assert decision == GoTo(step=tool_step, input=CALL)
    assert session.tool_calls[CALL].status is ToolCallStatus.APPROVED
    assert session.results.published == []
    (resolved,) = session.sink.events
    assert resolved.payload == ev.interrupt_resolved(INTERRUPT, approved=True, rejection_message=None)
    assert resolved.turn_id == "turn-1"


async def test_a_rejected_call_is_recorded_rejected_and_publishes_its_one_result() -> None:
    session = await waiting_for_approval()
    assert await session.resolve_interrupt(INTERRUPT, approved=False, rejection_message="Too costly")

    decision = await session.await_tool_approval(CALL, resolution=session.resolutions.take_one(INTERRUPT))

    assert decision == End()
    record = session.tool_calls[CALL]
    assert (record.status, record.rejection_message) == (ToolCallStatus.REJECTED, "Too costly")
    assert session.results.published == [
        ToolCallCompleted(tool_call_id=CALL, turn_id="turn-1", status=ToolCallStatus.REJECTED)
    ]
    assert session.sink.types == (AgentEventType.INTERRUPT_RESOLVED, AgentEventType.TOOL_CALL_FINISHED)
    assert session.sink.events[0].payload == ev.interrupt_resolved(
        INTERRUPT, approved=False, rejection_message="Too costly"
    )
    assert session.sink.events[1].payload == ev.tool_call_finished(
        CALL, "refund", ToolCallStatus.REJECTED, error="Too costly"
    )


async def test_an_expired_approval_is_recorded_expired_not_rejected_and_removes_the_interrupt() -> None:
    session = await waiting_for_approval(deadline=timedelta(seconds=90))
    session.clock.advance(90)

    decision = await session.await_tool_approval(CALL, resolution=None, timer_fired=True)

    assert decision == End()
    record = session.tool_calls[CALL]
    assert (record.status, record.rejection_message) == (ToolCallStatus.EXPIRED, EXPIRED_REJECTION_MESSAGE)
    assert record.approval is ApprovalStatus.EXPIRED
    assert session.interrupts.value == ()
    assert [r.status for r in session.results.published] == [ToolCallStatus.EXPIRED]
    assert session.sink.events[1].payload == ev.tool_call_finished(
        CALL, "refund", ToolCallStatus.EXPIRED, error=EXPIRED_REJECTION_MESSAGE
    )
    assert session.sink.events[0].payload == ev.interrupt_resolved(
        INTERRUPT, approved=False, rejection_message=EXPIRED_REJECTION_MESSAGE
    )
    assert await session.resolve_interrupt(INTERRUPT, approved=True) is False


async def test_a_fired_timer_is_the_deadline_whatever_the_worker_clock_says() -> None:
    # The engine measured the Timer; a Worker whose clock runs behind must not keep the approval open.
    session = await waiting_for_approval(deadline=timedelta(seconds=90))
    session.clock.advance(timedelta(seconds=10))

    decision = await session.await_tool_approval(CALL, resolution=None, timer_fired=True)

    assert decision == End()
    assert session.tool_calls[CALL].status is ToolCallStatus.EXPIRED
    assert session.interrupts.ids == ()


async def test_the_first_wait_stores_the_deadline_on_the_engine_clock_and_later_waits_time_what_is_left() -> None:
    session = await waiting_for_approval(deadline=None)
    session.options = AgentSessionOptions(interrupt_deadline=timedelta(seconds=90))
    start = session.clock.now()
    first = session.plan_approval(CALL)
    assert first is not None
    assert first.timer == timedelta(seconds=90)
    assert session.tool_calls[CALL].approval_deadline == start + timedelta(seconds=90)

    session.clock.advance(timedelta(seconds=30))
    again = session.plan_approval(CALL)

    assert again is not None
    assert again.timer == timedelta(seconds=60)
    assert session.tool_calls[CALL].approval_deadline == start + timedelta(seconds=90), "stored once"


async def test_a_wait_that_delivered_nothing_waits_again() -> None:
    session = await waiting_for_approval()
    assert await session.await_tool_approval(CALL) == WaitAgain(input=CALL)


@pytest.mark.parametrize(
    ("approved", "status", "decision"),
    [
        (True, ToolCallStatus.APPROVED, GoTo(step=StepName.CALL_SINGLE_ATTEMPT_TOOL, input=CALL)),
        (False, ToolCallStatus.REJECTED, End()),
    ],
)
async def test_an_answer_accepted_just_as_the_deadline_fires_waits_again_then_applies_the_answer(
    *, approved: bool, status: ToolCallStatus, decision: GoTo | End
) -> None:
    session = await waiting_for_approval(deadline=timedelta(seconds=90))
    session.clock.advance(timedelta(seconds=89, milliseconds=999))
    assert await session.resolve_interrupt(INTERRUPT, approved=approved, rejection_message="late no")
    session.clock.advance(timedelta(milliseconds=1))

    # The Timer fired, but the RPC had already taken the interrupt: no expiry.
    first = await session.await_tool_approval(CALL, resolution=None, timer_fired=True)

    assert first == WaitAgain(input=CALL)
    assert session.tool_calls[CALL].status is ToolCallStatus.AWAITING_APPROVAL
    assert session.results.published == []
    wait = session.plan_approval(CALL)
    assert wait is not None
    assert wait.timer is None

    second = await session.await_tool_approval(CALL, resolution=session.resolutions.take_one(INTERRUPT))

    assert second == decision
    assert session.tool_calls[CALL].status is status
    assert len(session.results.published) == (0 if approved else 1)


async def test_an_answer_wins_over_a_timer_that_fired_with_it() -> None:
    session = await waiting_for_approval(deadline=timedelta(seconds=90))
    assert await session.resolve_interrupt(INTERRUPT, approved=True)
    session.clock.advance(90)

    decision = await session.await_tool_approval(
        CALL, resolution=session.resolutions.take_one(INTERRUPT), timer_fired=True
    )

    assert decision == GoTo(step=StepName.CALL_SINGLE_ATTEMPT_TOOL, input=CALL)


@pytest.mark.parametrize(
    "resolution",
    [None, AgentInterruptResolution(interrupt_id=INTERRUPT, approved=True)],
)
async def test_a_record_that_is_already_final_ends_without_publishing(
    resolution: AgentInterruptResolution | None,
) -> None:
    session = await waiting_for_approval()
    session.tool_calls.put(session.tool_calls[CALL].reject("no"))
    session.clock.advance(1000)

    decision = await session.await_tool_approval(CALL, resolution=resolution, timer_fired=True)

    assert decision == End()
    assert session.tool_calls[CALL].status is ToolCallStatus.REJECTED
    assert session.results.published == []
    assert session.sink.events == ()


async def test_an_already_approved_record_goes_on_to_its_tool_step() -> None:
    session = await waiting_for_approval()
    session.tool_calls.put(session.tool_calls[CALL].approve())
    decision = await session.await_tool_approval(CALL)
    assert decision == GoTo(step=StepName.CALL_SINGLE_ATTEMPT_TOOL, input=CALL)
    assert session.sink.events == ()


# -- resolve_interrupt -------------------------------------------------------------


async def test_resolving_a_pending_interrupt_removes_it_and_publishes_the_answer() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(
                deferred_tool_call("c1", "refund", policy=NON_IDEMPOTENT),
                deferred_tool_call("c2", "email", policy=NON_IDEMPOTENT),
            )
        ]
    )
    session = InMemorySessionHost(runner)
    await session.start("go")
    await session.run_model()

    assert await session.resolve_interrupt("turn-1.c1", approved=False, rejection_message="no refunds") is True

    assert session.interrupts.ids == ("turn-1.c2",)
    assert session.resolutions.published == [
        AgentInterruptResolution(interrupt_id="turn-1.c1", approved=False, rejection_message="no refunds")
    ]


async def test_resolving_with_approval_drops_the_rejection_message() -> None:
    session = await waiting_for_approval()
    assert await session.resolve_interrupt(INTERRUPT, approved=True, rejection_message="why not") is True
    assert session.resolutions.published == [
        AgentInterruptResolution(
            interrupt_id=INTERRUPT,
            approved=True,
            rejection_message=None,
            call_digest=call_digest("refund", '{"order": 7}'),
        )
    ]


async def test_resolving_an_interrupt_that_is_not_pending_returns_false() -> None:
    session = await waiting_for_approval()
    assert await session.resolve_interrupt("turn-1.unknown", approved=True) is False
    assert await session.resolve_interrupt(INTERRUPT, approved=True) is True
    assert await session.resolve_interrupt(INTERRUPT, approved=False) is False, "already answered"
    assert len(session.resolutions.published) == 1


@pytest.mark.parametrize("past", [timedelta(seconds=90), timedelta(seconds=91)])
async def test_resolving_asks_no_worker_clock_only_whether_the_engine_expired_the_interrupt(past: timedelta) -> None:
    session = await waiting_for_approval(deadline=timedelta(seconds=90))
    session.clock.advance(past)  # a Worker clock ahead of the engine's says the deadline passed

    assert await session.resolve_interrupt(INTERRUPT, approved=True) is True, "the engine's Timer has not fired"

    expired = await waiting_for_approval(deadline=timedelta(seconds=90))
    assert await expired.await_tool_approval(CALL, timer_fired=True) == End()
    assert await expired.resolve_interrupt(INTERRUPT, approved=True) is False
    assert expired.resolutions.published == []


async def test_resolving_just_before_the_deadline_is_accepted() -> None:
    session = await waiting_for_approval(deadline=timedelta(seconds=90))
    session.clock.advance(timedelta(seconds=89, microseconds=999999))
    assert await session.resolve_interrupt(INTERRUPT, approved=True) is True


async def test_a_retried_expiry_does_not_write_back_interrupts_resolved_since_its_first_attempt() -> None:
    # Two approvals share PENDING_INTERRUPTS. The lock is held per attempt, and a
    # retry reads the snapshot of the first attempt: an interrupt resolved between
    # the attempts is still in it, and writing the list back would resurrect it.
    calls = [deferred_tool_call(call_id, "refund", policy=NON_IDEMPOTENT) for call_id in ("c1", "c2")]
    runner = ScriptedRunner([tool_calls_requested(*calls)])
    session = InMemorySessionHost(runner, options=AgentSessionOptions(interrupt_deadline=timedelta(seconds=90)))
    await session.start("Refund")
    await session.run_model()
    first_attempt_snapshot = session.interrupts.value
    session.clock.advance(89)
    assert await session.resolve_interrupt("turn-1.c2", approved=True)  # between the attempts
    committed = session.interrupts.value
    session.clock.advance(1)

    session.interrupts.value = first_attempt_snapshot  # what the retry reads
    decision = await session.await_tool_approval("c1", timer_fired=True, attempt=2)

    assert decision == WaitAgain(input="c1")
    assert session.tool_calls["c1"].status is ToolCallStatus.AWAITING_APPROVAL
    assert session.results.published == []

    # The new execution reads the committed list and expires only its own interrupt.
    session.interrupts.value = committed
    assert await session.await_tool_approval("c1", timer_fired=True) == End()
    assert session.interrupts.value == ()
    assert [r.tool_call_id for r in session.results.published] == ["c1"]
