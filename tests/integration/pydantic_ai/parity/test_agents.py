"""Parity of whole agents: toolsets, structured output, prompts over turns, validators, settings, approvals.

Scenarios follow Pydantic AI's durable-execution suites (``tests/test_temporal.py``,
``test_dbos.py``, ``test_prefect.py``) and its agent tests: each runs plainly and
as a session, compared by `check_parity`. One stack serves the whole module.
"""

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel
from pydantic_ai import Agent, DeferredToolRequests, ModelRetry, NativeOutput, PromptedOutput, RunContext, ToolOutput
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import CombinedToolset, FunctionToolset

from tests.integration.pydantic_ai.parity.harness import Case, ParityStack, Scenario, ScenarioSet, check_parity
from tests.integration.pydantic_ai.parity.probe import Probe, calls, last_prompt, text, turn_step

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

SCENARIOS = ScenarioSet()

TRIMMED = (
    "a history processor's result replaces a plain run's history (all_messages() keeps only what it returned); "
    "the session stores every message of every turn (the model sees the same)"
)


class City(BaseModel):
    city: str
    country: str


class Weather(BaseModel):
    city: str
    sunny: bool


def _returns(messages: list[ModelMessage]) -> list[str]:
    last = messages[-1]
    return [str(part.content) for part in last.parts if isinstance(part, ToolReturnPart)]


def _output(info: AgentInfo, data: dict[str, Any], *, index: int = 0) -> ModelResponse:
    """The response giving ``data`` as the output, the way the request's output mode takes it."""
    if info.output_tools:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[index].name, data, tool_call_id="out")])
    return text(json.dumps(data))


