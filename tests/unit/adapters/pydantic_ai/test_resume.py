"""Resume: the next model call gets every final record as Pydantic AI's deferred tool result."""

import pytest
from pydantic_ai import Agent, RunContext, Tool, ToolFailed
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, ToolSearchReturnPart

from dex_agents import (
    EXPIRED_REJECTION_MESSAGE,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentMessage,
    AgentSessionOptions,
    MessageRole,
    RunnerContractError,
    ToolCallsRequested,
    ToolCallStatus,
    ToolEffect,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.adapters.pydantic_ai import PydanticAIRunner
from dex_agents.testing import make_tool_call, make_turn_context
from tests.unit.adapters.pydantic_ai.scripted_model import ScriptedModel, call, script
from tests.unit.adapters.pydantic_ai.support import SessionDriver


def build_agent(model: ScriptedModel) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(
        model.model(),
        system_prompt="You help customers.",
        tools=[Tool(lambda order_id: f"refunded {order_id}", name="hidden_refund", defer_loading=True)],
    )

    @agent.tool_plain
    def find_order(order_id: str) -> str:
        return f"order {order_id} delivered"

    @agent.tool(requires_approval=True)
    def refund_order(ctx: RunContext[None], order_id: str) -> str:
        return "refunded"

    @agent.tool_plain
    def locked() -> str:
        raise ToolFailed("the order is locked")

    @agent.tool_plain
    def crash() -> str:
        raise ValueError("disk full")

    return agent


def driver(model: ScriptedModel, **kwargs: object) -> SessionDriver:
    options = AgentSessionOptions(
        tool_policies={
            "find_order": ToolPolicy(ToolEffect.READ),
            "crash": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
        }
    )
    return SessionDriver(PydanticAIRunner(build_agent(model)), options=options, **kwargs)  # type: ignore[arg-type]


async def test_a_succeeded_call_returns_its_output() -> None:
    turn = await driver(ScriptedModel()).turn(script([call("c1", "find_order", order_id="7")]))
    assert turn.record("c1").status is ToolCallStatus.SUCCEEDED
    assert turn.completed.new_messages[-1].text == "find_order[success]=order 7 delivered"


async def test_a_rejected_call_is_denied_with_the_rejection_message() -> None:
    session = driver(ScriptedModel(), approve=lambda record: "not today")
    turn = await session.turn(script([call("c1", "refund_order", order_id="7")]))
    assert turn.record("c1").status is ToolCallStatus.REJECTED
    assert turn.completed.new_messages[-1].text == "refund_order[denied]=not today"


async def test_a_rejection_without_a_reason_is_denied_with_pydantic_ais_default_text() -> None:
    session = driver(ScriptedModel(), approve=lambda record: False)
    turn = await session.turn(script([call("c1", "refund_order", order_id="7")]))
    assert turn.completed.new_messages[-1].text == "refund_order[denied]=The tool call was denied."


async def test_an_expired_call_is_denied_with_the_expiry_text_not_a_rejection() -> None:
    session = driver(ScriptedModel(), approve=lambda record: None)
    turn = await session.turn(script([call("c1", "refund_order", order_id="7")]))
    assert turn.record("c1").status is ToolCallStatus.EXPIRED
    assert turn.completed.new_messages[-1].text == f"refund_order[denied]={EXPIRED_REJECTION_MESSAGE}"


async def test_a_tool_failed_call_reaches_the_model_with_the_tools_own_message_as_in_a_plain_run() -> None:
    turn = await driver(ScriptedModel()).turn(script([call("c1", "locked")]))
    assert turn.record("c1").status is ToolCallStatus.FAILED
    assert turn.record("c1").error == "the order is locked"
    assert turn.completed.new_messages[-1].text == "locked[failed]=the order is locked"


async def test_a_failed_record_without_a_kept_value_reaches_the_model_with_the_failure_text() -> None:
    # A record a tool Step wrote before results were kept as values holds text only.
    model = ScriptedModel()
    runner = PydanticAIRunner(build_agent(model))
    user = AgentMessage.stored(runner.build_user_message(script([call("c1", "locked")])), sequence=1, turn_id="turn-1")
    first = await runner.run_model_step(make_turn_context(messages=[user]))
    assert isinstance(first, ToolCallsRequested)
    old = make_tool_call("c1", "locked", status=ToolCallStatus.FAILED, error="the order is locked")
    done = await runner.run_model_step(
        make_turn_context(messages=[user], framework_run_state=first.framework_run_state, tool_calls=[old])
    )
    assert isinstance(done, TurnCompleted)
    assert done.new_messages[-1].text == "locked[failed]=The tool call failed: the order is locked"


async def test_an_outcome_unknown_call_is_a_tool_failure_with_the_cores_outcome_unknown_text() -> None:
    turn = await driver(ScriptedModel()).turn(script([call("c1", "crash")]))
    assert turn.record("c1").status is ToolCallStatus.OUTCOME_UNKNOWN
    assert turn.completed.new_messages[-1].text == f"crash[failed]={OUTCOME_UNKNOWN_TOOL_RESULT}"


async def test_tool_search_results_are_restored_as_typed_parts_and_reveal_the_tool_to_the_next_model_call() -> None:
    model = ScriptedModel()
    turn = await driver(model).turn(
        script([call("s1", "search_tools", queries=["refund"])], [call("r1", "hidden_refund", order_id="7")])
    )
    assert turn.record("s1").output == '{"discovered_tools":[{"name":"hidden_refund"}]}'
    assert turn.record("r1").output == "refunded 7"
    assert turn.completed.new_messages[-1].text == "hidden_refund[success]=refunded 7"
    search_answer = ModelMessagesTypeAdapter.validate_json(turn.completed.new_messages[2].framework_item)[0]
    assert isinstance(search_answer, ModelRequest)
    assert isinstance(search_answer.parts[0], ToolSearchReturnPart)
    assert search_answer.parts[0].content == {"discovered_tools": [{"name": "hidden_refund"}]}


async def test_the_completed_turn_stores_every_message_after_the_user_message() -> None:
    session = driver(ScriptedModel())
    await session.turn(script("hello"))
    turn = await session.turn(script([call("c1", "find_order", order_id="7")]))
    assert [(m.role, m.tool_call_id) for m in turn.completed.new_messages] == [
        (MessageRole.ASSISTANT, "c1"),
        (MessageRole.TOOL, "c1"),
        (MessageRole.ASSISTANT, None),
    ]
    stored = [m for m in session.messages if m.turn_id == turn.turn_id]
    assert stored[0].role is MessageRole.USER
    assert len(stored) == 4


async def test_a_turn_with_several_model_calls_resumes_each_time_with_the_last_calls_only() -> None:
    model = ScriptedModel()
    turn = await driver(model).turn(
        script([call("c1", "find_order", order_id="1")], [call("c2", "find_order", order_id="2")])
    )
    assert [r.tool_call_id for r in turn.records] == ["c1", "c2"]
    assert turn.completed.new_messages[-1].text == "find_order[success]=order 2 delivered"
    assert len(model.calls) == 3
    assert [o.usage.model_calls for o in turn.outcomes] == [1, 1, 1]


async def resume_with(records: list[object]) -> object:
    model = ScriptedModel()
    runner = PydanticAIRunner(build_agent(model))
    user = AgentMessage.stored(
        runner.build_user_message(script([call("c1", "find_order", order_id="7")])), sequence=1, turn_id="turn-1"
    )
    first = await runner.run_model_step(make_turn_context(messages=[user]))
    assert isinstance(first, ToolCallsRequested)
    return await runner.run_model_step(
        make_turn_context(
            messages=[user],
            framework_run_state=first.framework_run_state,
            tool_calls=records,  # type: ignore[arg-type]
        )
    )


async def test_resuming_before_a_call_is_final_breaks_the_runner_contract() -> None:
    with pytest.raises(RunnerContractError, match="'c1' has no result yet"):
        await resume_with([make_tool_call("c1", "find_order", status=ToolCallStatus.PENDING)])


async def test_resuming_without_a_record_of_a_requested_call_breaks_the_runner_contract() -> None:
    with pytest.raises(RunnerContractError, match="no record of tool call 'c1'"):
        await resume_with([])


async def test_a_resumed_run_stamps_the_session_as_conversation_id() -> None:
    turn = await driver(ScriptedModel()).turn(script([call("c1", "find_order", order_id="7")]))
    for message in turn.completed.new_messages:
        loaded = ModelMessagesTypeAdapter.validate_json(message.framework_item)[0]
        assert loaded.conversation_id == "session-1"
