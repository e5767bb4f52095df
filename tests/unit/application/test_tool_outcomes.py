"""Tool outcomes outlive their records: what each call came to is stored on the messages that answer it."""

import json
from datetime import timedelta

import attrs
import pytest

from dex_agents import (
    EXPIRED_REJECTION_MESSAGE,
    AgentMessage,
    AgentSessionOptions,
    ApprovalStatus,
    FrameworkMessage,
    MessageRole,
    ToolCallStatus,
    ToolEffect,
    ToolExecutionError,
    ToolOutcome,
    ToolPolicy,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.application.runner import AgentTurnContext
from dex_agents.domain.turns import AgentTurnOutcome
from dex_agents.domain.usage import AgentUsage
from dex_agents.infrastructure.dex.codec import converter
from dex_agents.testing import (
    ScriptedRunner,
    assistant_message,
    deferred_tool_call,
    make_tool_call,
    tool_calls_requested,
)
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.application.policies import NON_IDEMPOTENT


def tool_result(*call_ids: str) -> FrameworkMessage:
    """A tool-result message naming ``call_ids``: one by ``tool_call_id``, several by ``tool_call_ids``."""
    if len(call_ids) == 1:
        return FrameworkMessage(role=MessageRole.TOOL, framework_item=json.dumps(call_ids), tool_call_id=call_ids[0])
    return FrameworkMessage(role=MessageRole.TOOL, framework_item=json.dumps(call_ids), tool_call_ids=call_ids)


def answer_with(*messages: FrameworkMessage) -> TurnCompleted:
    return TurnCompleted(new_messages=[*messages, assistant_message("done")], usage=AgentUsage(model_calls=1))


def outcomes(message: AgentMessage) -> list[tuple[str, ToolCallStatus]]:
    return [(o.tool_call_id, o.status) for o in message.tool_outcomes]


async def test_each_tool_result_message_of_a_completed_turn_carries_its_calls_outcome() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "find"), deferred_tool_call("c2", "lookup")),
            answer_with(tool_result("c1"), tool_result("c2")),
        ],
        tool_replies={"find": "found", "lookup": ToolExecutionError("no such order")},
    )
    session = InMemorySessionHost(runner)

    await session.drive(await session.start("go"))

    user, first, second, answer = session.messages.all
    assert outcomes(first) == [("c1", ToolCallStatus.SUCCEEDED)]
    assert outcomes(second) == [("c2", ToolCallStatus.FAILED)]
    assert second.tool_outcomes[0] == ToolOutcome(
        tool_call_id="c2",
        tool_name="lookup",
        status=ToolCallStatus.FAILED,
        effect=ToolEffect.READ,
        attempts=1,
        error="no such order",
    )
    assert user.tool_outcomes == answer.tool_outcomes == ()
    assert session.tool_calls.all() == ()


async def test_one_message_answering_several_calls_carries_all_their_outcomes_in_call_order() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "find"), deferred_tool_call("c2", "find")),
            answer_with(tool_result("c2", "c1")),
        ],
        tool_replies={"find": "found"},
    )
    session = InMemorySessionHost(runner)

    await session.drive(await session.start("go"))

    assert outcomes(session.messages.all[1]) == [("c1", ToolCallStatus.SUCCEEDED), ("c2", ToolCallStatus.SUCCEEDED)]


async def test_a_message_that_is_not_a_tool_result_carries_no_outcome_even_when_it_names_a_call() -> None:
    request = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item="[]", tool_call_id="c1", tool_name="find")
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "find")), answer_with(request)],
        tool_replies={"find": "found"},
    )
    session = InMemorySessionHost(runner)

    await session.drive(await session.start("go"))

    assert session.messages.all[1].tool_outcomes == ()


async def test_a_retried_read_records_the_attempt_that_succeeded() -> None:
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "find")), answer_with(tool_result("c1"))],
        tool_replies={"find": [RuntimeError("flaky"), "found"]},
    )
    session = InMemorySessionHost(runner)

    await session.drive(await session.start("go"))

    assert session.messages.all[1].tool_outcomes[0].attempts == 2


async def test_a_write_that_exhausted_its_attempts_records_them_as_outcome_unknown() -> None:
    policy = ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "charge", policy=policy)), answer_with(tool_result("c1"))],
        tool_replies={"charge": RuntimeError("timeout")},
    )
    session = InMemorySessionHost(runner)

    await session.drive(await session.start("go"))

    (outcome,) = session.messages.all[1].tool_outcomes
    assert (outcome.status, outcome.effect, outcome.attempts) == (
        ToolCallStatus.OUTCOME_UNKNOWN,
        ToolEffect.IDEMPOTENT_WRITE,
        3,
    )


async def test_an_approved_call_keeps_its_approval_and_approver() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "refund", policy=NON_IDEMPOTENT)),
            answer_with(tool_result("c1")),
        ],
        tool_replies={"refund": "refunded"},
    )
    session = InMemorySessionHost(runner)
    waiting = await session.drive(await session.start("go"))

    assert await session.resolve_interrupt("turn-1.c1", approved=True, approver="ana")
    await session.drive(*waiting)

    (outcome,) = session.messages.all[1].tool_outcomes
    assert (outcome.status, outcome.approval, outcome.approver, outcome.attempts) == (
        ToolCallStatus.SUCCEEDED,
        ApprovalStatus.APPROVED,
        "ana",
        1,
    )


