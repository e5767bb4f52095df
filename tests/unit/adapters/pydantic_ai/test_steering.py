"""A message steered into a running turn reaches the Pydantic AI model after the tool results, in order."""

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dex_agents import AgentSessionOptions, MessageRole, ToolEffect, ToolPolicy
from dex_agents.adapters.pydantic_ai import PydanticAIRunner
from dex_agents.application.next import GoTo, StepName
from dex_agents.domain.messages import MessageDelivery
from dex_agents.testing import InMemorySessionHost


async def test_a_steered_message_is_sent_after_the_tool_returns_and_stored_in_that_place() -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(seen) == 1:
            return ModelResponse(parts=[ToolCallPart("find_order", {"order_id": "7"}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("Order 7 was delivered on Monday.")])

    agent: Agent[None, str] = Agent(FunctionModel(model))

    @agent.tool_plain
    def find_order(order_id: str) -> str:
        return f"order {order_id} delivered"

    options = AgentSessionOptions(tool_policies={"find_order": ToolPolicy(ToolEffect.READ)})
    host = InMemorySessionHost(PydanticAIRunner(agent), options=options)
    await host.start("Where is order 7?")
    fan_out = await host.run_model()
    assert fan_out == GoTo(step=StepName.CALL_TOOL, input="c1"), "one call: its tool Step alone, no join"
    assert await host.send_user_message("Also: when was it delivered?", delivery=MessageDelivery.STEER)

    await host.drive(fan_out)

    last_request = seen[1][-1]
    assert isinstance(last_request, ModelRequest)
    kinds = [type(part) for part in last_request.parts]
    assert kinds == [ToolReturnPart, UserPromptPart], "the tool result first, then the steered message"
    prompt = last_request.parts[1]
    assert isinstance(prompt, UserPromptPart)
    assert prompt.content == "Also: when was it delivered?"
    stored = host.messages.all
    assert [m.role for m in stored] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
    ]
    assert "Also: when was it delivered?" in stored[2].framework_item, "stored with the tool result it followed"
    assert stored[-1].text == "Order 7 was delivered on Monday."
