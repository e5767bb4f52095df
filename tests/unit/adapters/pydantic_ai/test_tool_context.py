"""A tool Step's `RunContext` carries the turn's state as a plain run's would, and its tool the prepared definition.

Each session case runs one agent plainly (``agent.run``) and as a session driven in memory, on the direct path
(``direct_tool_calls=True``) and through an agent run, and compares what the tools saw.
"""

import asyncio
from dataclasses import replace
from typing import Any

import attrs
import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, RunContext, Tool
from pydantic_ai.agent import AgentRunResult
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition, ToolPrepareFunc
from pydantic_ai.usage import RequestUsage, RunUsage

from dex_agents import AgentSessionOptions, ToolEffect, ToolExecutionError
from dex_agents.adapters.pydantic_ai import PydanticAIRunner, run_messages
from dex_agents.adapters.pydantic_ai._direct_tool import DirectToolCache
from dex_agents.adapters.pydantic_ai._tool_context import (
    ContextTexts,
    PreparedFields,
    ToolStepContext,
    decode_context,
    encode_context,
)
from dex_agents.application.next import GoTo, StepName
from dex_agents.testing import make_tool_call, make_tool_execution
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.adapters.pydantic_ai.support import SessionDriver, Turn

READS = AgentSessionOptions(default_tool_effect=ToolEffect.READ)
"""Tools that need no approval: a plain run runs their calls in the run that asked for them."""


def _model_requests(messages: list[ModelMessage]) -> int:
    """How many model requests this turn made so far (the last user prompt opens the turn)."""
    count = 0
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and any(part.part_kind == "user-prompt" for part in message.parts):
            break
        count += isinstance(message, ModelRequest)
    return count


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = _model_requests(messages)
    usage = RequestUsage(input_tokens=10, output_tokens=2)
    if step < 2:
        calls = [ToolCallPart("look", {"what": f"{step}{which}"}, tool_call_id=f"c{step}{which}") for which in "ab"]
        return ModelResponse(parts=calls, usage=usage)
    return ModelResponse(parts=[TextPart("seen")], usage=usage)


def _looking_agent(seen: list[dict[str, Any]]) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(_respond))

    @agent.tool
    def look(ctx: RunContext[None], what: str) -> str:
        seen.append(
            {
                "what": what,
                "prompt": ctx.prompt,
                "run_step": ctx.run_step,
                "requests": ctx.usage.requests,
                "input_tokens": ctx.usage.input_tokens,
            }
        )
        return f"looked at {what}"

    return agent


async def _plain(agent: Agent[None, str], prompts: list[str]) -> None:
    history: list[ModelMessage] = []
    for prompt in prompts:
        history = (await agent.run(prompt, message_history=history)).all_messages()


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "agent-run"])
async def test_a_tool_sees_the_turns_prompt_run_step_and_usage_as_in_a_plain_run(direct: bool) -> None:
    plain: list[dict[str, Any]] = []
    await _plain(_looking_agent(plain), ["look twice", "and again"])
    seen: list[dict[str, Any]] = []
    driver = SessionDriver(
        PydanticAIRunner(_looking_agent(seen), direct_tool_calls=direct, live_runs=False), options=READS
    )

    for prompt in ["look twice", "and again"]:
        turn = await driver.turn(prompt)
        assert turn.error is None

    by_call = sorted(seen, key=repr)  # a plain run runs a response's calls in parallel
    assert by_call == sorted(plain, key=repr)
    assert [entry["run_step"] for entry in seen] == [1, 1, 2, 2, 1, 1, 2, 2]


async def test_a_tool_step_reports_only_what_the_tool_added_to_the_turns_usage() -> None:
    agent: Agent[None, str] = Agent(FunctionModel(_respond), tools=[Tool(lambda what: what, name="look")])
    context = ToolStepContext(prompt="go", run_step=2, usage=RunUsage(requests=2, input_tokens=40))
    record = make_tool_call("c1", "look", arguments='{"what": "x"}')
    execution = make_tool_execution(tool_call=attrs.evolve(record, framework_state=encode_context(context)))

    for direct in (True, False):
        result = await PydanticAIRunner(agent, direct_tool_calls=direct).execute_deferred_tool_call(execution)

        assert result.usage is not None
        assert (result.usage.model_calls, result.usage.input_tokens, result.usage.tool_calls) == (0, 0, 1)


