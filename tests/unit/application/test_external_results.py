"""Results from outside the session: a call waits for ``submit_tool_result`` as an approval waits for its answer."""

from datetime import timedelta

import pytest

from dex_agents.application.next import GoTo, StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.rpcs.submit_tool_result import raise_for_tool_result_answer, request_refusal
from dex_agents.application.runner import ToolResultDeferredError
from dex_agents.domain.errors import (
    InvalidInputError,
    NotAwaitingToolResultError,
    ToolResultAlreadySubmittedError,
    UnknownToolCallError,
)
from dex_agents.domain.events import InterruptRaisedPayload, InterruptResolvedPayload
from dex_agents.domain.interrupts import (
    EXPIRED_RESULT_MESSAGE,
    InterruptKind,
    SubmitToolResultAnswer,
    SubmitToolResultRequest,
)
from dex_agents.domain.limits import InputProblem
from dex_agents.domain.tools import ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.domain.turns import DeferredToolCall, ToolCallsRequested, TurnCompleted
from dex_agents.testing import ScriptedRunner, assistant_message, deferred_tool_call, tool_calls_requested
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.application.policies import READ
from tests.unit.application.waits import at_the_wait, resumed_past_the_deadline

S = ToolCallStatus
A = SubmitToolResultAnswer
CALL = "c1"
RESULT_INTERRUPT = "turn-1.c1.result"
IDLE = (GoTo(step=StepName.AWAIT_USER_MESSAGE),)


def session_for(
    *calls: tuple[str, ToolPolicy], deadline: timedelta | None = None, defer: tuple[str, ...] = (CALL,)
) -> InMemorySessionHost:
    runner = ScriptedRunner(
        [
            tool_calls_requested(*(deferred_tool_call(call_id, "lookup", "{}", policy=p) for call_id, p in calls)),
            TurnCompleted(new_messages=[assistant_message("done")]),
        ],
        tool_replies={call_id: ToolResultDeferredError() for call_id in defer} | {"lookup": "ran here"},
    )
    return InMemorySessionHost(runner, options=AgentSessionOptions(external_result_deadline=deadline))


async def waiting(deadline: timedelta | None = None) -> tuple[InMemorySessionHost, tuple[GoTo, ...]]:
    session = session_for((CALL, READ), deadline=deadline)
    left = await at_the_wait(session, "look it up")
    return session, left


async def test_a_deferred_call_waits_with_a_pending_tool_result_interrupt_and_an_interrupt_raised_event() -> None:
    session, left = await waiting()

    assert {m.step for m in left} == {StepName.AWAIT_TOOL_APPROVAL, StepName.RESUME_TURN}
    (interrupt,) = (await session.get_agent_snapshot()).pending_interrupts
    assert (interrupt.interrupt_id, interrupt.tool_call_id, interrupt.kind) == (
        RESULT_INTERRUPT,
        CALL,
        InterruptKind.TOOL_RESULT,
    )
    (raised,) = session.sink.payloads(InterruptRaisedPayload)
    assert (raised.interrupt_id, raised.kind) == (RESULT_INTERRUPT, "tool_result")
    assert session.tool_calls[CALL].status is S.AWAITING_RESULT
    assert session.scripted.executed_tool_call_ids == (CALL,)  # ran once, then waits: no Step retry


async def test_a_submitted_result_succeeds_the_call_with_its_json_and_the_model_resumes() -> None:
    session, left = await waiting()

    assert await session.submit_tool_result(CALL, result='{"stock": 3}') is A.ACCEPTED
    assert await session.drive(*left) == IDLE

    resumed = session.scripted.model_turns[1].tool_calls[CALL]
    assert (resumed.status, resumed.output, resumed.has_external_result) == (S.SUCCEEDED, '{"stock": 3}', True)
    (resolved,) = session.sink.payloads(InterruptResolvedPayload)
    assert (resolved.interrupt_id, resolved.approved) == (RESULT_INTERRUPT, True)
    assert (await session.get_agent_snapshot()).pending_interrupts == ()