@SCENARIOS.scenario()
def toolsets_function_combined_prefixed_and_filtered(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            names = sorted(tool.name for tool in info.function_tools)
            assert names == ["geo_capital", "geo_country", "temperature"], names
            return calls(("c1", "geo_capital", {"country": "Mexico"}), ("c2", "temperature", {"city": "Mexico City"}))
        return text(" / ".join(_returns(messages)))

    geo: FunctionToolset[None] = FunctionToolset()

    @geo.tool_plain
    def capital(country: str) -> str:
        probe.invoked("capital", country=country)
        return "Mexico City"

    @geo.tool_plain
    def country(city: str) -> str:
        return "Mexico"

    @geo.tool_plain
    def secret() -> str:
        raise AssertionError("filtered out")

    weather: FunctionToolset[None] = FunctionToolset()

    @weather.tool_plain
    def temperature(city: str) -> str:
        probe.invoked("temperature", city=city)
        return "21 C"

    toolset = CombinedToolset([geo.filtered(lambda _ctx, tool_def: tool_def.name != "secret").prefixed("geo"), weather])
    agent = Agent(probe.model(respond), toolsets=[toolset], capabilities=probe.capabilities)
    return Scenario(agent=agent, turns=["the capital of Mexico and its temperature"])


@SCENARIOS.scenario()
def a_prepared_toolset_rewrites_its_definitions(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "lookup", {"city": "Rome"}))
        return text(_returns(messages)[0])

    cities: FunctionToolset[None] = FunctionToolset()

    @cities.tool_plain
    def lookup(city: str) -> str:
        """Look a city up."""
        probe.invoked("lookup", city=city)
        return "Italy"

    async def described(ctx: RunContext[None], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        return [
            replace(tool_def, description=f"{tool_def.description} (step {ctx.run_step})") for tool_def in tool_defs
        ]

    agent = Agent(probe.model(respond), toolsets=[cities.prepared(described)], capabilities=probe.capabilities)
    return Scenario(agent=agent, turns=["where is Rome?"])


@SCENARIOS.scenario()
def an_output_validator_on_structured_output(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        retried = any("known country" in str(part) for message in messages for part in message.parts)
        return _output(info, {"city": "Bern", "country": "Switzerland" if retried else "Swiss"})

    agent = Agent(probe.model(respond), output_type=City, capabilities=probe.capabilities)

    @agent.output_validator
    def known(output: City) -> City:
        probe.invoked("validator", country=output.country)
        if output.country != "Switzerland":
            raise ModelRetry("Name a known country.")
        return output

    return Scenario(agent=agent, turns=["where is Bern?"], ordered_invocations=True)


@SCENARIOS.scenario()
def a_dynamic_toolset_per_run_step(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        names = sorted(tool.name for tool in info.function_tools)
        step = turn_step(messages)
        if step == 0:
            return calls(("c1", names[0], {}))
        if step == 1:
            return calls(("c2", names[0], {}))
        return text(" ".join(_returns(messages)) + f" {names}")

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.toolset
    def by_step(ctx: RunContext[None]) -> FunctionToolset[None]:
        toolset: FunctionToolset[None] = FunctionToolset()
        name = "first" if ctx.run_step <= 1 else "later"

        def tool() -> str:
            probe.invoked(name, run_step=ctx.run_step)
            return f"{name} at step {ctx.run_step}"

        toolset.add_function(tool, name=name)
        return toolset

    return Scenario(agent=agent, turns=["go"], ordered_invocations=True)


@SCENARIOS.scenario()
def tool_output_structured(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "lookup", {"city": "Mexico City"}))
        return _output(info, {"city": "Mexico City", "country": _returns(messages)[0]})

    agent = Agent(probe.model(respond), output_type=City, capabilities=probe.capabilities)

    @agent.tool_plain
    def lookup(city: str) -> str:
        probe.invoked("lookup", city=city)
        return "Mexico"

    return Scenario(agent=agent, turns=["where is Mexico City?"])


@SCENARIOS.scenario()
def native_output_structured(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "lookup", {"city": "Lima"}))
        return text(json.dumps({"city": "Lima", "country": _returns(messages)[0]}))

    agent = Agent(probe.model(respond), output_type=NativeOutput(City), capabilities=probe.capabilities)

    @agent.tool_plain
    def lookup(city: str) -> str:
        return "Peru"

    return Scenario(agent=agent, turns=["where is Lima?"])


@SCENARIOS.scenario()
def prompted_output_structured(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "lookup", {"city": "Quito"}))
        return text(json.dumps({"city": "Quito", "country": _returns(messages)[0]}))

    agent = Agent(probe.model(respond), output_type=PromptedOutput(City), capabilities=probe.capabilities)

    @agent.tool_plain
    def lookup(city: str) -> str:
        return "Ecuador"

    return Scenario(agent=agent, turns=["where is Quito?"])