async def test_a_finished_call_keeps_its_retries_but_not_the_context_the_model_step_handed_on() -> None:
    agent: Agent[None, str] = Agent(FunctionModel(_respond), tools=[Tool(lambda what: what, name="look")])
    context = ToolStepContext(prompt="go", run_step=2, usage=RunUsage(requests=2, input_tokens=40))
    record = make_tool_call("c1", "look", arguments='{"what": "x"}')

    for retries, kept in (('{"retries": 1}', '{"retries":1}'), (None, "{}")):
        state = encode_context(context, retries)
        execution = make_tool_execution(tool_call=attrs.evolve(record, framework_state=state))
        for direct in (True, False):
            result = await PydanticAIRunner(agent, direct_tool_calls=direct).execute_deferred_tool_call(execution)

            assert result.output == "x"
            assert result.framework_state == kept


def test_the_calls_of_one_response_get_the_states_encode_context_writes_for_them() -> None:
    base = ToolStepContext(prompt=["look at", "this"], run_step=3, usage=RunUsage(requests=3, input_tokens=9))
    looks = PreparedFields(description="Looks.", strict=True, timeout=None)
    texts = ContextTexts(base)

    for prepared in (looks, None, looks):
        for retries in (0, 2):
            state = '{"retries":2}' if retries else None
            assert texts.encode(prepared, new_run=False, retries=retries) == encode_context(
                replace(base, prepared=prepared), state
            )
            assert texts.encode(prepared, new_run=True, retries=retries) == encode_context(
                ToolStepContext(prepared=prepared, run_step=0), state
            )


def _prepared_agent(prepared: list[int]) -> Agent[None, str]:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _model_requests(messages) == 0:
            return ModelResponse(parts=[ToolCallPart("slow_tool", {}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("done")])

    async def short_timeout(ctx: RunContext[None], tool_def: ToolDefinition) -> ToolDefinition:
        prepared.append(ctx.run_step)
        return replace(tool_def, timeout=0.05, description="prepared", strict=True)

    async def slow_tool() -> str:
        await asyncio.sleep(1)
        return "slept"

    return Agent(FunctionModel(respond), tools=[Tool(slow_tool, prepare=short_timeout, max_retries=0)])


async def test_the_model_step_hands_on_the_prepared_definition_and_the_turns_state() -> None:
    prepared: list[int] = []
    driver = SessionDriver(PydanticAIRunner(_prepared_agent(prepared), live_runs=False), options=READS)

    turn = await driver.turn("call the slow tool")

    state = decode_context(turn.outcomes[0].tool_calls[0].framework_state)  # type: ignore[union-attr]
    assert state is not None
    assert (state.prompt, state.run_step, state.usage.requests) == ("call the slow tool", 1, 1)
    assert state.prepared == PreparedFields(description="prepared", strict=True, timeout=0.05)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "agent-run"])
async def test_a_tool_step_uses_the_timeout_the_model_steps_prepare_set_without_preparing_again(direct: bool) -> None:
    prepared: list[int] = []
    agent = _prepared_agent(prepared)
    context = ToolStepContext(prompt="go", prepared=PreparedFields(description="prepared", strict=True, timeout=0.01))
    record = make_tool_call("c1", "slow_tool")
    execution = make_tool_execution(tool_call=attrs.evolve(record, framework_state=encode_context(context)))

    with pytest.raises(ToolExecutionError, match=r"Timed out after 0\.01 seconds"):
        await PydanticAIRunner(agent, direct_tool_calls=direct).execute_deferred_tool_call(execution)

    # A plain run prepares the step's tools once, before its model request: the model Step did that.
    assert prepared == []


def _preparing_agent(prepared: list[int]) -> Agent[None, str]:
    async def note_step(ctx: RunContext[None], tool_def: ToolDefinition) -> ToolDefinition:
        prepared.append(ctx.run_step)
        return replace(tool_def, description=f"prepared at {ctx.run_step}")

    def look(what: str) -> str:
        return what

    return Agent(FunctionModel(_respond), tools=[Tool(look, prepare=note_step)])


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "agent-run"])
async def test_prepare_runs_once_per_model_request_as_in_a_plain_run(direct: bool) -> None:
    plain: list[int] = []
    await _plain(_preparing_agent(plain), ["look twice", "and again"])
    prepared: list[int] = []
    driver = SessionDriver(
        PydanticAIRunner(_preparing_agent(prepared), direct_tool_calls=direct, live_runs=False), options=READS
    )

    for prompt in ["look twice", "and again"]:
        turn = await driver.turn(prompt)
        assert turn.error is None

    # Resumed model Steps answer the calls with the tools their step listed; tool Steps list none again.
    assert prepared == plain == [1, 2, 3, 1, 2, 3]