async def test_a_submitted_error_fails_the_call_with_that_error() -> None:
    session, left = await waiting()

    assert await session.submit_tool_result(CALL, error="the warehouse is closed") is A.ACCEPTED
    assert await session.drive(*left) == IDLE

    resumed = session.scripted.model_turns[1].tool_calls[CALL]
    assert (resumed.status, resumed.error) == (S.FAILED, "the warehouse is closed")


async def test_a_result_nobody_submits_before_the_deadline_expires_the_call() -> None:
    session, left = await waiting(deadline=timedelta(seconds=30))

    resumed = await resumed_past_the_deadline(session, left, CALL, timedelta(seconds=30))
    assert (resumed.status, resumed.rejection_message) == (S.EXPIRED, EXPIRED_RESULT_MESSAGE)
    assert await session.submit_tool_result(CALL, result="1") is A.UNKNOWN_CALL  # the turn ended


async def test_a_second_answer_is_refused_as_already_answered() -> None:
    session, _ = await waiting()
    assert await session.submit_tool_result(CALL, result="1") is A.ACCEPTED

    assert await session.submit_tool_result(CALL, result="2") is A.ALREADY_ANSWERED
    assert await session.submit_tool_result(CALL, error="late") is A.ALREADY_ANSWERED


async def test_a_call_that_is_not_waiting_for_a_result_is_refused_by_kind() -> None:
    approval = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
    session = session_for((CALL, approval))
    await at_the_wait(session, "go")

    assert await session.submit_tool_result(CALL, result="1") is A.NOT_AWAITING_RESULT
    assert await session.submit_tool_result("nobody", result="1") is A.UNKNOWN_CALL
    assert session.interrupts.get()[0].kind is InterruptKind.APPROVAL  # untouched


async def test_an_approved_call_that_defers_waits_for_its_result_under_its_own_interrupt() -> None:
    approval = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True)
    session = session_for((CALL, approval))
    left = await at_the_wait(session, "go")
    assert await session.resolve_interrupt("turn-1.c1", approved=True)
    left = await session.drive(*left)

    (interrupt,) = session.interrupts.get()
    assert (interrupt.interrupt_id, interrupt.kind) == (RESULT_INTERRUPT, InterruptKind.TOOL_RESULT)
    assert await session.submit_tool_result(CALL, result='"ok"') is A.ACCEPTED
    assert await session.drive(*left) == IDLE
    record = session.scripted.model_turns[1].tool_calls[CALL]
    assert (record.status, record.output, record.approval) == (S.SUCCEEDED, '"ok"', "approved")


async def test_cancelling_the_turn_cancels_a_call_waiting_for_its_result() -> None:
    session, left = await waiting()

    assert await session.cancel_turn("never mind")
    assert await session.drive(*left) == IDLE

    assert session.state.current.last_turn_cancelled
    assert len(session.scripted.model_turns) == 1


async def test_other_calls_of_the_response_run_while_one_waits_for_its_result() -> None:
    session = session_for((CALL, READ), ("c2", READ))
    left = await at_the_wait(session, "go")

    assert session.tool_calls["c2"].status is S.SUCCEEDED
    assert await session.submit_tool_result(CALL, result="[1, 2]") is A.ACCEPTED
    assert await session.drive(*left) == IDLE
    resumed = session.scripted.model_turns[1].tool_calls
    assert (resumed[CALL].output, resumed["c2"].output) == ("[1, 2]", "ran here")