async def test_a_rejected_call_keeps_its_reason_and_approver_and_never_ran() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "refund", policy=NON_IDEMPOTENT)),
            answer_with(tool_result("c1")),
        ],
    )
    session = InMemorySessionHost(runner)
    waiting = await session.drive(await session.start("go"))

    assert await session.resolve_interrupt("turn-1.c1", approved=False, rejection_message="no", approver="bo")
    await session.drive(*waiting)

    (outcome,) = session.messages.all[1].tool_outcomes
    assert outcome == ToolOutcome(
        tool_call_id="c1",
        tool_name="refund",
        status=ToolCallStatus.REJECTED,
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        attempts=0,
        approval=ApprovalStatus.REJECTED,
        approver="bo",
        rejection_message="no",
    )
    assert runner.executed_tool_call_ids == ()


async def test_an_expired_call_is_stored_expired_and_its_model_text_says_the_approval_expired() -> None:
    seen: list[str] = []

    def answer(turn: AgentTurnContext) -> AgentTurnOutcome:
        seen.append(describe_tool_call_outcome(turn.recorded_tool_call("c1")))
        return answer_with(tool_result("c1"))

    runner = ScriptedRunner([tool_calls_requested(deferred_tool_call("c1", "refund", policy=NON_IDEMPOTENT)), answer])
    session = InMemorySessionHost(runner, options=AgentSessionOptions(interrupt_deadline=timedelta(seconds=30)))
    waiting = await session.drive(await session.start("go"))
    session.clock.advance(30)

    await session.drive(*waiting)

    (outcome,) = session.messages.all[1].tool_outcomes
    assert (outcome.status, outcome.approval, outcome.attempts) == (ToolCallStatus.EXPIRED, ApprovalStatus.EXPIRED, 0)
    assert seen == [EXPIRED_REJECTION_MESSAGE]
    assert "expired" in EXPIRED_REJECTION_MESSAGE


async def test_a_failed_turns_note_carries_the_outcomes_of_the_calls_that_ran() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "find"), deferred_tool_call("c2", "find")),
            RuntimeError("model down"),
            RuntimeError("model down"),
            RuntimeError("model down"),
        ],
        tool_replies={"find": "found"},
    )
    session = InMemorySessionHost(runner)

    await session.drive(await session.start("go"))

    note = session.messages.all[-1]
    assert note.role is MessageRole.USER
    assert outcomes(note) == [("c1", ToolCallStatus.SUCCEEDED), ("c2", ToolCallStatus.SUCCEEDED)]


def test_an_open_record_has_no_outcome_yet() -> None:
    with pytest.raises(ValueError, match="no outcome yet"):
        make_tool_call(status=ToolCallStatus.PENDING).outcome()


@pytest.mark.parametrize(
    ("status", "approval"),
    [
        (ToolCallStatus.AWAITING_APPROVAL, None),
        (ToolCallStatus.APPROVED, ApprovalStatus.APPROVED),
        (ToolCallStatus.SUCCEEDED, ApprovalStatus.APPROVED),
        (ToolCallStatus.OUTCOME_UNKNOWN, ApprovalStatus.APPROVED),
        (ToolCallStatus.REJECTED, ApprovalStatus.REJECTED),
        (ToolCallStatus.EXPIRED, ApprovalStatus.EXPIRED),
    ],
)
def test_a_call_that_asked_for_approval_reports_how_the_approval_ended(
    status: ToolCallStatus, approval: ApprovalStatus | None
) -> None:
    record = attrs.evolve(make_tool_call(status=status), interrupt_id="turn-1.c1")
    assert record.approval is approval


def test_a_call_that_needed_no_approval_reports_none() -> None:
    assert make_tool_call(status=ToolCallStatus.SUCCEEDED).approval is None


def test_a_message_stored_before_outcomes_existed_still_decodes_with_none() -> None:
    old = {"sequence": 3, "turn_id": "turn-1", "role": "tool", "framework_item": "[]", "tool_call_id": "c1"}
    message = converter().structure(old, AgentMessage)
    assert (message.tool_outcomes, message.client_message_id) == ((), None)


def test_a_message_with_outcomes_round_trips_through_the_codec() -> None:
    record = make_tool_call(status=ToolCallStatus.AWAITING_APPROVAL, policy=NON_IDEMPOTENT).expire(
        EXPIRED_REJECTION_MESSAGE
    )
    message = AgentMessage(
        sequence=2,
        turn_id="turn-1",
        role=MessageRole.TOOL,
        framework_item="[]",
        tool_outcomes=(record.outcome(),),
        client_message_id="m-1",
    )
    encoded = converter().unstructure(message)
    assert encoded["tool_outcomes"][0]["status"] == "expired"
    assert converter().structure(encoded, AgentMessage) == message


def test_a_framework_message_names_its_calls_by_the_list_or_else_by_its_one_id() -> None:
    assert tool_result("c1").answered_tool_call_ids == ("c1",)
    assert tool_result("c1", "c2").answered_tool_call_ids == ("c1", "c2")
    assert FrameworkMessage(role=MessageRole.TOOL, framework_item="[]").answered_tool_call_ids == ()
