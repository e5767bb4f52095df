"""A tool that asks for approval while its Step runs, before acting: its call waits as a policy's approval waits."""

from datetime import timedelta

from dex_agents.application.next import GoTo, GoToMany, StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.runner import ToolApprovalRequestedError
from dex_agents.application.steps.call_tool import ASKED_AGAIN
from dex_agents.domain.events import InterruptRaisedPayload, InterruptResolvedPayload
from dex_agents.domain.interrupts import EXPIRED_REJECTION_MESSAGE, InterruptKind
from dex_agents.domain.tools import ApprovalStatus, ToolCallStatus, ToolPolicy
from dex_agents.domain.turns import TurnCompleted
from dex_agents.testing import ScriptedRunner, ToolReply, assistant_message, deferred_tool_call, tool_calls_requested
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.application.policies import NON_IDEMPOTENT_NO_APPROVAL, READ
from tests.unit.application.waits import at_the_wait, resumed_past_the_deadline

S = ToolCallStatus
CALL = "c1"
INTERRUPT = "turn-1.c1"
IDLE = (GoTo(step=StepName.AWAIT_USER_MESSAGE),)


def session_for(
    policy: ToolPolicy = READ, *, replies: list[ToolReply] | None = None, deadline: timedelta | None = None
) -> InMemorySessionHost:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call(CALL, "delete_file", '{"path": ".env"}', policy=policy)),
            TurnCompleted(new_messages=[assistant_message("done")]),
        ],
        tool_replies={CALL: replies or [ToolApprovalRequestedError(), "deleted .env"]},
    )
    return InMemorySessionHost(runner, options=AgentSessionOptions(interrupt_deadline=deadline))


async def asking(
    policy: ToolPolicy = READ, *, replies: list[ToolReply] | None = None, deadline: timedelta | None = None
) -> tuple[InMemorySessionHost, tuple[GoTo, ...]]:
    session = session_for(policy, replies=replies, deadline=deadline)
    left = await at_the_wait(session, "delete .env")
    return session, left


async def test_a_tool_asking_for_approval_puts_its_call_in_awaiting_approval_under_a_pending_approval() -> None:
    session, left = await asking()

    assert {m.step for m in left} == {StepName.AWAIT_TOOL_APPROVAL, StepName.RESUME_TURN}
    record = session.tool_calls[CALL]
    assert (record.status, record.interrupt_id, record.attempts, record.approval_to_raise) == (
        S.AWAITING_APPROVAL,
        INTERRUPT,
        1,
        False,
    )
    (interrupt,) = (await session.get_agent_snapshot()).pending_interrupts
    assert (interrupt.interrupt_id, interrupt.kind, interrupt.call_digest) == (
        INTERRUPT,
        InterruptKind.APPROVAL,
        record.digest,
    )
    (raised,) = session.sink.payloads(InterruptRaisedPayload)
    assert (raised.interrupt_id, raised.tool_call_id, raised.kind) == (INTERRUPT, CALL, "approval")
    assert session.scripted.executed_tool_call_ids == (CALL,)  # asked once: neither a failure nor a Step retry


async def test_an_approved_call_runs_its_tool_step_again_with_the_record_approved() -> None:
    session, left = await asking()

    assert await session.resolve_interrupt(INTERRUPT, approved=True, approver="ada")
    assert await session.drive(*left) == IDLE

    first, second = session.scripted.tool_executions
    assert (first.tool_call.status, second.tool_call.status) == (S.PENDING, S.APPROVED)
    resumed = session.scripted.model_turns[1].tool_calls[CALL]
    assert (resumed.status, resumed.output, resumed.approval, resumed.approver) == (
        S.SUCCEEDED,
        "deleted .env",
        ApprovalStatus.APPROVED,
        "ada",
    )
    (resolved,) = session.sink.payloads(InterruptResolvedPayload)
    assert (resolved.interrupt_id, resolved.approved) == (INTERRUPT, True)


async def test_an_approved_single_attempt_write_gets_its_one_real_attempt_after_asking() -> None:
    session, left = await asking(NON_IDEMPOTENT_NO_APPROVAL)

    assert await session.resolve_interrupt(INTERRUPT, approved=True)
    assert await session.drive(*left) == IDLE

    assert session.scripted.executed_tool_call_ids == (CALL, CALL)
    resumed = session.scripted.model_turns[1].tool_calls[CALL]
    assert (resumed.status, resumed.output, resumed.attempts) == (S.SUCCEEDED, "deleted .env", 1)


async def test_a_denied_call_is_rejected_with_the_message_and_its_tool_does_not_run_again() -> None:
    session, left = await asking()

    assert await session.resolve_interrupt(INTERRUPT, approved=False, rejection_message="Not that file.")
    assert await session.drive(*left) == IDLE

    assert session.scripted.executed_tool_call_ids == (CALL,)
    resumed = session.scripted.model_turns[1].tool_calls[CALL]
    assert (resumed.status, resumed.rejection_message, resumed.approval) == (
        S.REJECTED,
        "Not that file.",
        ApprovalStatus.REJECTED,
    )


async def test_an_unanswered_call_expires_at_the_interrupt_deadline() -> None:
    session, left = await asking(deadline=timedelta(seconds=30))

    resumed = await resumed_past_the_deadline(session, left, CALL, timedelta(seconds=30))
    assert (resumed.status, resumed.rejection_message) == (S.EXPIRED, EXPIRED_REJECTION_MESSAGE)


async def test_a_tool_asking_again_after_its_approval_fails_its_call() -> None:
    session, left = await asking(replies=[ToolApprovalRequestedError()])

    assert await session.resolve_interrupt(INTERRUPT, approved=True)
    assert await session.drive(*left) == IDLE

    resumed = session.scripted.model_turns[1].tool_calls[CALL]
    assert (resumed.status, resumed.error) == (S.FAILED, ASKED_AGAIN)
    assert session.interrupts.get() == ()


async def test_a_turn_cancelled_before_the_asked_approval_is_raised_rejects_the_call() -> None:
    session = session_for()
    await session.start("delete .env")
    await session.run_model()
    assert await session.call_tool(CALL) == GoToMany(
        movements=[GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input=CALL), GoTo(step=StepName.RESUME_TURN, input=1)]
    ), "the turn's one call waits for an answer now: ResumeTurn joins its result"
    assert await session.cancel_turn("user left")

    await session.drive(GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input=CALL))

    record = session.tool_calls.get(CALL)
    assert record is None or record.status is S.REJECTED
    assert session.interrupts.get() == ()
    assert session.sink.payloads(InterruptRaisedPayload) == []
