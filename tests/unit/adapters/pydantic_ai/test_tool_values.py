"""Tool results travel as values and tool retries reach the model as in a plain run (in memory, no engine)."""

import json
from typing import Any

import attrs
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, BinaryContent, ModelRetry, RunContext, ToolReturn
from pydantic_ai.capabilities import PrepareTools
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryInfo,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from dex_agents import AgentSessionOptions, ToolCallsRequested, ToolCallStatus, ToolEffect
from dex_agents.adapters.pydantic_ai import PydanticAIRunner
from dex_agents.adapters.pydantic_ai._results import KEPT_VALUE_MAX_BYTES, deferred_tool_results
from dex_agents.adapters.pydantic_ai._retries import turn_retries
from dex_agents.adapters.pydantic_ai._tool_state import ToolCallState
from dex_agents.application.next import GoTo, StepName
from dex_agents.application.runner import TurnFailedError
from dex_agents.testing import make_tool_call
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.adapters.pydantic_ai.support import SessionDriver


class Order(BaseModel):
    order_id: str
    total: float


def last_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]


def turn_step(messages: list[ModelMessage]) -> int:
    return sum(isinstance(message, ModelResponse) for message in messages)


def build(respond: Any, **kwargs: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(respond), **kwargs)

    @agent.tool_plain
    def count() -> int:
        return 8

    @agent.tool_plain
    def order() -> Order:
        return Order(order_id="7", total=12.5)

    @agent.tool_plain
    def chart() -> ToolReturn[str]:
        image = BinaryContent(b"\x89PNG", media_type="image/png")
        return ToolReturn("chart", content=["see:", image], metadata={"n": 1})

    @agent.tool
    def always_fail(ctx: RunContext[None]) -> str:
        raise ModelRetry(f"try again ({ctx.retry})")

    return agent


