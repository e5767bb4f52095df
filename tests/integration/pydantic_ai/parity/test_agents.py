"""Parity of whole agents: toolsets, structured output, prompts over turns, validators, settings, approvals.

Scenarios follow Pydantic AI's durable-execution suites (``tests/test_temporal.py``,
``test_dbos.py``, ``test_prefect.py``) and its agent tests: each runs plainly and
as a session, compared by `check_parity`. One stack serves the whole module.
"""

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any, Literal

import pytest
import pytest_asyncio
from pydantic import BaseModel
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DocumentUrl,
    ExternalToolset,
    ModelRetry,
    NativeOutput,
    PromptedOutput,
    RunContext,
    TextOutput,
    ToolOutput,
    UploadedFile,
)
from pydantic_ai.capabilities import AbstractCapability, PrepareOutputTools, ProcessHistory
from pydantic_ai.exceptions import ModelHTTPError, SkipModelRequest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import CombinedToolset, FunctionToolset

from tests.integration.pydantic_ai.parity.harness import Case, ParityStack, Scenario, ScenarioSet, check_parity
from tests.integration.pydantic_ai.parity.probe import Probe, calls, last_prompt, text, turn_step

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

SCENARIOS = ScenarioSet()

GRACEFUL_CALL_EVENTS = (
    "under end_strategy='graceful' a plain run shows the call event of a function tool after the output beside it "
    "once the output is processed; a session shows every call event of the response when the model Step hands "
    "the calls on, before the output"
)

SPLIT_RETRY_REQUEST = (
    "an output that failed validation beside function tool calls: a plain run stores its retry and the calls' "
    "returns in one request; a session stores the retry in a request of its own before the returns (the model "
    "sees the same)"
)

NATIVE_BESIDE_CALLS = (
    "a valid native or prompted output text beside function tool calls under end_strategy='early': a plain run "
    "ends with it; the model Step's run sees the calls as external (Pydantic AI ends early only beside plain "
    "function tools), so a session runs them and asks the model again"
)

DEPS_CHANGED_TOOLS = (
    "a tool changed the deps a dynamic toolset reads: a session's tool Step resolves the toolset again with the "
    "changed deps (a plain run calls every tool of the response from the tools it resolved before), and the "
    "next model Step's run does not know the tools the last one offered (no 'now available' part)"
)

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


