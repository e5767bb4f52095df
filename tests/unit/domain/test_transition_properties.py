"""Properties of the transition tables over random walks: tool-call records and session states.

Every operation either moves along its table or is refused with
`InvalidTransitionError`, leaving the value as it was; walks end, and the
fields each move carries stay consistent with the table's status.
"""

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.errors import InvalidTransitionError
from dex_agents.domain.session import (
    AGENT_STATUS_TRANSITIONS,
    SESSION_ACTIONS,
    AgentState,
    AgentStatus,
    SessionAction,
    turn_id_for,
)
from dex_agents.domain.tools import (
    TOOL_CALL_TRANSITIONS,
    AgentToolCall,
    ApprovalStatus,
    ToolCallStatus,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.testing import make_tool_call

PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, database=None)
"""Walks are cheap; the unit tier stays in seconds."""

S = ToolCallStatus

ToolCallMove = tuple[str, ToolCallStatus | None, Callable[[AgentToolCall], AgentToolCall]]

TOOL_CALL_MOVES: list[ToolCallMove] = [
    ("ask_approval", S.AWAITING_APPROVAL, lambda r: r.ask_approval("turn-1.c1", attempt=1)),
    ("approve", S.APPROVED, lambda r: r.approve("ada")),
    ("reject", S.REJECTED, lambda r: r.reject("no", "ada")),
    ("expire", S.EXPIRED, lambda r: r.expire("too late")),
    ("succeed", S.SUCCEEDED, lambda r: r.succeed("ok", attempt=2)),
    ("fail", S.FAILED, lambda r: r.fail("boom", attempt=3)),
    ("mark_outcome_unknown", S.OUTCOME_UNKNOWN, lambda r: r.mark_outcome_unknown("lost")),
    ("after_exhausted_retries", None, lambda r: r.after_exhausted_retries("gave up")),
]
"""Each record method with the status it moves to (``None``: the effect decides)."""


def _target(record: AgentToolCall, target: ToolCallStatus | None) -> ToolCallStatus:
    if target is not None:
        return target
    return S.FAILED if record.policy.effect is ToolEffect.READ else S.OUTCOME_UNKNOWN


@st.composite
def fresh_records(draw: st.DrawFn) -> AgentToolCall:
    """A new record as `RunModel` stores it: pending, or awaiting approval with its interrupt."""
    effect = draw(st.sampled_from(ToolEffect))
    awaiting = draw(st.booleans())
    return make_tool_call(
        "c1",
        "tool",
        policy=ToolPolicy(effect, awaiting),
        status=S.AWAITING_APPROVAL if awaiting else S.PENDING,
        interrupt_id="turn-1.c1" if awaiting else None,
    )


@PROPERTY_SETTINGS
@given(fresh_records(), st.lists(st.sampled_from(TOOL_CALL_MOVES), max_size=8))
def test_a_tool_call_record_moves_only_along_its_table_and_ends_final_within_three_moves(
    record: AgentToolCall, moves: list[ToolCallMove]
) -> None:
    identity = (record.tool_call_id, record.turn_id, record.tool_name, record.arguments, record.policy)
    moved = 0
    for _name, target, move in moves:
        expected = _target(record, target)
        if expected in TOOL_CALL_TRANSITIONS[record.status]:
            record = move(record)
            moved += 1
            assert record.status is expected
        else:
            before = record
            try:
                move(record)
            except InvalidTransitionError:
                pass
            else:
                raise AssertionError(f"{record.status} -> {expected} is not in the table but was allowed")
            assert record == before
        assert (record.tool_call_id, record.turn_id, record.tool_name, record.arguments, record.policy) == identity
    assert moved <= 3  # asked for approval by its tool, approved, then ran
    if record.is_final:
        assert not TOOL_CALL_TRANSITIONS[record.status]
        outcome = record.outcome()
        assert (outcome.status, outcome.effect) == (record.status, record.policy.effect)
        assert (outcome.approval is None) is (record.interrupt_id is None)
        if outcome.approval is not None and record.status in {S.SUCCEEDED, S.FAILED, S.OUTCOME_UNKNOWN}:
            assert outcome.approval is ApprovalStatus.APPROVED


