"""What a runner returns is checked where it comes back: a wrong type fails with an error naming the contract."""

from typing import cast

import pytest

from dex_agents import (
    FrameworkMessage,
    ToolCallStatus,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.domain.contract import check_turn_outcome
from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.turns import AgentTurnOutcome, DeferredToolCall
from dex_agents.testing import InMemorySessionHost, ScriptedRunner, deferred_tool_call, tool_calls_requested

NOT_OUTCOMES = [
    ("hello", "must return TurnCompleted or ToolCallsRequested, got str 'hello'"),
    (None, "must return TurnCompleted or ToolCallsRequested, got NoneType None"),
    (
        TurnCompleted(new_messages=cast(list[FrameworkMessage], ["hi"])),
        "new_messages of FrameworkMessage, got str 'hi'",
    ),
    (TurnCompleted(new_messages=[], usage=cast(object, 3)), "usage is an AgentUsage, got int 3"),  # type: ignore[arg-type]
    (
        tool_calls_requested(cast(DeferredToolCall, {"id": "c1"})),
        "tool_calls of DeferredToolCall, got dict {'id': 'c1'}",
    ),
    (
        tool_calls_requested(DeferredToolCall("c1", "t", cast(str, {"a": 1}), ToolPolicy(ToolEffect.READ))),
        "DeferredToolCall whose arguments is text, got dict",
    ),
    (
        tool_calls_requested(DeferredToolCall("c1", "t", "{}", cast(ToolPolicy, "read"))),
        "DeferredToolCall whose policy is a ToolPolicy",
    ),
]


@pytest.mark.parametrize(("returned", "said"), NOT_OUTCOMES)
def test_a_model_step_result_that_breaks_the_contract_is_named_with_what_came_back(returned: object, said: str) -> None:
    with pytest.raises(RunnerContractError, match=r"AgentFrameworkRunner\.run_model_step") as raised:
        check_turn_outcome(returned)
    assert said in str(raised.value)


async def test_a_model_step_that_returns_text_fails_its_turn_with_the_contract_error() -> None:
    host = InMemorySessionHost(ScriptedRunner([lambda _turn: cast(AgentTurnOutcome, "hello")] * 3))
    await host.drive(await host.start("go"))

    state = (await host.get_agent_snapshot()).state
    assert state is not None
    assert state.last_turn_error is not None
    assert "run_model_step must return TurnCompleted or ToolCallsRequested, got str 'hello'" in state.last_turn_error
    assert "AttributeError" not in state.last_turn_error


async def test_a_tool_step_that_returns_text_records_the_contract_error() -> None:
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "search", "{}", policy=ToolPolicy(ToolEffect.READ)))],
        tool_replies={"search": lambda _call: cast(ToolExecutionResult, 42)},
    )
    runner.script_model(TurnCompleted(new_messages=[]))
    host = InMemorySessionHost(runner)
    await host.drive(await host.start("go"))

    (record,) = runner.model_turns[1].tool_calls.values()
    assert record.status is ToolCallStatus.FAILED
    assert record.error is not None
    assert "execute_deferred_tool_call must return a ToolExecutionResult, got int 42" in record.error


async def test_a_user_message_that_is_not_a_framework_message_fails_the_new_turn() -> None:
    host = InMemorySessionHost(ScriptedRunner(build_user_message=lambda text: cast(FrameworkMessage, text)))
    await host.drive(await host.start("go"))

    state = (await host.get_agent_snapshot()).state
    assert state is not None
    assert state.last_turn_error is not None
    assert "build_user_message must return a FrameworkMessage, got str 'go'" in state.last_turn_error
