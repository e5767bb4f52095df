"""Status transitions, table-driven over every (from, to) pair."""

import itertools
from collections.abc import Callable

import attrs
import pytest

from dex_agents.domain.errors import InvalidTransitionError
from dex_agents.domain.session import AGENT_STATUS_TRANSITIONS, SESSION_ACTIONS, AgentState, AgentStatus, SessionAction
from dex_agents.domain.tools import (
    FINAL_TOOL_CALL_STATUSES,
    TOOL_CALL_TRANSITIONS,
    ToolCallStatus,
    transition,
)
from dex_agents.testing import make_tool_call

S = ToolCallStatus

LEGAL_TOOL_CALL_MOVES = {
    (S.PENDING, S.SUCCEEDED),
    (S.PENDING, S.FAILED),
    (S.PENDING, S.OUTCOME_UNKNOWN),
    (S.PENDING, S.AWAITING_APPROVAL),
    (S.AWAITING_APPROVAL, S.APPROVED),
    (S.AWAITING_APPROVAL, S.REJECTED),
    (S.AWAITING_APPROVAL, S.EXPIRED),
    (S.APPROVED, S.SUCCEEDED),
    (S.APPROVED, S.FAILED),
    (S.APPROVED, S.OUTCOME_UNKNOWN),
    (S.PENDING, S.RECONCILING),
    (S.APPROVED, S.RECONCILING),
    (S.RECONCILING, S.SUCCEEDED),
    (S.RECONCILING, S.NOT_APPLIED),
    (S.RECONCILING, S.OUTCOME_UNKNOWN),
    (S.PENDING, S.CANCELLED),
    (S.APPROVED, S.CANCELLED),
    (S.QUEUED, S.PENDING),
    (S.QUEUED, S.AWAITING_APPROVAL),
    (S.QUEUED, S.CANCELLED),
    (S.PENDING, S.AWAITING_RESULT),
    (S.QUEUED, S.AWAITING_RESULT),
    (S.APPROVED, S.AWAITING_RESULT),
    (S.AWAITING_RESULT, S.SUCCEEDED),
    (S.AWAITING_RESULT, S.FAILED),
    (S.AWAITING_RESULT, S.EXPIRED),
    (S.AWAITING_RESULT, S.CANCELLED),
}
"""Copied from the Step table: a call runs (pending), or waits for approval first; an unknown
outcome of a reconcilable call is reconciled to succeeded, not applied or still unknown; a call
its turn's cancel reaches before it starts is cancelled; a call queued behind a sequential call
starts (pending, or awaiting approval) when its wave comes, or is cancelled; a call whose result
comes from outside waits for it (awaiting result) and ends with it, at its deadline, or cancelled; a
running call whose tool asked for approval before acting waits for it (pending to awaiting approval)."""

TOOL_CALL_PAIRS = list(itertools.product(ToolCallStatus, repeat=2))


def test_the_tool_call_transition_table_is_the_specified_one() -> None:
    table = {(source, target) for source, targets in TOOL_CALL_TRANSITIONS.items() for target in targets}
    assert table == LEGAL_TOOL_CALL_MOVES
    assert set(TOOL_CALL_TRANSITIONS) == set(ToolCallStatus)


@pytest.mark.parametrize(("source", "target"), TOOL_CALL_PAIRS, ids=[f"{a}->{b}" for a, b in TOOL_CALL_PAIRS])
def test_a_tool_call_moves_only_along_the_table(source: ToolCallStatus, target: ToolCallStatus) -> None:
    record = make_tool_call(status=source)
    if (source, target) in LEGAL_TOOL_CALL_MOVES:
        assert transition(record, to=target).status is target
    else:
        with pytest.raises(InvalidTransitionError, match=f"from '{source.value}' to '{target.value}'"):
            transition(record, to=target)


def test_final_statuses_are_the_seven_outcomes_and_have_no_way_out() -> None:
    final = {S.SUCCEEDED, S.FAILED, S.REJECTED, S.EXPIRED, S.OUTCOME_UNKNOWN, S.NOT_APPLIED, S.CANCELLED}
    assert final == FINAL_TOOL_CALL_STATUSES
    assert not S.RECONCILING.is_final
    for status in ToolCallStatus:
        assert status.is_final is (status in FINAL_TOOL_CALL_STATUSES)
        assert make_tool_call(status=status).is_final is status.is_final
    assert all(not TOOL_CALL_TRANSITIONS[status] for status in FINAL_TOOL_CALL_STATUSES)