def _output_beside_calls(
    probe: Probe,
    end_strategy: Literal["early", "graceful", "exhaustive"],
    *,
    country: str = "Mexico",
    retry_paris: bool = False,
    output_type: Any = City,
) -> Scenario:
    """A response giving the output (``country`` in it) beside two ``lookup`` calls; the next one gives it again."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        data = {"city": "Mexico City", "country": country if turn_step(messages) == 0 else "Mexico"}
        output = _output(info, data)
        if turn_step(messages) > 0:
            return output
        given = [replace(part, tool_call_id="out") if isinstance(part, ToolCallPart) else part for part in output.parts]
        return ModelResponse(
            parts=[
                ToolCallPart("lookup", {"city": "Mexico City"}, tool_call_id="c1"),
                *given,
                ToolCallPart("lookup", {"city": "Paris"}, tool_call_id="c2"),
            ]
        )

    agent = Agent(
        probe.model(respond), output_type=output_type, end_strategy=end_strategy, capabilities=probe.capabilities
    )

    @agent.output_validator
    def known(output: Any) -> Any:
        if isinstance(output, City) and output.country != "Mexico":
            raise ModelRetry(f"{output.country} is not where Mexico City is")
        return output

    @agent.tool_plain
    def lookup(city: str) -> str:
        probe.invoked("lookup", city=city)
        if retry_paris and city == "Paris":
            raise ModelRetry("Paris is not a city I know")
        return "Mexico" if city == "Mexico City" else "France"

    return Scenario(agent=agent, turns=["where is Mexico City?"])


@SCENARIOS.scenario()
def the_output_beside_tool_calls_ends_the_run_early(probe: Probe) -> Scenario:
    return _output_beside_calls(probe, "early")


@SCENARIOS.scenario(xfail={"events": GRACEFUL_CALL_EVENTS})
def the_output_beside_tool_calls_runs_them_first_when_graceful(probe: Probe) -> Scenario:
    return _output_beside_calls(probe, "graceful")


@SCENARIOS.scenario()
def the_output_beside_tool_calls_runs_them_when_exhaustive(probe: Probe) -> Scenario:
    return _output_beside_calls(probe, "exhaustive")


@SCENARIOS.scenario(xfail=SPLIT_RETRY_REQUEST)
def an_invalid_output_beside_tool_calls_runs_them_and_asks_again_early(probe: Probe) -> Scenario:
    return _output_beside_calls(probe, "early", country="Peru")


@SCENARIOS.scenario()
def an_invalid_output_beside_tool_calls_asks_again_when_exhaustive(probe: Probe) -> Scenario:
    return _output_beside_calls(probe, "exhaustive", country="Peru")


@SCENARIOS.scenario(xfail={"events": GRACEFUL_CALL_EVENTS})
def a_tool_retry_beside_the_output_wins_when_graceful(probe: Probe) -> Scenario:
    return _output_beside_calls(probe, "graceful", retry_paris=True)


@SCENARIOS.scenario(xfail=NATIVE_BESIDE_CALLS)
def a_native_output_beside_tool_calls_ends_the_run_early(probe: Probe) -> Scenario:
    return _output_beside_calls(probe, "early", output_type=NativeOutput(City))


@SCENARIOS.scenario()
def text_beside_tool_calls_is_not_the_output_even_early(probe: Probe) -> Scenario:
    return _output_beside_calls(probe, "early", output_type=str)


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


# The agents below are those of Pydantic AI's durable-execution suites (``test_temporal.py``,
# ``test_dbos.py``, ``test_prefect.py``), scripted with a FunctionModel or a TestModel in place of
# their recorded provider answers.


class Deps(BaseModel):
    country: str


@dataclass
class Answer:
    label: str
    answer: str


@dataclass
class Response:
    answers: list[Answer]


def _complex_agent(probe: Probe, *, sequential: bool) -> Scenario:
    """The suites' ``complex_agent``: deps, a toolset with an ID, an external toolset, structured output.

    Its MCP server's ``get_product_name`` is a function tool here (MCP in sessions: ``test_mcp.py``).
    """

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = turn_step(messages)
        if step == 0:
            return calls(("c1", "get_country", {}), ("c2", "get_product_name", {}))
        if step == 1:
            return calls(("c3", "get_weather", {"city": _returns(messages)[0]}))
        country, product = _returns(messages[:-2])
        answers = [
            {"label": "Capital of the country", "answer": country},
            {"label": "Weather in the capital", "answer": _returns(messages)[0]},
            {"label": "Product Name", "answer": product},
        ]
        return _output(info, {"answers": answers})

    class WeatherArgs(BaseModel):
        city: str

    def get_country(ctx: RunContext[Deps]) -> str:
        probe.invoked("get_country", deps=ctx.deps.country)
        return "Mexico City" if ctx.deps.country == "Mexico" else "unknown"

    def get_product_name() -> str:
        probe.invoked("get_product_name")
        return "Pydantic AI"

    def get_weather(args: WeatherArgs) -> str:
        probe.invoked("get_weather", city=args.city)
        return "sunny" if args.city == "Mexico City" else "unknown"

    agent = Agent(
        probe.model(respond),
        deps_type=Deps,
        output_type=Response,
        toolsets=[
            FunctionToolset[Deps](tools=[get_country], id="country", sequential=sequential),
            FunctionToolset[Deps](tools=[get_product_name], id="mcp", sequential=sequential),
            ExternalToolset(tool_defs=[ToolDefinition(name="external")], id="external"),
        ],
        tools=[get_weather],
        name="complex_agent",
        capabilities=probe.capabilities,
    )
    return Scenario(
        agent=agent,
        turns=["Tell me: the capital of the country; the weather there; the product name"],
        deps=Deps(country="Mexico"),
        ordered_invocations=sequential,
    )


@SCENARIOS.scenario()
def the_complex_agent(probe: Probe) -> Scenario:
    return _complex_agent(probe, sequential=False)


@SCENARIOS.scenario()
def the_complex_agent_with_sequential_toolsets(probe: Probe) -> Scenario:
    return _complex_agent(probe, sequential=True)


class CustomModelSettings(ModelSettings, total=False):
    custom_setting: str


@SCENARIOS.scenario()
def settings_of_the_model_reach_it(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return text(str(info.model_settings))

    settings = CustomModelSettings(max_tokens=123, custom_setting="custom_value")
    agent = Agent(probe.model(respond, settings=settings), name="settings_agent", capabilities=probe.capabilities)
    return Scenario(agent=agent, turns=["Give me those settings"])


@dataclass
class DynamicToolsetDeps:
    user_name: str


@SCENARIOS.scenario()
def a_dynamic_toolset_reads_the_deps(probe: Probe) -> Scenario:
    agent = Agent(
        probe.test_model(),
        name="dynamic_toolset_agent",
        deps_type=DynamicToolsetDeps,
        capabilities=probe.capabilities,
    )

    @agent.toolset(id="my_dynamic_tools")
    def my_dynamic_toolset(ctx: RunContext[DynamicToolsetDeps]) -> FunctionToolset[DynamicToolsetDeps]:
        toolset = FunctionToolset[DynamicToolsetDeps](id="dynamic_weather")

        @toolset.tool_plain
        def get_dynamic_weather(location: str) -> str:
            """Get the weather for a location."""
            probe.invoked("get_dynamic_weather", location=location, user=ctx.deps.user_name)
            return f"Weather in {location} for {ctx.deps.user_name}: sunny."

        return toolset

    return Scenario(agent=agent, turns=["What is the weather?"], deps=DynamicToolsetDeps(user_name="Alice"))


@dataclass
class ToggleableDeps:
    active: Literal["weather", "datetime"]

    def toggle(self) -> None:
        self.active = "datetime" if self.active == "weather" else "weather"


@SCENARIOS.scenario(xfail=DEPS_CHANGED_TOOLS)
def a_dynamic_toolset_follows_deps_a_tool_changed(probe: Probe) -> Scenario:
    def temperature_celsius(city: str) -> float:
        return 21.0

    def temperature_fahrenheit(city: str) -> float:
        return 69.8

    def conditions(ctx: RunContext[ToggleableDeps], city: str) -> str:
        return "It's sunny" if ctx.run_step % 2 == 0 else "It's raining"

    def now() -> str:
        return "2026-12-02T00:00:00"

    weather: FunctionToolset[ToggleableDeps] = FunctionToolset(
        tools=[temperature_celsius, temperature_fahrenheit, conditions]
    )
    datetime_toolset: FunctionToolset[ToggleableDeps] = FunctionToolset(tools=[now])

    agent = Agent(probe.test_model(), name="dynamic_agent", deps_type=ToggleableDeps, capabilities=probe.capabilities)

    @agent.toolset
    def toggleable_toolset(ctx: RunContext[ToggleableDeps]) -> FunctionToolset[ToggleableDeps]:
        return weather if ctx.deps.active == "weather" else datetime_toolset

    # Sequential (the suites' is not) so that it runs before the other calls in every variant.
    @agent.tool(sequential=True)
    def toggle(ctx: RunContext[ToggleableDeps]) -> None:
        probe.invoked("toggle", was=ctx.deps.active)
        ctx.deps.toggle()

    return Scenario(
        agent=agent,
        turns=["Toggle the toolset", "Toggle the toolset"],
        fresh_deps=lambda: ToggleableDeps("weather"),
    )


@SCENARIOS.scenario()
def toolsets_and_functions_give_instructions(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "noop", {}))
        return text(info.instructions or "<no instructions>")

    agent = Agent(probe.model(respond), name="instructions_agent", capabilities=probe.capabilities)

    @agent.instructions
    def sync_instructions_fn() -> str:
        return "You are a helpful assistant."

    @agent.toolset(id="dynamic_instruction_toolset", per_run_step=False)
    def instruction_only(ctx: RunContext[None]) -> FunctionToolset[None]:
        return FunctionToolset(instructions="SENTINEL_INSTRUCTION_FROM_DYNAMIC_TOOLSET", id="instruction-only-toolset")

    @agent.toolset(id="multi_step_instruction_toolset")
    def by_step(ctx: RunContext[None]) -> FunctionToolset[None]:
        toolset = FunctionToolset[None](instructions=f"INSTRUCTIONS_FOR_STEP_{ctx.run_step}", id="step-instructions")

        @toolset.tool_plain
        def noop() -> str:
            probe.invoked("noop")
            return "noop"

        return toolset

    return Scenario(agent=agent, turns=["hello", "again"])


@SCENARIOS.scenario()
def a_document_url_as_the_output(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return _output(info, {"url": "https://example.com/doc/12345", "media_type": "application/pdf"})

    agent = Agent(probe.model(respond), output_type=DocumentUrl, capabilities=probe.capabilities)
    return Scenario(agent=agent, turns=["Return a document"])


@SCENARIOS.scenario()
def an_uploaded_file_as_the_output(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        data = {"file_id": "file-abc123", "provider_name": "openai", "media_type": "image/png", "identifier": "file-1"}
        return _output(info, data)

    agent = Agent(probe.model(respond), output_type=UploadedFile, capabilities=probe.capabilities)
    return Scenario(agent=agent, turns=["Return a file"])


@SCENARIOS.scenario()
def a_test_model_calls_every_tool(probe: Probe) -> Scenario:
    agent = Agent(probe.test_model(), name="simple_agent", capabilities=probe.capabilities)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        probe.invoked("get_weather", city=city)
        return "sunny"

    @agent.tool
    def get_country(ctx: RunContext[None]) -> str:
        probe.invoked("get_country", run_step=ctx.run_step)
        return "Mexico"

    return Scenario(agent=agent, turns=["What is the capital of Mexico?", "and its weather?"])


@SCENARIOS.scenario()
def an_output_function_runs_with_the_run_context(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "lookup", {"city": "Bern"}))
        return _output(info, {"city": "Bern", "country": _returns(messages)[0]})

    def describe_city(ctx: RunContext[None], city: str, country: str) -> str:
        """Describe a city."""
        probe.invoked("describe_city", run_step=ctx.run_step, prompt=ctx.prompt)
        return f"{city} is in {country} (step {ctx.run_step})"

    agent = Agent(probe.model(respond), output_type=[describe_city], capabilities=probe.capabilities)

    @agent.tool_plain
    def lookup(city: str) -> str:
        return "Switzerland"

    return Scenario(agent=agent, turns=["where is Bern?"])


@SCENARIOS.scenario()
def a_text_output_function_and_an_output_retry(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        answers = sum(isinstance(message, ModelResponse) for message in messages)
        if answers == 0:
            return calls(("c1", "lookup", {"city": "Rome"}))
        return text("rome" if answers == 1 else "Rome, Italy")

    def shout(ctx: RunContext[None], answer: str) -> str:
        if answer.islower():
            raise ModelRetry("Capitalise the city.")
        return answer.upper()

    agent = Agent(probe.model(respond), output_type=TextOutput(shout), capabilities=probe.capabilities)

    @agent.tool_plain
    def lookup(city: str) -> str:
        return "Italy"

    return Scenario(agent=agent, turns=["where is Rome?"])


@SCENARIOS.scenario()
def a_fallback_model_takes_over_when_the_first_fails(probe: Probe) -> Scenario:
    def unavailable(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError(status_code=503, model_name="primary", body="overloaded")

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "lookup", {"city": "Oslo"}))
        return text(f"{info.model_settings} {_returns(messages)}")

    model = FallbackModel(probe.model(unavailable, name="primary"), probe.model(respond, name="backup"))
    agent = Agent(model, capabilities=probe.capabilities)

    @agent.tool_plain
    def lookup(city: str) -> str:
        return "Norway"

    return Scenario(agent=agent, turns=["where is Oslo?", "and again?"])


@SCENARIOS.scenario()
def thinking_beside_calls_and_the_answer_over_turns(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return ModelResponse(
                parts=[
                    ThinkingPart("The user wants tea facts."),
                    ToolCallPart("lookup", {"q": "tea"}, tool_call_id="c1"),
                ]
            )
        return ModelResponse(parts=[ThinkingPart("Now answer."), TextPart(f"Tea is {_returns(messages)[0]}.")])

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.tool_plain
    def lookup(q: str) -> str:
        return "a drink"

    return Scenario(agent=agent, turns=["what is tea?", "and coffee?"])


@SCENARIOS.scenario()
def prepared_output_tools_and_a_named_output_tool(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "lookup", {"city": "Lisbon"}))
        return _output(info, {"city": "Lisbon", "country": _returns(messages)[0]})

    async def describe_output(ctx: RunContext[None], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        return [replace(tool_def, description=f"answer at step {ctx.run_step}") for tool_def in tool_defs]

    agent = Agent(
        probe.model(respond),
        output_type=ToolOutput(City, name="final_answer", strict=True),
        capabilities=[PrepareOutputTools(describe_output), *probe.capabilities],
    )

    @agent.tool_plain
    def lookup(city: str) -> str:
        return "Portugal"

    return Scenario(agent=agent, turns=["where is Lisbon?", "and again?"])


@dataclass
class _AnswerTheSecondRequest(AbstractCapability[object]):
    """Skips the model for every request after a tool's result, with a canned answer (a capability's hook)."""

    async def before_model_request(
        self, ctx: RunContext[object], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        if any(isinstance(part, ToolReturnPart) for part in request_context.messages[-1].parts):
            raise SkipModelRequest(ModelResponse(parts=[TextPart(f"skipped at step {ctx.run_step}")]))
        return request_context


@dataclass
class _SwapTheModel(AbstractCapability[None]):
    """Serves every request with another model (a capability's hook)."""

    model: Model

    async def before_model_request(
        self, ctx: RunContext[None], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        request_context.model = self.model
        return request_context


@SCENARIOS.scenario()
def capabilities_skip_a_model_request_and_come_from_a_factory(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return calls(("c1", "lookup", {"city": "Riga"}))

    def factory(ctx: RunContext[object]) -> AbstractCapability[object]:
        return _AnswerTheSecondRequest()

    agent = Agent(probe.model(respond), capabilities=[factory, *probe.capabilities])

    @agent.tool_plain
    def lookup(city: str) -> str:
        return "Latvia"

    return Scenario(agent=agent, turns=["where is Riga?", "and again?"])


@SCENARIOS.scenario()
def a_capability_swaps_the_model(probe: Probe) -> Scenario:
    def never(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("the swapped-out model was asked")

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "lookup", {"city": "Vilnius"}))
        return text(f"{info.model_settings} {_returns(messages)}")

    swapped = probe.model(respond, name="swapped")
    agent = Agent(probe.model(never, name="original"), capabilities=[_SwapTheModel(swapped), *probe.capabilities])

    @agent.tool_plain
    def lookup(city: str) -> str:
        return "Lithuania"

    return Scenario(agent=agent, turns=["where is Vilnius?"])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack() -> AsyncIterator[ParityStack]:
    async with ParityStack(SCENARIOS) as served:
        yield served


@pytest.mark.parametrize("case", SCENARIOS.params())
async def test_a_session_behaves_like_a_plain_run(stack: ParityStack, case: Case) -> None:
    await check_parity(stack, case)
