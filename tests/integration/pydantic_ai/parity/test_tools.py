"""Parity of tool calls: results as values, retries, the tools' RunContext, ``prepare``.

Scenarios follow Pydantic AI's own tests (``tests/test_tools.py`` and the
durable-execution suites): each runs plainly and as a session, compared by
`check_parity`.
"""

import asyncio
import datetime
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel
from pydantic_ai import (
    Agent,
    BinaryContent,
    BinaryImage,
    DocumentUrl,
    ModelRetry,
    RunContext,
    TextContent,
    ToolFailed,
    ToolReturn,
)
from pydantic_ai.capabilities import PrepareTools
from pydantic_ai.messages import ModelMessage, ModelResponse, MultiModalContent, ToolReturnPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import UsageLimits

from dex_agents.adapters.pydantic_ai import IDEMPOTENCY_KEY_METADATA_KEY, run_messages
from tests.integration.pydantic_ai.parity.harness import Case, ParityStack, Scenario, ScenarioSet, check_parity
from tests.integration.pydantic_ai.parity.probe import Probe, calls, text, turn_step

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

SCENARIOS = ScenarioSet()


def _returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    last = messages[-1]
    return [part for part in last.parts if isinstance(part, ToolReturnPart)]


@SCENARIOS.scenario()
def tool_results_keep_their_types(probe: Probe) -> Scenario:
    class Order(BaseModel):
        order_id: str
        total: float

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "count", {}), ("c2", "flag", {}), ("c3", "order", {}), ("c4", "nothing", {}))
        return text(repr([part.content for part in _returns(messages)]))

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.tool_plain
    def count() -> int:
        return 8

    @agent.tool_plain
    def flag() -> bool:
        return True

    @agent.tool_plain
    def order() -> Order:
        return Order(order_id="7", total=12.5)

    @agent.tool_plain
    def nothing() -> None:
        return None

    return Scenario(agent=agent, turns=["call every tool"])


def _shown(value: object) -> object:
    return ("datetime", value.isoformat(), value.utcoffset()) if isinstance(value, datetime.datetime) else value


@SCENARIOS.scenario()
def tool_results_of_more_types_keep_them(probe: Probe) -> Scenario:
    class Size(Enum):
        SMALL = "small"

    @dataclass
    class Parcel:
        size: Size
        sent: datetime.date

    class Line(BaseModel):
        sku: str
        quantity: int

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(
                ("c1", "when", {}), ("c2", "lines", {}), ("c3", "parcel", {}), ("c4", "totals", {}), ("c5", "ratio", {})
            )
        # A datetime's repr names its tzinfo's class (Pydantic's TzInfo(0) is datetime.UTC): compare the value.
        return text(repr([_shown(part.content) for part in _returns(messages)]))

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.tool_plain
    def when() -> datetime.datetime:
        return datetime.datetime(2026, 12, 2, 1, 30, tzinfo=datetime.UTC)

    @agent.tool_plain
    def lines() -> list[Line]:
        return [Line(sku="a", quantity=2), Line(sku="b", quantity=1)]

    @agent.tool_plain
    def parcel() -> Parcel:
        return Parcel(size=Size.SMALL, sent=datetime.date(2026, 12, 1))

    @agent.tool_plain
    def totals() -> dict[str, float]:
        return {"net": 10.0, "tax": 2.5}

    @agent.tool_plain
    def ratio() -> float:
        return 0.1 + 0.2

    return Scenario(agent=agent, turns=["tell me everything"])


def _calls_until_told(probe: Probe, limits: UsageLimits, turns: Sequence[str] = ("ping until done",)) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = turn_step(messages)
        if step < 3:
            return calls((f"c{step}a", "ping", {"n": step}), (f"c{step}b", "ping", {"n": step + 10}))
        return text("done")

    # A turn that fails is kept with a note for the next one (by design), so a limit is the last turn's.
    return Scenario(agent=_ping_agent(probe, respond), turns=turns, usage_limits=limits)


def _ping_agent(probe: Probe, respond: Callable[[list[ModelMessage], AgentInfo], ModelResponse]) -> Agent[None, str]:
    """An agent of ``respond`` with one tool, ``ping``, which returns its ``n``."""
    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.tool_plain
    def ping(n: int) -> int:
        probe.invoked("ping", n=n)
        return n

    return agent


