"""History: one stored message per Pydantic AI message, its display projection, and the replay of earlier turns."""

import json

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ReinjectSystemPrompt
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from dex_agents import FrameworkMessage, MessageRole, RunnerContractError
from dex_agents.adapters.pydantic_ai import PydanticAIRunner
from dex_agents.adapters.pydantic_ai._agent_checks import has_system_prompt
from dex_agents.adapters.pydantic_ai._history import RunState, framework_message
from tests.unit.adapters.pydantic_ai.scripted_model import ScriptedModel, call, order_agent, script
from tests.unit.adapters.pydantic_ai.support import SessionDriver


def loaded(message: FrameworkMessage) -> ModelMessage:
    messages = ModelMessagesTypeAdapter.validate_json(message.framework_item)
    assert len(messages) == 1
    return messages[0]


def test_a_user_message_is_one_model_request_with_the_prompt_and_its_display_text() -> None:
    message = PydanticAIRunner(Agent("test")).build_user_message("Refund order 7")
    assert message.role is MessageRole.USER
    assert message.text == "Refund order 7"
    request = loaded(message)
    assert isinstance(request, ModelRequest)
    assert [p.content for p in request.parts if isinstance(p, UserPromptPart)] == ["Refund order 7"]
    assert len(request.parts) == 1


RESPONSE_ONE_CALL = ModelResponse(
    parts=[ThinkingPart("hm"), TextPart("Checking"), ToolCallPart("find_order", {"order_id": "7"}, tool_call_id="c1")]
)
RESPONSE_TWO_CALLS = ModelResponse(
    parts=[ToolCallPart("a", {}, tool_call_id="c1"), ToolCallPart("b", {}, tool_call_id="c2")]
)
ONE_RETURN = ModelRequest(parts=[ToolReturnPart("find_order", "delivered", tool_call_id="c1")])
TWO_RETURNS = ModelRequest(
    parts=[ToolReturnPart("a", "x", tool_call_id="c1"), ToolReturnPart("b", "y", tool_call_id="c2")]
)
OPENING = ModelRequest(parts=[SystemPromptPart("Be brief."), UserPromptPart("hi")])


@pytest.mark.parametrize(
    ("message", "role", "text", "tool_call_id", "tool_name"),
    [
        (RESPONSE_ONE_CALL, MessageRole.ASSISTANT, "Checking", "c1", "find_order"),
        (RESPONSE_TWO_CALLS, MessageRole.ASSISTANT, None, None, None),
        (
            ModelResponse(parts=[TextPart("Hello"), TextPart(", world")]),
            MessageRole.ASSISTANT,
            "Hello, world",
            None,
            None,
        ),
        (ONE_RETURN, MessageRole.TOOL, None, "c1", "find_order"),
        (TWO_RETURNS, MessageRole.TOOL, None, None, None),
        (OPENING, MessageRole.USER, None, None, None),
    ],
    ids=["response-one-call", "response-two-calls", "response-text", "one-return", "two-returns", "other-request"],
)
def test_display_projection_follows_the_specs_table(
    message: ModelMessage, role: MessageRole, text: str | None, tool_call_id: str | None, tool_name: str | None
) -> None:
    projected = framework_message(message)
    assert (projected.role, projected.text, projected.tool_call_id, projected.tool_name) == (
        role,
        text,
        tool_call_id,
        tool_name,
    )
    assert loaded(projected) == message


@pytest.mark.parametrize(
    ("message", "tool_call_ids"),
    [(RESPONSE_ONE_CALL, ("c1",)), (ONE_RETURN, ("c1",)), (TWO_RETURNS, ("c1", "c2")), (OPENING, ())],
    ids=["response-one-call", "one-return", "two-returns", "other-request"],
)
def test_display_projection_names_every_call_a_message_requests_or_answers(
    message: ModelMessage, tool_call_ids: tuple[str, ...]
) -> None:
    assert framework_message(message).tool_call_ids == tool_call_ids


async def test_every_stored_framework_item_reads_back_with_model_messages_type_adapter() -> None:
    session = SessionDriver(PydanticAIRunner(order_agent(ScriptedModel())))
    await session.turn(script({"think": "hm", "text": "ok", "calls": [call("c1", "find_order", order_id="7")]}))
    for message in session.messages:
        assert json.loads(message.framework_item)[0]["kind"] in ("request", "response")
        loaded(FrameworkMessage(role=message.role, framework_item=message.framework_item))