@SCENARIOS.scenario()
def union_output_picks_one_of_its_tools(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        names = [tool.name for tool in info.output_tools]
        if turn_step(messages) == 0:
            return calls(("c1", "lookup", {"city": "Oslo"}))
        weather = names.index("final_result_Weather")
        return _output(info, {"city": "Oslo", "sunny": _returns(messages)[0] == "sunny"}, index=weather)

    output = [ToolOutput(City), ToolOutput(Weather)]
    agent = Agent(probe.model(respond), output_type=output, capabilities=probe.capabilities)

    @agent.tool_plain
    def lookup(city: str) -> str:
        return "sunny"

    return Scenario(agent=agent, turns=["weather in Oslo"])


@SCENARIOS.scenario()
def prompts_and_instructions_over_turns(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls((f"c{len(messages)}", "note", {"text": last_prompt(messages)}))
        return text(f"turn of {last_prompt(messages)!r} ({len(messages)} messages)")

    agent = Agent(
        probe.model(respond),
        system_prompt="You keep notes.",
        instructions="Answer in one line.",
        capabilities=probe.capabilities,
    )

    @agent.system_prompt(dynamic=True)
    def today(ctx: RunContext[None]) -> str:
        return f"Requests so far: {ctx.usage.requests}."

    @agent.instructions
    def step(ctx: RunContext[None]) -> str:
        return f"This is run step {ctx.run_step}."

    @agent.tool_plain
    def note(text: str) -> str:
        probe.invoked("note", text=text)
        return "noted"

    return Scenario(agent=agent, turns=["first", "second", "third"])


@SCENARIOS.scenario()
def output_validator_retries_the_model(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(part, ToolReturnPart) for message in messages for part in message.parts):
            return calls(("c1", "lookup", {"city": "Paris"}))
        retries = sum("capital letter" in str(part) for message in messages for part in message.parts)
        return text("Paris is in France" if retries >= 2 else "paris")

    agent = Agent(probe.model(respond), retries={"tools": 1, "output": 3}, capabilities=probe.capabilities)

    @agent.tool_plain
    def lookup(city: str) -> str:
        return "France"

    @agent.output_validator
    def capitalised(ctx: RunContext[None], output: str) -> str:
        probe.invoked("validator", output=output, retry=ctx.retry)
        if not output[:1].isupper():
            raise ModelRetry("Start with a capital letter.")
        return output

    return Scenario(agent=agent, turns=["where is Paris?"], ordered_invocations=True)


@SCENARIOS.scenario(xfail=TRIMMED)
def a_history_processor_trims_what_the_model_sees(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls((f"c{len(messages)}", "echo", {"text": last_prompt(messages)}))
        return text(f"saw {len(messages)} messages")

    def last_turns(messages: list[ModelMessage]) -> list[ModelMessage]:
        # Keep the last user prompt and what followed it.
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, ModelRequest) and not any(isinstance(p, ToolReturnPart) for p in message.parts):
                return messages[index:]
        return messages

    agent = Agent(probe.model(respond), capabilities=[*probe.capabilities, ProcessHistory(last_turns)])

    @agent.tool_plain
    def echo(text: str) -> str:
        return text

    return Scenario(agent=agent, turns=["one", "two"])


@SCENARIOS.scenario()
def model_settings_reach_every_request(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "echo", {"text": "hi"}))
        return text("done")

    agent = Agent(
        probe.model(respond),
        model_settings={"temperature": 0.1, "max_tokens": 99},
        capabilities=probe.capabilities,
    )

    @agent.tool_plain
    def echo(text: str) -> str:
        return text

    return Scenario(agent=agent, turns=["go"])


@SCENARIOS.scenario()
def streamed_text_around_tool_calls(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return ModelResponse(
                parts=[TextPart("Let me look."), ToolCallPart("lookup", {"q": "tea"}, tool_call_id="c1")]
            )
        return text("Tea is a drink.")

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.tool_plain
    def lookup(q: str) -> str:
        return "a drink"

    return Scenario(agent=agent, turns=["what is tea?"])


def _decide(call: ToolCallPart) -> bool | str:
    return True if call.args_as_dict().get("order_id") == "7" else "Refunds over 100 need a manager."


@SCENARIOS.scenario()
def approvals_approved_and_denied_with_a_message(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "refund", {"order_id": "7"}), ("c2", "refund", {"order_id": "8"}))
        return text(" | ".join(_returns(messages)))

    agent = Agent(probe.model(respond), output_type=[str, DeferredToolRequests], capabilities=probe.capabilities)

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str) -> str:
        probe.invoked("refund", order_id=order_id)
        return f"refunded {order_id}"

    return Scenario(agent=agent, turns=["refund orders 7 and 8"], decide=_decide)


@SCENARIOS.scenario()
def one_flow_per_model(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("the agent's own model is never called")

    def other(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "echo", {"text": "hi"}))
        return text("from the other model")

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.tool_plain
    def echo(text: str) -> str:
        return text

    return Scenario(agent=agent, turns=["go"], model=probe.model(other, name="other"))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack() -> AsyncIterator[ParityStack]:
    async with ParityStack(SCENARIOS) as served:
        yield served


@pytest.mark.parametrize("case", SCENARIOS.params())
async def test_a_session_behaves_like_a_plain_run(stack: ParityStack, case: Case) -> None:
    await check_parity(stack, case)
