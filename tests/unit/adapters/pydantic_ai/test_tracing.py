"""Pydantic AI's own spans nest under the session's Step spans; a live run's spans go to the Step it serves."""

import json

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from dex_agents import AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents.adapters.pydantic_ai import PydanticAIRunner, pydantic_ai_session_flow
from dex_agents.infrastructure.tracing import TRACER_NAME
from dex_agents.testing import InMemorySessionHost


def traced_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def lookup_agent(provider: TracerProvider) -> Agent[None, str]:
    """Two lookups then an answer; each model request opens a span of its own (as an HTTP client's would)."""
    tracer = provider.get_tracer("model-client")

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        with tracer.start_as_current_span("model http request"):
            asked = sum(isinstance(message, ModelResponse) for message in messages)
            if asked < 2:
                return ModelResponse(parts=[ToolCallPart("lookup", {"n": asked}, tool_call_id=f"c{asked}")])
            return ModelResponse(parts=[TextPart("found both")])

    agent: Agent[None, str] = Agent(FunctionModel(respond), instructions="Look up.")

    @agent.tool_plain
    def lookup(n: int) -> str:
        """Look one thing up."""
        return f"thing {n}"

    return agent


def session_of(agent: Agent[None, str], provider: TracerProvider) -> InMemorySessionHost:
    options = AgentSessionOptions(tracing=provider, tool_policies={"lookup": ToolPolicy(ToolEffect.READ)})
    return InMemorySessionHost(PydanticAIRunner(agent), options=options)


def ours(span: ReadableSpan) -> bool:
    return span.instrumentation_scope is not None and span.instrumentation_scope.name == TRACER_NAME


def step_above(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> ReadableSpan | None:
    """The nearest of our Step spans above ``span``."""
    by_id = {s.context.span_id: s for s in spans}
    parent = by_id.get(span.parent.span_id) if span.parent else None
    while parent is not None and not ours(parent):
        parent = by_id.get(parent.parent.span_id) if parent.parent else None
    return parent


async def test_pydantic_ai_instrumentation_nests_model_requests_and_tools_under_their_step_spans() -> None:
    provider, exporter = traced_provider()
    session = session_of(lookup_agent(provider), provider)
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    try:
        await session.drive(await session.start("find two things"))
    finally:
        Agent.instrument_all(False)
    assert session.messages.texts[-1] == "found both"

    spans = exporter.get_finished_spans()
    requests = [span for span in spans if span.name.startswith("chat ")]
    tools = [span for span in spans if span.name == "execute_tool lookup"]
    model_steps = [span for span in spans if ours(span) and span.name == "RunModel"]
    assert len(requests) == len(model_steps) == 3
    assert sorted(id(step_above(span, spans)) for span in requests) == sorted(id(step) for step in model_steps)
    assert len(tools) == 2
    assert [getattr(step_above(span, spans), "name", None) for span in tools] == ["CallTool lookup"] * 2
    assert len({span.context.trace_id for span in spans if span.name != "StartAgentSession"}) == 1


async def test_a_live_run_has_one_span_per_step_and_its_requests_nest_under_the_step_they_serve() -> None:
    provider, exporter = traced_provider()
    session = session_of(lookup_agent(provider), provider)
    await session.drive(await session.start("find two things"))

    last = session.messages.read([session.messages.texts.index("found both") + 1])[0]
    assert len({item["run_id"] for item in json.loads(last.framework_item)}) == 1
    responses = [
        item["run_id"]
        for sequence in range(1, len(session.messages.texts) + 1)
        for item in json.loads(session.messages.read([sequence])[0].framework_item)
        if item.get("kind") == "response"
    ]
    assert len(responses) == 3
    assert len(set(responses)) == 1, "one live run served the turn's three model Steps"

    spans = exporter.get_finished_spans()
    steps = [span for span in spans if ours(span)]
    assert sorted(span.name for span in steps).count("RunModel") == 3
    assert len({(s.attributes or {}).get("dex_agents.step.execution_id") for s in steps}) == len(steps), "no twice"
    requests = [span for span in spans if span.name == "model http request"]
    assert len(requests) == 3
    served = [step_above(span, spans) for span in requests]
    assert [getattr(step, "name", None) for step in served] == ["RunModel"] * 3
    assert len({id(step) for step in served}) == 3, "each continued request nests under the Step it serves"


def test_the_flow_builder_switches_tracing_on_with_a_provider() -> None:
    provider, _exporter = traced_provider()
    flow = pydantic_ai_session_flow(lookup_agent(provider), flow_type="Lookup", tracing=provider)
    assert flow.options.tracing is provider
    assert pydantic_ai_session_flow(lookup_agent(provider), flow_type="Lookup").options.tracing is False