@PROPERTY_SETTINGS
@given(fresh_records(), st.lists(st.sampled_from(TOOL_CALL_MOVES), min_size=4, max_size=8))
def test_a_walk_that_tries_every_move_reaches_a_final_status(record: AgentToolCall, moves: list[ToolCallMove]) -> None:
    for _name, _target_status, move in [*moves, *TOOL_CALL_MOVES, *TOOL_CALL_MOVES]:
        try:
            record = move(record)
        except InvalidTransitionError:
            continue
    assert record.is_final


SessionMove = tuple[str, AgentStatus, Callable[[AgentState], AgentState]]

SESSION_MOVES: list[SessionMove] = [
    ("start_turn", AgentStatus.RUNNING_MODEL, AgentState.start_turn),
    ("wait_for_tools", AgentStatus.RUNNING_TOOLS, AgentState.wait_for_tools),
    ("resume_model", AgentStatus.RUNNING_MODEL, AgentState.resume_model),
    ("complete_turn", AgentStatus.WAITING_FOR_USER_MESSAGE, AgentState.complete_turn),
    ("fail_turn", AgentStatus.WAITING_FOR_USER_MESSAGE, lambda state: state.fail_turn("boom")),
]
"""Each session method with the status it moves to."""

LIFECYCLE_FROM: dict[str, AgentStatus | None] = {
    "start_turn": AgentStatus.WAITING_FOR_USER_MESSAGE,
    "wait_for_tools": AgentStatus.RUNNING_MODEL,
    "resume_model": AgentStatus.RUNNING_TOOLS,
    "complete_turn": AgentStatus.RUNNING_MODEL,
    "fail_turn": None,
}
"""Where the use cases call each move (``None``: from either running status), as the session docstring's table says."""


@PROPERTY_SETTINGS
@given(st.lists(st.sampled_from(SESSION_MOVES), max_size=20))
def test_a_session_move_is_refused_exactly_when_its_action_does_not_start_there_and_changes_nothing_then(
    moves: list[SessionMove],
) -> None:
    state = AgentState()
    for name, target, apply in moves:
        if state.status in SESSION_ACTIONS[SessionAction(name)][0]:
            state = apply(state)
            assert state.status is target
        else:
            before = state
            try:
                apply(state)
            except InvalidTransitionError:
                pass
            else:
                raise AssertionError(f"{name} from {state.status} is not in the table but was allowed")
            assert state == before


@st.composite
def lifecycles(draw: st.DrawFn) -> list[SessionMove | int]:
    """A walk the use cases can make: each move from where they call it, messages stored in between."""
    walk: list[SessionMove | int] = []
    status = AgentStatus.WAITING_FOR_USER_MESSAGE
    for _ in range(draw(st.integers(0, 20))):
        if draw(st.booleans()):
            walk.append(draw(st.integers(0, 5)))
            continue
        choices = [
            move
            for move in SESSION_MOVES
            if LIFECYCLE_FROM[move[0]] == status
            or (LIFECYCLE_FROM[move[0]] is None and status is not AgentStatus.WAITING_FOR_USER_MESSAGE)
        ]
        move = draw(st.sampled_from(choices))
        walk.append(move)
        status = move[1]
    return walk


@PROPERTY_SETTINGS
@given(lifecycles())
def test_a_session_lifecycle_keeps_turn_count_active_turn_messages_and_last_error_consistent(
    walk: list[SessionMove | int],
) -> None:
    state = AgentState()
    turns = stored = 0
    error: str | None = None
    for step in walk:
        if isinstance(step, int):
            state = state.with_messages_appended(step)
            stored += step
        else:
            name, target, apply = step
            state = apply(state)
            assert state.status is target
            turns += name == "start_turn"
            if name in ("complete_turn", "fail_turn"):
                error = "boom" if name == "fail_turn" else None
        assert (state.turn_count, state.message_count, state.last_turn_error) == (turns, stored, error)
        waiting = state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
        assert state.active_turn_id == (None if waiting else turn_id_for(turns))
        assert state.next_sequence == stored + 1


def test_every_session_status_can_reach_waiting_for_a_user_message() -> None:
    reachable = {AgentStatus.WAITING_FOR_USER_MESSAGE}
    while more := {s for s, targets in AGENT_STATUS_TRANSITIONS.items() if targets & reachable} - reachable:
        reachable |= more
    assert reachable == set(AgentStatus)
