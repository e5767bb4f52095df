"""Model Steps: one model call per ``RunModel``, tool calls deferred in model order with their policies."""

import json
from collections.abc import AsyncIterable
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, DeferredToolRequests, RunContext, Tool, ToolDefinition
from pydantic_ai.capabilities import HandleDeferredToolCalls, Hooks, ProcessEventStream
from pydantic_ai.messages import AgentStreamEvent, ModelMessagesTypeAdapter, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from dex_agents import (
    AgentEventType,
    AgentSessionOptions,
    AgentUsage,
    RunnerContractError,
    ToolCallsRequested,
    ToolEffect,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.adapters.pydantic_ai import PydanticAIRunner
from dex_agents.adapters.pydantic_ai._usage import agent_usage
from dex_agents.domain.events import ReasoningDeltaPayload, TextDeltaPayload
from dex_agents.testing import RecordingEventSink, make_turn_context
from tests.unit.adapters.pydantic_ai.scripted_model import ScriptedModel, call, script
from tests.unit.adapters.pydantic_ai.support import SessionDriver

TOOL_RUNS: list[str] = []


class Answer(BaseModel):
    text: str


def order_agent(model: ScriptedModel, **kwargs: Any) -> Agent[None, Any]:
    annotated: FunctionToolset[None] = FunctionToolset(
        [
            Tool(lambda order_id: "ok", name="lookup", metadata={"annotations": {"readOnlyHint": True}}),
            Tool(
                lambda order_id: "ok",
                name="set_status",
                metadata={"annotations": {"readOnlyHint": False, "idempotentHint": True}},
            ),
            Tool(lambda text: "ok", name="send", metadata={"annotations": None}),
        ]
    )
    agent = Agent(model.model(), toolsets=[annotated.prefixed("orders")], **kwargs)

    @agent.tool_plain
    def find_order(order_id: str) -> str:
        TOOL_RUNS.append("find_order")
        return "delivered"

    @agent.tool(requires_approval=True)
    def refund_order(ctx: RunContext[None], order_id: str) -> str:
        TOOL_RUNS.append("refund_order")
        return "refunded"

    @agent.tool_plain
    def email_customer(order_id: str, text: str) -> str:
        TOOL_RUNS.append("email_customer")
        return "emailed"

    return agent


async def first_step(agent: Agent[None, Any], prompt: str, **kwargs: Any) -> tuple[Any, RecordingEventSink]:
    runner = PydanticAIRunner(agent)
    sink = RecordingEventSink()
    from dex_agents import AgentMessage

    user = AgentMessage.stored(runner.build_user_message(prompt), sequence=1, turn_id="turn-1")
    outcome = await runner.run_model_step(make_turn_context(messages=[user], sink=sink, **kwargs))
    return outcome, sink


async def test_a_response_asking_for_tools_ends_the_step_after_one_model_call_without_running_them() -> None:
    TOOL_RUNS.clear()
    model = ScriptedModel()
    steps = [call("c1", "email_customer", order_id="7", text="hi"), call("c2", "find_order", order_id="7")]
    outcome, _ = await first_step(order_agent(model), script(steps))
    assert isinstance(outcome, ToolCallsRequested)
    assert [(c.tool_call_id, c.tool_name, json.loads(c.arguments)) for c in outcome.tool_calls] == [
        ("c1", "email_customer", {"order_id": "7", "text": "hi"}),
        ("c2", "find_order", {"order_id": "7"}),
    ]
    assert len(model.calls) == 1
    assert outcome.usage.model_calls == 1
    assert TOOL_RUNS == []


async def test_the_run_state_holds_the_turns_messages_and_the_requested_call_ids() -> None:
    outcome, _ = await first_step(order_agent(ScriptedModel()), script([call("c1", "find_order", order_id="7")]))
    assert isinstance(outcome, ToolCallsRequested)
    state = json.loads(outcome.framework_run_state)
    assert state["tool_call_ids"] == ["c1"]
    messages = ModelMessagesTypeAdapter.validate_json(state["messages"])
    assert [type(m) for m in messages] == [ModelRequest, ModelResponse]
    assert all(m.conversation_id == "session-1" for m in messages)


@pytest.mark.parametrize(
    ("tool_name", "effect", "requires_approval"),
    [
        ("find_order", ToolEffect.READ, None),
        ("refund_order", ToolEffect.IDEMPOTENT_WRITE, True),
        ("email_customer", ToolEffect.NON_IDEMPOTENT_WRITE, None),
        ("orders_lookup", ToolEffect.READ, None),
        ("orders_set_status", ToolEffect.IDEMPOTENT_WRITE, None),
        ("orders_send", ToolEffect.UNCLASSIFIED, None),
    ],
)
async def test_policies_come_from_tool_policies_then_tool_metadata_then_the_default(
    tool_name: str, effect: ToolEffect, requires_approval: bool | None
) -> None:
    options = AgentSessionOptions(
        tool_policies={
            "find_order": ToolPolicy(ToolEffect.READ),
            "refund_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
            "email_customer": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
        }
    )
    args = {"text": "hi"} if tool_name == "orders_send" else {"order_id": "7"}
    if tool_name == "email_customer":
        args["text"] = "hi"
    outcome, _ = await first_step(order_agent(ScriptedModel()), script([["c1", tool_name, args]]), options=options)
    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].policy == ToolPolicy(effect, requires_approval=requires_approval)


