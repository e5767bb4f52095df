"""A session's event listeners see what one plain run shows them: each event once, in order, with its run_step."""

from collections.abc import AsyncIterable
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ProcessEventStream
from pydantic_ai.messages import AgentStreamEvent, ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from dex_agents import AgentSessionOptions, ToolEffect
from dex_agents.adapters.pydantic_ai import PydanticAIRunner
from tests.unit.adapters.pydantic_ai.support import SessionDriver

READS = AgentSessionOptions(default_tool_effect=ToolEffect.READ)


def _responses(messages: list[ModelMessage]) -> int:
    return sum(isinstance(message, ModelResponse) for message in messages)


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    match _responses(messages):
        case 0:
            return ModelResponse(parts=[ToolCallPart("look", {"n": 1}, "c1"), ToolCallPart("look", {"n": 2}, "c2")])
        case 1:
            return ModelResponse(parts=[ToolCallPart("look", {"n": 3}, "c3")])
        case _:
            return ModelResponse(parts=[TextPart("done")])


async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
    for index, part in enumerate(respond(messages, info).parts):
        if isinstance(part, TextPart):
            yield part.content
        else:
            assert isinstance(part, ToolCallPart)
            yield {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}


def seen(event: AgentStreamEvent, run_step: int) -> tuple[object, ...]:
    part = getattr(event, "part", None)
    return (run_step, type(event).__name__, getattr(part, "tool_call_id", None), getattr(part, "content", None))


def listening_agent() -> tuple[Agent[None, str], list[tuple[object, ...]], list[tuple[object, ...]]]:
    handled: list[tuple[object, ...]] = []
    listened: list[tuple[object, ...]] = []

    async def handler(ctx: RunContext[None], events: AsyncIterable[AgentStreamEvent]) -> None:
        handled.extend([seen(event, ctx.run_step) async for event in events])

    model = FunctionModel(respond, stream_function=stream)
    agent: Agent[None, str] = Agent(model, capabilities=[ProcessEventStream(handler)])

    @agent.on_event
    async def listen(ctx: RunContext[None], event: AgentStreamEvent) -> None:
        listened.append(seen(event, ctx.run_step))

    # Async, so that the plain run's parallel calls end in their order (a sync tool runs in a thread, and two
    # threads may end either way round on a loaded machine: the plain run's own event order would vary).
    @agent.tool_plain
    async def look(n: int) -> str:
        return f"looked {n}"

    return agent, handled, listened


async def test_a_handler_and_a_listener_see_each_event_once_in_a_plain_runs_order() -> None:
    agent, handled, listened = listening_agent()
    await agent.run("go")
    plain_handled, plain_listened = list(handled), list(listened)
    handled.clear()
    listened.clear()

    turn = await SessionDriver(PydanticAIRunner(agent, live_runs=False, direct_tool_calls=False), options=READS).turn(
        "go"
    )

    assert turn.completed.new_messages[-1].text == "done"
    assert handled == plain_handled
    assert listened == plain_listened
    assert [event[1] for event in handled].count("FunctionToolCallEvent") == 3
    assert "DeferredToolRequestsEvent" not in [event[1] for event in handled]
