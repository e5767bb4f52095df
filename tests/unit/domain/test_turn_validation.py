"""The runner contract checks applied to what a runner returns."""

import pytest

from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.turns import (
    ToolCallsRequested,
    TurnCompleted,
    validate_tool_call_id,
    validate_turn_outcome,
    validate_user_message,
)
from dex_agents.testing import assistant_message, deferred_tool_call, framework_message, tool_calls_requested


def test_a_completed_turn_always_passes() -> None:
    validate_turn_outcome(TurnCompleted(new_messages=[assistant_message("done")]), earlier_tool_call_ids=["c1"])


def test_well_formed_tool_calls_pass() -> None:
    outcome = tool_calls_requested(deferred_tool_call("c1", "a"), deferred_tool_call("call_2-x.y", "b"))
    validate_turn_outcome(outcome, earlier_tool_call_ids=["c0"])


@pytest.mark.parametrize(
    ("outcome", "earlier", "message"),
    [
        pytest.param(tool_calls_requested(deferred_tool_call("", "a")), (), "must not be empty", id="empty-id"),
        pytest.param(tool_calls_requested(deferred_tool_call("a/b", "a")), (), "must not contain '/'", id="slash"),
        pytest.param(
            tool_calls_requested(deferred_tool_call("c1", "a"), deferred_tool_call("c1", "b")),
            (),
            "used twice in one turn",
            id="duplicate-in-response",
        ),
        pytest.param(
            tool_calls_requested(deferred_tool_call("c1", "a")),
            ("c0", "c1"),
            "used twice in one turn",
            id="duplicate-of-earlier-call",
        ),
        pytest.param(
            tool_calls_requested(deferred_tool_call("c1", "a"), run_state=""), (), "non-empty run state", id="no-state"
        ),
        pytest.param(ToolCallsRequested(framework_run_state="s", tool_calls=[]), (), "at least one", id="no-calls"),
    ],
)
def test_a_runner_that_breaks_the_contract_raises_runner_contract_error(
    outcome: ToolCallsRequested, earlier: tuple[str, ...], message: str
) -> None:
    with pytest.raises(RunnerContractError, match=message):
        validate_turn_outcome(outcome, earlier_tool_call_ids=earlier)


def test_a_tool_call_id_is_checked_on_its_own() -> None:
    validate_tool_call_id("ok")
    with pytest.raises(RunnerContractError):
        validate_tool_call_id("/")


@pytest.mark.parametrize("role", [MessageRole.ASSISTANT, MessageRole.TOOL, MessageRole.SYSTEM])
def test_a_user_message_with_another_role_raises_runner_contract_error(role: MessageRole) -> None:
    with pytest.raises(RunnerContractError, match=f"got role '{role.value}'"):
        validate_user_message(framework_message(role, "hi"))


def test_a_user_message_with_the_user_role_passes() -> None:
    validate_user_message(framework_message(MessageRole.USER, "hi"))