async def test_an_explicit_policy_by_prefixed_name_overrides_tool_metadata() -> None:
    options = AgentSessionOptions(tool_policies={"orders_lookup": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)})
    outcome, _ = await first_step(
        order_agent(ScriptedModel()), script([call("c1", "orders_lookup", order_id="7")]), options=options
    )
    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].policy == ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)


async def test_a_requires_approval_tool_waits_for_approval_even_when_its_policy_says_no() -> None:
    options = AgentSessionOptions(tool_policies={"refund_order": ToolPolicy(ToolEffect.READ, requires_approval=False)})
    outcome, _ = await first_step(
        order_agent(ScriptedModel()), script([call("c1", "refund_order", order_id="7")]), options=options
    )
    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].policy == ToolPolicy(ToolEffect.READ, requires_approval=True)


async def test_search_tools_is_a_read_and_is_deferred_like_any_tool() -> None:
    model = ScriptedModel()
    agent = Agent(model.model(), tools=[Tool(lambda order_id: "refunded", name="hidden", defer_loading=True)])
    outcome, _ = await first_step(agent, script([call("s1", "search_tools", queries=["refund"])]))
    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].tool_name == "search_tools"
    assert outcome.tool_calls[0].policy == ToolPolicy(ToolEffect.READ)
    assert len(model.calls) == 1


async def test_an_output_beside_other_calls_is_kept_and_ends_the_turn_after_them_without_another_model_call() -> None:
    TOOL_RUNS.clear()
    model = ScriptedModel()
    agent = order_agent(model, output_type=Answer)
    driver = SessionDriver(PydanticAIRunner(agent))
    turn = await driver.turn(
        script(
            {"calls": [call("c1", "find_order", order_id="7")], "output": {"text": "early"}},
            {"output": {"text": "late"}},
        )
    )
    first = turn.outcomes[0]
    assert isinstance(first, ToolCallsRequested)
    assert [c.tool_name for c in first.tool_calls] == ["find_order"]
    state = json.loads(first.framework_run_state)
    response = ModelMessagesTypeAdapter.validate_json(state["messages"])[-1]
    assert isinstance(response, ModelResponse)
    calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
    assert [p.tool_name for p in calls] == ["find_order", "final_result"]
    assert state["output_call_ids"] == [calls[1].tool_call_id]
    assert TOOL_RUNS == ["find_order"]
    returns = turn.completed.new_messages[-1]
    assert returns.tool_call_ids == ("c1", calls[1].tool_call_id)
    assert "Final result processed." in (returns.framework_item or "")
    assert len(model.calls) == 1


async def test_under_end_strategy_early_an_output_beside_other_calls_ends_the_turn_without_running_them() -> None:
    TOOL_RUNS.clear()
    model = ScriptedModel()
    agent = order_agent(model, output_type=Answer)
    agent.end_strategy = "early"
    turn = await SessionDriver(PydanticAIRunner(agent)).turn(
        script({"calls": [call("c1", "find_order", order_id="7")], "output": {"text": "early"}})
    )
    assert isinstance(turn.outcomes[0], TurnCompleted)
    assert TOOL_RUNS == []
    assert len(model.calls) == 1


async def test_an_agent_whose_output_type_lists_deferred_tool_requests_runs_unchanged() -> None:
    agent = order_agent(ScriptedModel(), output_type=[str, DeferredToolRequests])
    outcome, _ = await first_step(agent, script([call("c1", "find_order", order_id="7")]))
    assert isinstance(outcome, ToolCallsRequested)


async def test_an_agent_with_output_validators_and_deferred_tool_requests_completes_a_turn() -> None:
    agent = order_agent(ScriptedModel(), output_type=[str, DeferredToolRequests])
    seen: list[object] = []

    @agent.output_validator
    def keep(output: Any) -> Any:
        seen.append(output)
        return output

    turn = await SessionDriver(PydanticAIRunner(agent)).turn(script([call("c1", "find_order", order_id="7")]))
    assert turn.completed.new_messages[-1].text == "find_order[success]=delivered"
    assert "find_order[success]=delivered" in seen


