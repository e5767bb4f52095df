"""A model that cannot stream (a `FunctionModel` without ``stream_function``) runs whole turns."""

from collections.abc import AsyncIterator

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentedModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.settings import ModelSettings

from dex_agents import ToolCallsRequested, ToolCallStatus
from dex_agents.adapters.pydantic_ai import PydanticAIRunner
from dex_agents.adapters.pydantic_ai._streaming import can_stream
from dex_agents.domain.events import TextDeltaPayload
from tests.unit.adapters.pydantic_ai.support import SessionDriver


def _answers_after_one_lookup(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    if not returns:
        lookup = ToolCallPart("lookup", {"order_id": "7"}, tool_call_id="c1")
        return ModelResponse(parts=[TextPart("Checking."), lookup])
    return ModelResponse(parts=[TextPart(f"Order 7 is {returns[-1].content}.")])


def _lookup_agent(model: Model) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model)

    @agent.tool_plain
    def lookup(order_id: str) -> str:
        return "delivered"

    return agent


class _RequestOnlyModel(Model):
    """A custom model that implements ``request`` and not ``request_stream``."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Hello from request().")], model_name=self.model_name)

    @property
    def model_name(self) -> str:
        return "request-only"

    @property
    def system(self) -> str:
        return "test"


async def _never_streams(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    yield "streamed"


async def test_a_function_model_without_stream_function_completes_a_turn_with_a_tool_call() -> None:
    driver = SessionDriver(PydanticAIRunner(_lookup_agent(FunctionModel(_answers_after_one_lookup))))

    turn = await driver.turn("Where is order 7?")

    assert turn.error is None
    assert isinstance(turn.outcomes[0], ToolCallsRequested)
    assert turn.record("c1").status is ToolCallStatus.SUCCEEDED
    assert turn.completed.new_messages[-1].text == "Order 7 is delivered."
    assert turn.completed.usage.model_calls == 1


async def test_a_non_streamed_response_still_writes_its_text_as_one_live_delta_per_part() -> None:
    driver = SessionDriver(PydanticAIRunner(_lookup_agent(FunctionModel(_answers_after_one_lookup))))

    await driver.turn("Where is order 7?")

    texts = [payload.text for payload in driver.sink.payloads(TextDeltaPayload)]
    assert texts == ["Checking.", "Order 7 is delivered."]


async def test_a_custom_model_without_request_stream_completes_a_turn() -> None:
    turn = await SessionDriver(PydanticAIRunner(Agent(_RequestOnlyModel()))).turn("Hi")

    assert turn.completed.new_messages[-1].text == "Hello from request()."


async def test_the_runner_model_override_without_stream_function_is_served_unstreamed() -> None:
    runner = PydanticAIRunner(_lookup_agent(TestModel()), model=FunctionModel(_answers_after_one_lookup))

    turn = await SessionDriver(runner).turn("Where is order 7?")

    assert turn.completed.new_messages[-1].text == "Order 7 is delivered."


def test_can_stream_looks_through_wrapper_models() -> None:
    assert not can_stream(FunctionModel(_answers_after_one_lookup))
    assert not can_stream(InstrumentedModel(FunctionModel(_answers_after_one_lookup)))
    assert not can_stream(_RequestOnlyModel())
    assert can_stream(FunctionModel(_answers_after_one_lookup, stream_function=_never_streams))
    assert can_stream(InstrumentedModel(TestModel()))
    assert can_stream(TestModel())