@pytest.fixture(params=[True, False], ids=["direct", "run"])
def direct(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def session(agent: Agent[None, str], *, direct: bool) -> SessionDriver:
    # Reads: no approval, so a call may take the direct path (an approved call always runs the agent).
    runner = PydanticAIRunner(agent, direct_tool_calls=direct, live_runs=False)
    return SessionDriver(runner, options=AgentSessionOptions(default_tool_effect=ToolEffect.READ))


async def test_the_resumed_run_gets_back_the_values_the_tools_returned(direct: bool) -> None:
    seen: list[Any] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return ModelResponse(
                parts=[
                    ToolCallPart("count", {}, tool_call_id="c1"),
                    ToolCallPart("order", {}, tool_call_id="c2"),
                    ToolCallPart("chart", {}, tool_call_id="c3"),
                ]
            )
        seen.extend(messages[-1].parts)
        return ModelResponse(parts=[TextPart("done")])

    turn = await session(build(respond), direct=direct).turn("go")

    assert turn.completed.new_messages[-1].text == "done"
    returns = {part.tool_call_id: part for part in seen if isinstance(part, ToolReturnPart)}
    assert returns["c1"].content == 8
    assert returns["c2"].content == Order(order_id="7", total=12.5)
    assert returns["c3"].content == "chart"
    assert returns["c3"].metadata == {"n": 1}
    [extra] = [part for part in seen if isinstance(part, UserPromptPart)]
    assert extra.content[0] == "see:"
    assert isinstance(extra.content[1], BinaryContent)
    assert extra.content[1].data == b"\x89PNG"
    # The display text stays what the model would read.
    assert turn.record("c1").output == "8"
    assert turn.record("c2").output == '{"order_id":"7","total":12.5}'


async def test_model_retries_are_counted_across_the_turn_and_past_the_budget_the_turn_fails(direct: bool) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("always_fail", {}, tool_call_id=f"c{turn_step(messages)}")])

    turn = await session(build(respond, retries=2), direct=direct).turn("go")

    assert [record.error for record in turn.records] == ["try again (0)", "try again (1)", "try again (2)"]
    assert isinstance(turn.error, TurnFailedError)
    assert "Tool 'always_fail' exceeded max retries count of 2" in str(turn.error)
    assert turn.step_failures == ()
    retried = [
        part
        for outcome in turn.outcomes[1:]
        for message in ModelMessagesTypeAdapter.validate_json(_state(outcome))
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert [(part.outcome, part.content, part.retry) for part in retried[-2:]] == [
        ("retried", "try again (0)", RetryInfo(cause="model_retry", attempt=1, max_retries=2)),
        ("retried", "try again (1)", RetryInfo(cause="model_retry", attempt=2, max_retries=2)),
    ]


def _state(outcome: object) -> str:
    assert isinstance(outcome, ToolCallsRequested)
    messages: str = json.loads(outcome.framework_run_state)["messages"]
    return messages


def test_a_tool_is_charged_once_per_step_and_a_success_resets_its_count() -> None:
    def retried(name: str, attempt: int | None) -> ToolReturnPart:
        return ToolReturnPart(name, "no", outcome="retried", retry=RetryInfo(cause="model_retry", attempt=attempt))

    messages: list[ModelMessage] = [
        ModelRequest(parts=[retried("a", 1), retried("a", 1), retried("b", 1)]),
        ModelRequest(parts=[retried("a", 2), ToolReturnPart("b", "ok")]),
        ModelRequest(parts=[retried("c", None)]),  # a free refusal (an unavailable tool)
    ]
    assert turn_retries(messages) == {"a": 2}


def test_records_written_before_values_were_kept_resume_from_their_text() -> None:
    records = {
        "c1": make_tool_call("c1", "count", status=ToolCallStatus.SUCCEEDED, output="8"),
        "c2": make_tool_call("c2", "flaky", status=ToolCallStatus.FAILED, error="nope"),
    }
    results = deferred_tool_results(["c1", "c2"], records, typed=frozenset())
    assert results.calls["c1"] == ToolReturn("8")
    assert str(results.calls["c2"]) == "The tool call failed: nope"
    assert ToolCallState.decode(None) == ToolCallState()
    assert ToolCallState.decode("not json") == ToolCallState()


def test_a_kept_value_resumes_as_the_tool_returned_it() -> None:
    part = ToolReturnPart("count", 8, tool_call_id="c1", metadata={"k": True})
    state = ToolCallState(retries=1).with_result([part, UserPromptPart(["extra"])]).encode()
    record = attrs.evolve(
        make_tool_call("c1", "count", status=ToolCallStatus.SUCCEEDED, output="8"), framework_state=state
    )
    answer = deferred_tool_results(["c1"], {"c1": record}, typed=frozenset()).calls["c1"]
    assert answer == ToolReturn(8, content=["extra"], metadata={"k": True})
    assert ToolCallState.decode(state).retries == 1


def test_a_call_whose_tool_ran_out_of_retries_fails_the_turn_with_pydantic_ais_message() -> None:
    state = ToolCallState(exceeded="Tool 'x' exceeded max retries count of 1.").encode()
    record = attrs.evolve(make_tool_call("c1", "x", status=ToolCallStatus.FAILED, error="no"), framework_state=state)
    with pytest.raises(TurnFailedError, match="exceeded max retries count of 1"):
        deferred_tool_results(["c1"], {"c1": record}, typed=frozenset())


async def test_a_plain_text_return_keeps_no_value_beside_its_text(direct: bool) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return ModelResponse(parts=[ToolCallPart("label", {}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart(str(last_returns(messages)[0].content))])

    agent: Agent[None, str] = Agent(FunctionModel(respond))

    @agent.tool_plain
    def label() -> str:
        return "plain"

    turn = await session(agent, direct=direct).turn("go")

    assert turn.completed.new_messages[-1].text == "plain"
    assert ToolCallState.decode(turn.record("c1").framework_state).result is None


async def test_a_value_too_large_to_keep_resumes_from_its_text_as_before(direct: bool) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return ModelResponse(parts=[ToolCallPart("big", {}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart(type(last_returns(messages)[0].content).__name__)])

    agent: Agent[None, str] = Agent(FunctionModel(respond))

    @agent.tool_plain
    def big() -> dict[str, str]:
        return {"data": "x" * KEPT_VALUE_MAX_BYTES}

    turn = await session(agent, direct=direct).turn("go")

    assert ToolCallState.decode(turn.record("c1").framework_state).result is None
    assert turn.completed.new_messages[-1].text == "str"


async def test_a_resumed_model_step_prepares_its_tools_with_the_turns_retry_counts() -> None:
    seen: list[dict[str, int]] = []

    async def prepare(ctx: RunContext[None], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        seen.append(dict(ctx.retries))
        return tool_defs

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = turn_step(messages)
        if step < 2:
            return ModelResponse(parts=[ToolCallPart("flaky", {}, tool_call_id=f"c{step}")])
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, str] = Agent(FunctionModel(respond), retries=3, capabilities=[PrepareTools(prepare)])

    @agent.tool
    def flaky(ctx: RunContext[None]) -> str:
        raise ModelRetry("again")

    turn = await session(agent, direct=False).turn("go")

    assert turn.completed.new_messages[-1].text == "done"
    # The model requests after the first and the second retry see the counts a plain run's do.
    assert {"flaky": 1} in seen
    assert {"flaky": 2} in seen


async def test_on_the_session_host_values_come_back_and_a_tool_past_its_retries_fails_the_turn() -> None:
    requests: list[list[Any]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = turn_step(messages)
        requests.append([part.content for part in last_returns(messages)])
        if step == 0:
            return ModelResponse(parts=[ToolCallPart("count", {}, tool_call_id="c0")])
        return ModelResponse(parts=[ToolCallPart("always_fail", {}, tool_call_id=f"c{step}")])

    runner = PydanticAIRunner(build(respond, retries=1), live_runs=False)
    host = InMemorySessionHost(runner, options=AgentSessionOptions(default_tool_effect=ToolEffect.READ))
    await host.drive(await host.start())
    await host.send_user_message("go")
    await host.drive(GoTo(step=StepName.AWAIT_USER_MESSAGE))

    # The model got 8 back, then Pydantic AI's retry prompt; the second failure passed the budget of 1.
    assert requests == [[], [8], ["try again (0)"]]
    error = host.state.current.last_turn_error
    assert error is not None
    assert "Tool 'always_fail' exceeded max retries count of 1" in error