async def test_an_agent_with_output_validators_and_no_deferred_tool_requests_completes_a_turn() -> None:
    agent = order_agent(ScriptedModel())
    seen: list[object] = []

    @agent.output_validator
    def keep(output: Any) -> Any:
        seen.append(output)
        return output

    runner = PydanticAIRunner(agent)
    turn = await SessionDriver(runner).turn(script([call("c1", "find_order", order_id="7")]))
    assert turn.completed.new_messages[-1].text == "find_order[success]=delivered"
    assert seen == ["find_order[success]=delivered"]
    assert agent.output_type is str  # the user's agent is left as it was


async def test_a_validator_registered_after_the_runner_is_built_runs_too() -> None:
    agent = order_agent(ScriptedModel())

    @agent.output_validator
    def first(output: Any) -> Any:
        return output

    runner = PydanticAIRunner(agent)
    seen: list[object] = []

    @agent.output_validator
    def later(output: Any) -> Any:
        seen.append(output)
        return output

    await SessionDriver(runner).turn(script([call("c1", "find_order", order_id="7")]))
    assert seen == ["find_order[success]=delivered"]


async def test_text_and_thinking_stream_as_live_events_while_the_model_streams() -> None:
    outcome, sink = await first_step(
        order_agent(ScriptedModel()),
        script({"think": "Let me think.", "text": "Looking it up.", "calls": [call("c1", "find_order", order_id="7")]}),
    )
    assert isinstance(outcome, ToolCallsRequested)
    deltas = [
        (e.type, e.payload.text) for e in sink.events if isinstance(e.payload, TextDeltaPayload | ReasoningDeltaPayload)
    ]
    assert len(deltas) == len(sink.events)
    assert deltas == [
        (AgentEventType.REASONING_DELTA, "Let me"),
        (AgentEventType.REASONING_DELTA, " think."),
        (AgentEventType.TEXT_DELTA, "Looking"),
        (AgentEventType.TEXT_DELTA, " it up."),
    ]
    assert {(e.turn_id, e.step_execution_id, e.attempt) for e in sink.events} == {("turn-1", "run-model-1", 1)}


THINK_AND_TEXT = script(
    {"think": "Let me think.", "text": "Looking it up.", "calls": [call("c1", "find_order", order_id="7")]}
)
STREAMED_DELTAS = [
    (AgentEventType.REASONING_DELTA, "Let me"),
    (AgentEventType.REASONING_DELTA, " think."),
    (AgentEventType.TEXT_DELTA, "Looking"),
    (AgentEventType.TEXT_DELTA, " it up."),
]


def deltas_of(sink: RecordingEventSink) -> list[tuple[AgentEventType, str]]:
    return [
        (e.type, e.payload.text) for e in sink.events if isinstance(e.payload, TextDeltaPayload | ReasoningDeltaPayload)
    ]


async def test_an_agent_with_its_own_event_stream_capability_gets_the_model_events_and_the_session_its_deltas() -> None:
    seen: list[str] = []

    async def handler(ctx: RunContext[None], events: AsyncIterable[AgentStreamEvent]) -> None:
        seen.extend([type(event).__name__ async for event in events])

    outcome, sink = await first_step(
        order_agent(ScriptedModel(), capabilities=[ProcessEventStream(handler)]), THINK_AND_TEXT
    )

    assert isinstance(outcome, ToolCallsRequested)
    assert deltas_of(sink) == STREAMED_DELTAS
    assert "PartDeltaEvent" in seen


async def test_an_agent_with_an_event_hook_gets_the_model_events_and_the_session_its_deltas() -> None:
    agent = order_agent(ScriptedModel())
    seen: list[str] = []

    @agent.on_event
    async def on_any(ctx: RunContext[None], event: AgentStreamEvent) -> None:
        seen.append(type(event).__name__)

    outcome, sink = await first_step(agent, THINK_AND_TEXT)

    assert isinstance(outcome, ToolCallsRequested)
    assert deltas_of(sink) == STREAMED_DELTAS
    assert "PartDeltaEvent" in seen


def test_usage_maps_requests_tool_calls_cached_and_reasoning_tokens() -> None:
    usage = RunUsage(
        requests=2, input_tokens=100, cache_read_tokens=40, output_tokens=20, output_reasoning_tokens=7, tool_calls=3
    )
    assert agent_usage(usage) == AgentUsage(
        model_calls=2, input_tokens=100, output_tokens=20, cached_input_tokens=40, reasoning_tokens=7, tool_calls=3
    )