@SCENARIOS.scenario()
def a_request_limit_ends_the_turn_as_a_plain_run_ends(probe: Probe) -> Scenario:
    return _calls_until_told(probe, UsageLimits(request_limit=2))


@SCENARIOS.scenario()
def a_tool_calls_limit_ends_the_turn_as_a_plain_run_ends(probe: Probe) -> Scenario:
    return _calls_until_told(probe, UsageLimits(tool_calls_limit=3))


@SCENARIOS.scenario()
def a_tool_calls_limit_counts_a_call_to_an_unknown_tool(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "ping", {"n": 1}), ("c2", "no_such_tool", {}))
        return text("done")

    # A plain run counts the unknown tool's call too, so one function call beside it passes a limit of one.
    return Scenario(agent=_ping_agent(probe, respond), turns=["ping"], usage_limits=UsageLimits(tool_calls_limit=1))


@SCENARIOS.scenario()
def usage_limits_the_turn_stays_within(probe: Probe) -> Scenario:
    return _calls_until_told(probe, UsageLimits(request_limit=4, tool_calls_limit=6), ("ping until done", "again"))


@SCENARIOS.scenario()
def tool_return_content_and_metadata_reach_the_model(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "chart", {"city": "Paris"}))
        return text(f"saw {len(messages[-1].parts)} parts")

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.tool_plain
    def chart(city: str) -> ToolReturn[str]:
        return ToolReturn(
            return_value=f"chart of {city}",
            content=[f"Here is the chart of {city}:", BinaryContent(b"\x89PNG", media_type="image/png")],
            metadata={"city": city, "points": 3},
        )

    return Scenario(agent=agent, turns=["draw"])


def _own_metadata(ctx: RunContext[None]) -> dict[str, Any] | None:
    """The run's metadata without the key a session's tool Step adds (its documented difference)."""
    if ctx.metadata is None:
        return None
    return {key: value for key, value in ctx.metadata.items() if key != IDEMPOTENCY_KEY_METADATA_KEY}


@SCENARIOS.scenario()
def tools_read_the_run_metadata(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "echo_metadata", {}))
        return text(str(_returns(messages)[0].content))

    agent = Agent(probe.model(respond), metadata={"tenant": "a"}, capabilities=probe.capabilities)

    @agent.tool
    def echo_metadata(ctx: RunContext[None]) -> str:
        probe.invoked("echo_metadata", metadata=_own_metadata(ctx))
        assert ctx.metadata is not None
        return f"tenant={ctx.metadata['tenant']}"

    return Scenario(agent=agent, turns=["who am I?", "and now?"])


@SCENARIOS.scenario()
def tools_read_metadata_computed_from_the_run(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "echo_metadata", {}))
        return text(str(_returns(messages)[0].content))

    def metadata(ctx: RunContext[None]) -> dict[str, Any]:
        return {"prompt": ctx.prompt}

    agent = Agent(probe.model(respond), metadata=metadata, capabilities=probe.capabilities)

    @agent.tool
    def echo_metadata(ctx: RunContext[None]) -> str:
        probe.invoked("echo_metadata", metadata=_own_metadata(ctx))
        return f"metadata={_own_metadata(ctx)}"

    return Scenario(agent=agent, turns=["first question", "second question"])


@SCENARIOS.scenario()
def multimodal_tool_returns(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "picture", {}), ("c2", "manual", {}))
        return text("looked at both")

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.tool_plain
    def picture() -> BinaryContent:
        return BinaryContent(b"\x89PNG\r\n", media_type="image/png")

    @agent.tool_plain
    def manual() -> list[Any]:
        return ["the manual:", DocumentUrl(url="https://example.com/manual.pdf")]

    return Scenario(agent=agent, turns=["show me"])