@pytest.mark.parametrize(
    ("request_", "field", "problem"),
    [
        pytest.param(SubmitToolResultRequest(tool_call_id=CALL, result="{nope"), "result", InputProblem.NOT_JSON),
        pytest.param(SubmitToolResultRequest(tool_call_id=CALL, result=""), "result", InputProblem.NOT_JSON),
        pytest.param(SubmitToolResultRequest(tool_call_id=CALL), "result", InputProblem.NOT_JSON, id="neither"),
        pytest.param(
            SubmitToolResultRequest(tool_call_id=CALL, result="1", error="x"), "result", InputProblem.NOT_JSON
        ),
        pytest.param(SubmitToolResultRequest(tool_call_id="a/b", result="1"), "tool_call_id", InputProblem.INVALID_ID),
        pytest.param(SubmitToolResultRequest(tool_call_id=CALL, error="  "), "error", InputProblem.BLANK),
        pytest.param(
            SubmitToolResultRequest(tool_call_id=CALL, result='"' + "x" * 300_000 + '"'),
            "result",
            InputProblem.TOO_LARGE,
        ),
        pytest.param(SubmitToolResultRequest(tool_call_id=CALL, error="a\x00b"), "error", InputProblem.NUL_CHARACTER),
    ],
)
async def test_a_bad_request_is_refused_with_an_invalid_input_error_and_the_session_goes_on(
    request_: SubmitToolResultRequest, field: str, problem: InputProblem
) -> None:
    refused = request_refusal(request_, AgentSessionOptions())
    assert refused is not None
    assert (refused.field, refused.problem) == (field, problem)

    session, left = await waiting()
    sent = await session.submit_tool_result(request_.tool_call_id, result=request_.result, error=request_.error)
    assert sent is A.REFUSED
    assert await session.submit_tool_result(CALL, result="true") is A.ACCEPTED  # still waiting, not killed
    assert await session.drive(*left) == IDLE


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (A.UNKNOWN_CALL, UnknownToolCallError),
        (A.ALREADY_ANSWERED, ToolResultAlreadySubmittedError),
        (A.NOT_AWAITING_RESULT, NotAwaitingToolResultError),
        (A.NOT_YET_WAITING, NotAwaitingToolResultError),
        (A.REFUSED, InvalidInputError),
    ],
)
def test_each_refusal_raises_its_own_error(answer: SubmitToolResultAnswer, error: type[Exception]) -> None:
    with pytest.raises(error):
        raise_for_tool_result_answer(answer, CALL)
    raise_for_tool_result_answer(A.ACCEPTED, CALL)


def external_session(*, policy: ToolPolicy = READ, sequential_first: bool = False) -> InMemorySessionHost:
    calls = [DeferredToolCall(CALL, "inventory", '{"sku": "A-7"}', policy, external=True)]
    if sequential_first:
        calls.insert(0, DeferredToolCall("s0", "lookup", "{}", READ, sequential=True))
    runner = ScriptedRunner(
        [ToolCallsRequested(framework_run_state="state", tool_calls=calls), TurnCompleted(new_messages=[])],
        tool_replies={"lookup": "ran here"},
    )
    return InMemorySessionHost(runner)


async def test_an_external_call_waits_for_its_result_without_a_tool_step() -> None:
    session = external_session()
    left = await at_the_wait(session, "go")

    assert session.tool_calls[CALL].status is S.AWAITING_RESULT
    assert session.scripted.executed_tool_call_ids == ()
    assert await session.submit_tool_result(CALL, result='{"stock": 3}') is A.ACCEPTED
    assert await session.drive(*left) == IDLE
    record = session.scripted.model_turns[1].tool_calls[CALL]
    assert (record.status, record.output, record.attempts) == (S.SUCCEEDED, '{"stock": 3}', 0)
    assert StepName.CALL_TOOL not in {step for step, _, _ in session.executed}


async def test_an_external_call_that_needs_approval_waits_for_its_result_once_approved() -> None:
    session = external_session(policy=ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True))
    left = await at_the_wait(session, "go")
    assert await session.submit_tool_result(CALL, result="1") is A.NOT_AWAITING_RESULT

    assert await session.resolve_interrupt("turn-1.c1", approved=True)
    left = await session.drive(*left)
    assert [i.kind for i in session.interrupts.get()] == [InterruptKind.TOOL_RESULT]
    assert await session.submit_tool_result(CALL, error="no stock") is A.ACCEPTED
    assert await session.drive(*left) == IDLE
    record = session.scripted.model_turns[1].tool_calls[CALL]
    assert (record.status, record.error, record.approval) == (S.FAILED, "no stock", "approved")
    assert session.scripted.executed_tool_call_ids == ()


async def test_an_external_call_queued_behind_a_sequential_call_waits_for_its_result_when_its_turn_comes() -> None:
    session = external_session(sequential_first=True)
    left = await at_the_wait(session, "go")

    assert session.tool_calls["s0"].status is S.SUCCEEDED
    assert session.tool_calls[CALL].status is S.AWAITING_RESULT
    assert await session.submit_tool_result(CALL, result="[]") is A.ACCEPTED
    assert await session.drive(*left) == IDLE