async def test_a_model_step_reports_the_runs_usage() -> None:
    outcome, _ = await first_step(order_agent(ScriptedModel()), script("hello"))
    assert isinstance(outcome, TurnCompleted)
    assert outcome.usage.model_calls == 1
    assert outcome.usage.input_tokens > 0
    assert outcome.usage.output_tokens > 0


async def test_an_invalid_call_beside_a_valid_one_defers_the_valid_one_and_the_model_sees_both_answers() -> None:
    model = ScriptedModel()
    driver = SessionDriver(PydanticAIRunner(order_agent(model)))
    turn = await driver.turn(script([call("bad", "find_order"), call("good", "find_order", order_id="7")]))
    first = turn.outcomes[0]
    assert isinstance(first, ToolCallsRequested)
    assert [c.tool_call_id for c in first.tool_calls] == ["good"]
    assert first.usage.model_calls == 1
    answer = turn.completed.new_messages[-1].text
    assert answer is not None
    assert answer.startswith("find_order[retried]=")
    assert answer.endswith("find_order[success]=delivered")


async def test_invalid_calls_alone_make_another_model_call_in_the_same_step() -> None:
    model = ScriptedModel()
    outcome, _ = await first_step(order_agent(model), script([call("bad", "find_order")], "fixed"))
    assert isinstance(outcome, TurnCompleted)
    assert outcome.usage.model_calls == 2


async def test_a_capability_that_answers_deferred_calls_itself_fails_the_step() -> None:
    handler = HandleDeferredToolCalls(
        handler=lambda ctx, requests: requests.build_results(calls={c.tool_call_id: "inline" for c in requests.calls})
    )
    agent = order_agent(ScriptedModel(), capabilities=[handler])
    with pytest.raises(RunnerContractError, match="answered tool call 'c1'"):
        await first_step(agent, script([call("c1", "find_order", order_id="7")]))


async def test_a_model_error_fails_the_attempt() -> None:
    with pytest.raises(RuntimeError, match="model down"):
        await first_step(order_agent(ScriptedModel()), script({"fail": "model down"}))


async def test_validation_hooks_and_args_validators_run_in_the_model_step_and_again_in_the_tool_step() -> None:
    seen: list[str] = []
    hooks = Hooks[None]()

    @hooks.on.before_tool_validate
    async def before_validate(ctx: RunContext[None], *, call: Any, tool_def: ToolDefinition, args: Any) -> Any:
        seen.append(f"validate {tool_def.kind}")
        return args

    @hooks.on.before_tool_execute
    async def before_execute(ctx: RunContext[None], *, call: Any, tool_def: ToolDefinition, args: Any) -> Any:
        seen.append(f"execute {tool_def.kind}")
        return args

    def check_order(ctx: RunContext[None], order_id: str) -> None:
        seen.append("args_validator")

    agent = Agent(ScriptedModel().model(), capabilities=[hooks])

    @agent.tool_plain(args_validator=check_order)
    def find_order(order_id: str) -> str:
        seen.append("body")
        return "delivered"

    await SessionDriver(PydanticAIRunner(agent)).turn(script([call("c1", "find_order", order_id="7")]))
    assert seen == [
        "validate external",
        "args_validator",
        "validate function",
        "args_validator",
        "execute function",
        "body",
    ]


async def test_an_agent_level_event_listener_also_sees_the_tool_events_of_tool_steps() -> None:
    runs: list[list[str]] = []

    async def handler(ctx: RunContext[None], events: AsyncIterable[AgentStreamEvent]) -> None:
        runs.append([type(event).__name__ async for event in events])

    agent = Agent(ScriptedModel().model(), capabilities=[ProcessEventStream(handler)])

    @agent.tool_plain
    def find_order(order_id: str) -> str:
        return "delivered"

    await SessionDriver(PydanticAIRunner(agent)).turn(script([call("c1", "find_order", order_id="7")]))
    assert any("FunctionToolResultEvent" in run and "PartStartEvent" not in run for run in runs)


async def test_a_call_of_a_sequential_tool_or_a_sequential_toolset_is_deferred_as_sequential() -> None:
    ordered: FunctionToolset[None] = FunctionToolset(sequential=True)

    @ordered.tool_plain
    def ledger() -> str:
        return "ok"

    agent = Agent(ScriptedModel().model(), toolsets=[ordered])

    @agent.tool_plain(sequential=True)
    def serial() -> str:
        return "ok"

    @agent.tool_plain
    def plain() -> str:
        return "ok"

    outcome, _ = await first_step(agent, script([call("p", "plain"), call("s", "serial"), call("l", "ledger")]))
    assert isinstance(outcome, ToolCallsRequested)
    assert [(c.tool_call_id, c.sequential) for c in outcome.tool_calls] == [("p", False), ("s", True), ("l", True)]