@SCENARIOS.scenario()
def model_retry_reaches_the_model(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = turn_step(messages)
        if step == 0:
            return calls(("c1", "get_weather_in_city", {"city": "CDMX"}))
        if step == 1:
            return calls(("c2", "get_weather_in_city", {"city": "Mexico City"}))
        return text("The weather in Mexico City is sunny.")

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.tool_plain
    def get_weather_in_city(city: str) -> str:
        probe.invoked("get_weather_in_city", city=city)
        if city != "Mexico City":
            raise ModelRetry("Did you mean Mexico City?")
        return "sunny"

    return Scenario(agent=agent, turns=["What is the weather in CDMX?"])


@SCENARIOS.scenario()
def tool_failed_reaches_the_model(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) < 3:
            return calls((f"c{turn_step(messages)}", "failing_tool", {}))
        return text("Giving up.")

    agent = Agent(probe.model(respond), retries=1, capabilities=probe.capabilities)

    @agent.tool_plain
    def failing_tool() -> str:
        raise ToolFailed("Disk full")

    return Scenario(agent=agent, turns=["Call the failing tool"])


@SCENARIOS.scenario()
def tool_retries_are_counted_across_the_turn(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = turn_step(messages)
        if step < 4:
            return calls((f"c{step}", "always_fail", {}))
        return text("done")  # never reached: the third retry exceeds the budget

    agent = Agent(probe.model(respond), retries={"tools": 2, "output": 2}, capabilities=probe.capabilities)

    @agent.tool
    def always_fail(ctx: RunContext[None]) -> str:
        probe.invoked("always_fail", retry=ctx.retry, max_retries=ctx.max_retries, last_attempt=ctx.last_attempt)
        raise ModelRetry("Please try again.")

    return Scenario(agent=agent, turns=["Always fail!"], ordered_invocations=True)


@SCENARIOS.scenario()
def retry_until_the_last_attempt(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = turn_step(messages)
        if step < 3:
            return calls((f"c{step}", "always_fail", {}))
        return text(str(_returns(messages)[0].content))

    agent = Agent(probe.model(respond), retries={"tools": 2, "output": 2}, capabilities=probe.capabilities)

    @agent.tool
    def always_fail(ctx: RunContext[None]) -> str:
        probe.invoked("always_fail", retry=ctx.retry, last_attempt=ctx.last_attempt)
        if ctx.last_attempt:
            return "I guess you never learn"
        raise ModelRetry("Please try again.")

    return Scenario(agent=agent, turns=["Always fail!"], ordered_invocations=True)


@SCENARIOS.scenario()
def tools_see_the_run_context_of_a_plain_run(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = turn_step(messages)
        if step < 2:
            return calls((f"c{step}a", "look", {"what": "a"}), (f"c{step}b", "look", {"what": "b"}))
        return text("seen")

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    # A tool that reads ctx.messages asks for them (a plain run ignores the metadata).
    @agent.tool(metadata=run_messages())
    def look(ctx: RunContext[None], what: str) -> str:
        last = ctx.messages[-1]
        probe.invoked(
            "look",
            what=what,
            prompt=ctx.prompt,
            run_step=ctx.run_step,
            retry=ctx.retry,
            requests=ctx.usage.requests,
            messages=len(ctx.messages),
            calls_in_last_response=len(last.parts),
            tool_call_id=ctx.tool_call_id,
        )
        return f"looked at {what}"

    return Scenario(agent=agent, turns=["look twice", "and again"])


@dataclass
class Country:
    country: str


@SCENARIOS.scenario()
def deps_reach_run_context_tools(probe: Probe) -> Scenario:
    class WeatherArgs(BaseModel):
        city: str

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = turn_step(messages)
        if step == 0:
            return calls(("c1", "get_country", {}))
        if step == 1:
            return calls(("c2", "get_weather", {"city": "Mexico City"}))
        return text("Mexico City is sunny")

    agent = Agent(probe.model(respond), deps_type=Country, capabilities=probe.capabilities)

    @agent.tool
    def get_country(ctx: RunContext[Country]) -> str:
        probe.invoked("get_country", deps=ctx.deps.country)
        return ctx.deps.country

    @agent.tool_plain
    def get_weather(args: WeatherArgs) -> str:
        probe.invoked("get_weather", city=args.city)
        return "sunny" if args.city == "Mexico City" else "unknown"

    return Scenario(agent=agent, turns=["the weather in the capital"], deps=Country("Mexico"))


@SCENARIOS.scenario()
def invalid_arguments_are_retried_by_pydantic_ai(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = turn_step(messages)
        if step == 0:
            return calls(("c1", "add", {"a": "one", "b": 2}))
        if step == 1:
            return calls(("c2", "add", {"a": 1, "b": 2}))
        return text("3")

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        probe.invoked("add", a=a, b=b)
        return a + b

    return Scenario(agent=agent, turns=["one plus two"])


@SCENARIOS.scenario()
def prepare_runs_where_a_plain_run_runs_it(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "slow_tool", {}))
        return text(str(_returns(messages)[0].content))

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    async def short_timeout(ctx: RunContext[None], tool_def: ToolDefinition) -> ToolDefinition:
        probe.invoked("prepare", run_step=ctx.run_step, retry=ctx.retry)
        return replace(tool_def, timeout=0.05, description="A slow tool (prepared).", strict=True)

    @agent.tool(prepare=short_timeout)
    async def slow_tool(ctx: RunContext[None]) -> str:
        await asyncio.sleep(1)
        return "slept"

    return Scenario(agent=agent, turns=["call the slow tool"], ordered_invocations=True)


@SCENARIOS.scenario()
def prepare_tools_sees_the_retries(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = turn_step(messages)
        if step < 3:
            return calls((f"c{step}", "flaky", {}))
        return text("ok")

    async def prepare_tool_defs(ctx: RunContext[None], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        probe.invoked("prepare_tools", run_step=ctx.run_step, retries=dict(ctx.retries))
        return tool_defs

    agent = Agent(
        probe.model(respond),
        retries={"tools": 5, "output": 3},
        capabilities=[*probe.capabilities, PrepareTools(prepare_tool_defs)],
    )

    @agent.tool
    def flaky(ctx: RunContext[None]) -> str:
        probe.invoked("flaky", retry=ctx.retry)
        if ctx.retry < 2:
            raise ModelRetry("Please try again.")
        return "finally"

    return Scenario(agent=agent, turns=["go"], ordered_invocations=True)


@SCENARIOS.scenario()
def multimodal_content_nested_and_tagged_in_tool_returns(probe: Probe) -> Scenario:
    """The durable suites' multimodal agents: a list, a mapping and tagged text holding files and URLs."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(
                ("c1", "get_multimodal_content", {}),
                ("c2", "get_nested_multimodal_content", {}),
                ("c3", "tagged", {}),
                ("c4", "analyze_data", {}),
            )
        return text(repr([type(part.content).__name__ for part in _returns(messages)]))

    agent = Agent(probe.model(respond), capabilities=probe.capabilities)

    @agent.tool
    def get_multimodal_content(ctx: RunContext[None]) -> list[str | MultiModalContent]:
        return [
            "test",
            BinaryImage(data=b"\x89PNG", media_type="image/png"),
            # The URL does not hint at the media type: it is given.
            DocumentUrl(url="https://example.com/doc/12345", media_type="application/pdf"),
        ]

    @agent.tool
    def get_nested_multimodal_content(ctx: RunContext[None]) -> dict[str, str | MultiModalContent]:
        return {
            "caption": "see attached",
            "attachment": BinaryImage(data=b"\x89PNG", media_type="image/png"),
            "source": DocumentUrl(url="https://example.com/doc/12345", media_type="application/pdf"),
        }

    @agent.tool_plain
    def tagged() -> TextContent:
        return TextContent("for the model", metadata={"for": "the application"})

    @agent.tool_plain
    def analyze_data() -> ToolReturn:
        return ToolReturn(
            return_value="analysis result", content="extra content for model", metadata={"key": "value", "count": 42}
        )

    return Scenario(agent=agent, turns=["inspect attachment"])


@SCENARIOS.scenario()
def tools_see_the_agent_and_the_tools_available(probe: Probe) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(("c1", "report_run_context", {}))
        return text(str(_returns(messages)[0].content))

    agent = Agent(probe.model(respond), name="ctx_agent_test", capabilities=probe.capabilities)

    @agent.tool
    def report_run_context(ctx: RunContext[None]) -> dict[str, Any]:
        """Report what a tool sees on its run context."""
        report = {
            "agent": (ctx.agent.name or "unnamed") if ctx.agent else "unknown",
            "has_conversation_id": ctx.conversation_id is not None,
            "available_tool_names": sorted(ctx.available_tool_names),
            "tool_call_approved": ctx.tool_call_approved,
            "called_as": ctx.tool_name,
        }
        probe.invoked("report_run_context", **report)
        return report

    @agent.tool_plain
    def other() -> str:
        return "other"

    return Scenario(agent=agent, turns=["What did I ask?"])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack() -> AsyncIterator[ParityStack]:
    async with ParityStack(SCENARIOS) as served:
        yield served


@pytest.mark.parametrize("case", SCENARIOS.params())
async def test_a_session_behaves_like_a_plain_run(stack: ParityStack, case: Case) -> None:
    await check_parity(stack, case)