def test_a_tool_with_prepare_goes_direct_only_with_the_prepared_definition() -> None:
    cache = DirectToolCache(_prepared_agent([]), None)

    assert cache.direct_tool("slow_tool", approved=False) is None
    assert cache.direct_tool("slow_tool", approved=False, prepared=True) is not None


def test_the_context_keeps_other_keys_of_the_per_call_state_and_reads_back() -> None:
    context = ToolStepContext(prompt=["look at", "this"], run_step=3, usage=RunUsage(requests=3))

    state = encode_context(context, '{"retries": 2}')

    assert '"retries":2' in state
    assert decode_context(state) == context
    assert decode_context(None) is None
    assert decode_context("not json") is None
    assert decode_context('{"retries": 2}') is None


def test_the_context_writes_only_the_usage_fields_and_prepared_fields_that_are_set() -> None:
    context = ToolStepContext(
        run_step=2,
        usage=RunUsage(requests=2, input_tokens=40, tool_calls=1),
        prepared=PreparedFields(description="Looks.", strict=None, timeout=None),
    )

    state = encode_context(context)

    assert state == (
        '{"context":{"run_step":2,"usage":{"input_tokens":40,"requests":2,"tool_calls":1},'
        '"tool":{"description":"Looks."}}}'
    )
    assert decode_context(state) == context
    assert decode_context('{"context":{"run_step":1,"tool":{}}}') == ToolStepContext(prepared=PreparedFields())


def test_a_context_written_with_every_usage_and_prepared_field_still_reads() -> None:
    full = (
        '{"context":{"run_step":2,"usage":{"input_tokens":40,"cache_write_tokens":0,"cache_read_tokens":0,'
        '"output_tokens":3,"input_audio_tokens":0,"audio_seconds":0.0,"details":{},"cost":null,"requests":2,'
        '"tool_calls":1},"tool":{"description":"Looks.","strict":null,"timeout":null}}}'
    )

    assert decode_context(full) == ToolStepContext(
        run_step=2,
        usage=RunUsage(requests=2, input_tokens=40, output_tokens=3, tool_calls=1),
        prepared=PreparedFields(description="Looks."),
    )


def _reading_agent(seen: list[dict[str, Any]]) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(_respond))

    @agent.tool(metadata=run_messages())
    def look(ctx: RunContext[None], what: str) -> str:
        seen.append(
            {
                "what": what,
                "messages": len(ctx.messages),
                "last": [part.part_kind for part in ctx.messages[-1].parts],
                "first": ctx.messages[0].parts[0].part_kind,
            }
        )
        return f"looked at {what}"

    return agent


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "agent-run"])
async def test_a_tool_that_asks_for_the_run_messages_sees_them_as_in_a_plain_run(direct: bool) -> None:
    plain: list[dict[str, Any]] = []
    await _plain(_reading_agent(plain), ["look twice", "and again"])
    seen: list[dict[str, Any]] = []
    runner = PydanticAIRunner(_reading_agent(seen), direct_tool_calls=direct, live_runs=False)
    host = InMemorySessionHost(runner, options=AgentSessionOptions())
    await host.drive(await host.start())

    for prompt in ["look twice", "and again"]:
        await host.send_user_message(prompt)
        waiting = await host.drive(GoTo(step=StepName.AWAIT_USER_MESSAGE))
        # Every call asks for approval (the default effect): an approved call's Step loads the history too.
        while interrupts := (await host.get_agent_snapshot()).pending_interrupts:
            for interrupt in interrupts:
                await host.resolve_interrupt(interrupt.interrupt_id, approved=True)
            waiting = await host.drive(*waiting)

    assert host.state.current.last_turn_error is None
    assert sorted(seen, key=repr) == sorted(plain, key=repr)
    assert {entry["messages"] for entry in seen} == {2, 4, 8, 10}