async def test_first_turn_system_prompts_are_stored_after_the_user_message_and_replayed_in_its_place() -> None:
    model = ScriptedModel()
    session = SessionDriver(PydanticAIRunner(order_agent(model, system_prompt="Be brief.")))
    await session.turn(script("hello", name="one"))
    stored = [(m.role, m.text) for m in session.messages]
    assert stored[:2] == [(MessageRole.USER, script("hello", name="one")), (MessageRole.USER, None)]
    opening = loaded(FrameworkMessage(role=MessageRole.USER, framework_item=session.messages[1].framework_item))
    assert isinstance(opening, ModelRequest)
    assert [type(p) for p in opening.parts] == [SystemPromptPart, UserPromptPart]
    second = await session.turn(script("@context", name="two"))
    seen = json.loads(second.completed.new_messages[-1].text or "")
    assert seen["system"] == ["Be brief."]
    assert seen["users"] == [script("hello", name="one"), script("@context", name="two")]


async def test_later_turns_store_no_copy_of_their_user_prompt() -> None:
    session = SessionDriver(PydanticAIRunner(order_agent(ScriptedModel(), system_prompt="Be brief.")))
    await session.turn(script("hello"))
    turn = await session.turn(script("again"))
    assert [m.role for m in turn.completed.new_messages] == [MessageRole.ASSISTANT]


async def test_a_failed_first_turn_is_replayed_with_its_note_and_the_system_prompt_is_reinjected() -> None:
    model = ScriptedModel()
    session = SessionDriver(PydanticAIRunner(order_agent(model, system_prompt="Be brief.")))
    failed = await session.turn(script([call("c1", "find_order", order_id="7")], {"fail": "model down"}, name="one"))
    assert failed.error is not None
    note = session.messages[-1].text
    assert note is not None
    assert note.startswith("[Dex] The previous turn failed after these tool calls ran:")
    second = await session.turn(script("@context", name="two"))
    seen = json.loads(second.completed.new_messages[-1].text or "")
    assert seen["system"] == ["Be brief."]
    assert seen["users"] == [
        script([call("c1", "find_order", order_id="7")], {"fail": "model down"}, name="one"),
        note,
        script("@context", name="two"),
    ]


async def test_a_system_prompt_function_registered_after_the_runner_was_built_is_reinjected() -> None:
    model = ScriptedModel()
    agent = order_agent(model)
    session = SessionDriver(PydanticAIRunner(agent))

    @agent.system_prompt
    def brief() -> str:
        return "Be brief."

    await session.turn(script({"fail": "down"}))
    turn = await session.turn(script("@context"))
    assert json.loads(turn.completed.new_messages[-1].text or "")["system"] == ["Be brief."]


def test_only_an_agent_with_a_system_prompt_has_one_to_reinject() -> None:
    assert not has_system_prompt(Agent("test"))
    assert not has_system_prompt(Agent("test", instructions="Use tools."))
    assert has_system_prompt(Agent("test", system_prompt="Be brief."))
    with_function: Agent[None, str] = Agent("test")

    @with_function.system_prompt
    def brief() -> str:
        return "Be brief."

    assert has_system_prompt(with_function)


async def test_an_agents_own_reinject_system_prompt_is_kept() -> None:
    model = ScriptedModel()
    agent = order_agent(model, system_prompt="Be brief.", capabilities=[ReinjectSystemPrompt(replace_existing=True)])
    session = SessionDriver(PydanticAIRunner(agent))
    await session.turn(script({"fail": "down"}))
    turn = await session.turn(script("@context"))
    assert json.loads(turn.completed.new_messages[-1].text or "")["system"] == ["Be brief."]


async def test_the_stored_opening_request_keeps_the_instructions_the_model_saw() -> None:
    session = SessionDriver(PydanticAIRunner(order_agent(ScriptedModel(), instructions="Use tools.")))
    turn = await session.turn(script("@context"))
    assert json.loads(turn.completed.new_messages[-1].text or "")["instructions"] == "Use tools."
    assert [m.role for m in turn.completed.new_messages] == [MessageRole.USER, MessageRole.ASSISTANT]
    opening = ModelMessagesTypeAdapter.validate_json(turn.completed.new_messages[0].framework_item)[0]
    assert isinstance(opening, ModelRequest)
    assert opening.instructions == "Use tools."
    assert turn.completed.new_messages[0].text is None  # the user message keeps the display text


def test_the_run_state_round_trips() -> None:
    state = RunState(messages=[OPENING, RESPONSE_TWO_CALLS], tool_call_ids=["c1", "c2"])
    assert RunState.decode(state.encode()) == state


@pytest.mark.parametrize("text", ["", "{}", '{"tool_call_ids": [1], "messages": "[]"}', '{"tool_call_ids": []}'])
def test_a_foreign_run_state_breaks_the_runner_contract(text: str) -> None:
    with pytest.raises(RunnerContractError):
        RunState.decode(text)