def test_record_transitions_carry_their_detail_and_keep_everything_else() -> None:
    record = make_tool_call("c1", "refund", arguments='{"order": 7}', deferral_order=3)
    succeeded = record.succeed("refunded")
    failed = record.fail("no such order")
    unknown = record.mark_outcome_unknown("worker lost")
    waiting = attrs.evolve(record, status=S.AWAITING_APPROVAL, interrupt_id="turn-1.c1")
    rejected = waiting.reject("too costly")
    assert (succeeded.status, succeeded.output, succeeded.error) == (S.SUCCEEDED, "refunded", None)
    assert (failed.status, failed.error) == (S.FAILED, "no such order")
    assert (unknown.status, unknown.error) == (S.OUTCOME_UNKNOWN, "worker lost")
    assert (rejected.status, rejected.rejection_message) == (S.REJECTED, "too costly")
    assert waiting.approve().status is S.APPROVED
    for changed in (succeeded, failed, unknown):
        assert (changed.tool_call_id, changed.arguments, changed.deferral_order) == ("c1", '{"order": 7}', 3)
    assert rejected.interrupt_id == "turn-1.c1"


def test_a_tool_asking_approval_while_it_runs_moves_its_call_to_awaiting_approval_with_an_interrupt_to_raise() -> None:
    asking = make_tool_call("c1", "delete_file").ask_approval("turn-1.c1", attempt=2)
    assert (asking.status, asking.interrupt_id, asking.attempts) == (S.AWAITING_APPROVAL, "turn-1.c1", 2)
    assert asking.approval_to_raise
    assert asking.approval is None
    approved = attrs.evolve(asking, approval_to_raise=False).approve("ada", digest=asking.digest)
    assert approved.approval_mismatch() is None
    with pytest.raises(InvalidTransitionError):
        approved.ask_approval("turn-1.c1")


LEGAL_SESSION_MOVES = {
    (AgentStatus.WAITING_FOR_USER_MESSAGE, AgentStatus.RUNNING_MODEL),
    (AgentStatus.RUNNING_MODEL, AgentStatus.RUNNING_TOOLS),
    (AgentStatus.RUNNING_MODEL, AgentStatus.WAITING_FOR_USER_MESSAGE),
    (AgentStatus.RUNNING_TOOLS, AgentStatus.RUNNING_MODEL),
    (AgentStatus.RUNNING_TOOLS, AgentStatus.WAITING_FOR_USER_MESSAGE),  # a failure route ends a turn anywhere
}


def test_the_session_transition_table_is_the_specified_one() -> None:
    table = {(source, target) for source, targets in AGENT_STATUS_TRANSITIONS.items() for target in targets}
    assert table == LEGAL_SESSION_MOVES
    assert set(AGENT_STATUS_TRANSITIONS) == set(AgentStatus)
    assert [status.value for status in AgentStatus] == ["waiting_for_user_message", "running_model", "running_tools"]


SESSION_ACTION_MOVES: dict[SessionAction, Callable[[AgentState], AgentState]] = {
    SessionAction.START_TURN: AgentState.start_turn,
    SessionAction.WAIT_FOR_TOOLS: AgentState.wait_for_tools,
    SessionAction.RESUME_MODEL: AgentState.resume_model,
    SessionAction.COMPLETE_TURN: AgentState.complete_turn,
    SessionAction.FAIL_TURN: lambda state: state.fail_turn("boom"),
    SessionAction.CANCEL_TURN: AgentState.cancel_turn,
}
"""Every session action, as a method call."""

ACTION_SOURCES = {
    SessionAction.START_TURN: {AgentStatus.WAITING_FOR_USER_MESSAGE},
    SessionAction.WAIT_FOR_TOOLS: {AgentStatus.RUNNING_MODEL},
    SessionAction.RESUME_MODEL: {AgentStatus.RUNNING_TOOLS},
    SessionAction.COMPLETE_TURN: {AgentStatus.RUNNING_MODEL},
    SessionAction.FAIL_TURN: {AgentStatus.RUNNING_MODEL, AgentStatus.RUNNING_TOOLS},
    SessionAction.CANCEL_TURN: {AgentStatus.RUNNING_MODEL, AgentStatus.RUNNING_TOOLS},
}
"""Where each action may start, as the session docstring's table says."""

ACTION_PAIRS = list(itertools.product(SessionAction, AgentStatus))


@pytest.mark.parametrize(("action", "source"), ACTION_PAIRS, ids=[f"{a}@{s}" for a, s in ACTION_PAIRS])
def test_each_session_action_moves_only_from_its_own_statuses(action: SessionAction, source: AgentStatus) -> None:
    state = AgentState(status=source, turn_count=1, active_turn_id="turn-1")
    _sources, target = SESSION_ACTIONS[action]
    move = SESSION_ACTION_MOVES[action]
    if source in ACTION_SOURCES[action]:
        assert move(state).status is target
    else:
        with pytest.raises(InvalidTransitionError, match=f"from '{source.value}' to '{target.value}'"):
            move(state)


def test_a_turn_cannot_start_while_one_waits_for_tools_nor_resume_while_idle() -> None:
    with pytest.raises(InvalidTransitionError, match="cannot start turn"):
        AgentState(status=AgentStatus.RUNNING_TOOLS, turn_count=1, active_turn_id="turn-1").start_turn()
    with pytest.raises(InvalidTransitionError, match="cannot resume model"):
        AgentState().resume_model()