async def test_only_a_call_whose_tool_asks_for_the_run_messages_reads_the_history() -> None:
    asking = await SessionDriver(PydanticAIRunner(_reading_agent([]), live_runs=False)).turn("look twice")
    plain = await SessionDriver(PydanticAIRunner(_looking_agent([]), live_runs=False)).turn("look twice")

    assert {call.reads_history for call in asking.outcomes[0].tool_calls} == {True}  # type: ignore[union-attr]
    assert {call.reads_history for call in plain.outcomes[0].tool_calls} == {False}  # type: ignore[union-attr]


def _approving_agent(seen: list[tuple[str, Any, int, int]]) -> Agent[None, str]:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(message, ModelResponse) for message in messages)
        if step == 0:
            return ModelResponse(parts=[ToolCallPart("look", {}, tool_call_id="c0")])
        if step == 1:
            return ModelResponse(
                parts=[ToolCallPart("guarded", {}, tool_call_id="c1"), ToolCallPart("look", {}, tool_call_id="c2")]
            )
        if step == 2:
            return ModelResponse(parts=[ToolCallPart("look", {}, tool_call_id="c3")])
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, str] = Agent(FunctionModel(respond))

    @agent.tool
    def look(ctx: RunContext[None]) -> str:
        seen.append((str(ctx.tool_call_id), ctx.prompt, ctx.run_step, ctx.usage.requests))
        return "x"

    @agent.tool(requires_approval=True)
    def guarded(ctx: RunContext[None]) -> str:
        seen.append((str(ctx.tool_call_id), ctx.prompt, ctx.run_step, ctx.usage.requests))
        return "y"

    return agent


async def test_an_approved_call_and_the_calls_after_it_see_the_resumed_plain_runs_context() -> None:
    plain: list[tuple[str, Any, int, int]] = []
    agent = _approving_agent(plain)
    first: AgentRunResult[Any] = await agent.run("go", output_type=[str, DeferredToolRequests])
    await agent.run(
        None,
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"c1": True}),
        output_type=[str, DeferredToolRequests],
    )
    seen: list[tuple[str, Any, int, int]] = []
    driver = SessionDriver(PydanticAIRunner(_approving_agent(seen), live_runs=False), options=READS)

    turn = await driver.turn("go")

    assert turn.error is None
    by_call = {entry[0]: entry for entry in seen}
    assert by_call == {entry[0]: entry for entry in plain}
    assert by_call["c1"] == ("c1", None, 0, 0)  # the user's resumed run: no prompt, counted from 0


async def _look_prepared_by(prepare: ToolPrepareFunc[None], called: str, *, direct: bool) -> tuple[Turn, list[str]]:
    """A turn whose model calls ``called`` once (``what="x"``), its one tool ``look`` prepared by ``prepare``.

    Returns the turn and what ``look`` was given.
    """

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _model_requests(messages) == 0:
            return ModelResponse(parts=[ToolCallPart(called, {"what": "x"}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("done")])

    looked: list[str] = []

    def look(what: str) -> str:
        looked.append(what)
        return what

    agent: Agent[None, str] = Agent(FunctionModel(respond), tools=[Tool(look, prepare=prepare)])
    driver = SessionDriver(PydanticAIRunner(agent, direct_tool_calls=direct, live_runs=False), options=READS)
    return await driver.turn(called), looked


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "agent-run"])
async def test_a_tool_its_prepare_renamed_runs_under_the_new_name(direct: bool) -> None:
    async def rename(ctx: RunContext[None], tool_def: ToolDefinition) -> ToolDefinition:
        return replace(tool_def, name="peek")

    turn, looked = await _look_prepared_by(rename, "peek", direct=direct)

    assert turn.error is None
    assert looked == ["x"]


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "agent-run"])
async def test_a_tool_its_prepare_made_ask_for_approval_runs_once_approved(direct: bool) -> None:
    async def ask(ctx: RunContext[None], tool_def: ToolDefinition) -> ToolDefinition:
        return replace(tool_def, kind="unapproved")

    turn, looked = await _look_prepared_by(ask, "look", direct=direct)

    # The tool Step lists the tool as declared (kind "function"), the approved call runs all the same.
    assert turn.error is None
    assert looked == ["x"]
