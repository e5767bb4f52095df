"""OpenTelemetry traces of sessions on the in-memory host: a span per Step attempt, one trace per turn."""

import subprocess
import sys
import textwrap

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from dex_agents import AgentSessionOptions
from dex_agents.application.next import GoTo, StepName
from dex_agents.domain.tools import ToolEffect, ToolPolicy
from dex_agents.domain.turns import TurnCompleted
from dex_agents.domain.usage import AgentUsage
from dex_agents.infrastructure.tracing import turn_context
from dex_agents.testing import ScriptedRunner, assistant_message, deferred_tool_call, tool_calls_requested
from dex_agents.testing.memory import InMemorySessionHost
from dex_agents.testing.runner_doubles import ModelReply


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def answer(text: str = "Done.") -> TurnCompleted:
    return TurnCompleted(
        new_messages=[assistant_message(text)], usage=AgentUsage(model_calls=1, input_tokens=12, output_tokens=5)
    )


def refund_turn() -> list[ModelReply]:
    return [
        tool_calls_requested(
            deferred_tool_call("c1", "find_order", '{"order": 7}', policy=ToolPolicy(ToolEffect.READ)),
            deferred_tool_call("c2", "refund", '{"order": 7}', policy=ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)),
            usage=AgentUsage(model_calls=1, input_tokens=30, output_tokens=9),
        ),
        answer("Refunded order 7."),
    ]


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        named.setdefault(span.name, []).append(span)
    return named


def attr(span: ReadableSpan, key: str) -> object:
    assert span.attributes is not None
    return span.attributes.get(key)


async def test_a_turn_is_one_trace_with_a_span_per_step_attempt_under_the_step_that_began_it(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    runner = ScriptedRunner(refund_turn(), tool_replies={"find_order": "order 7: 20 EUR", "refund": "R-1"})
    session = InMemorySessionHost(runner, options=AgentSessionOptions(tracing=provider))
    await session.drive(await session.start())
    await session.send_user_message("Refund order 7")
    waiting = await session.drive(GoTo(step=StepName.AWAIT_USER_MESSAGE))
    assert await session.resolve_interrupt("turn-1.c2", approved=True, approver="ana")
    await session.drive(*waiting)

    spans = exporter.get_finished_spans()
    named = by_name(spans)
    start = named.pop("StartAgentSession")[0]
    assert start.parent is None, "a Step outside any turn is a trace of its own"
    (root,) = named["AwaitUserMessage"]
    assert root.parent is None
    assert attr(root, "dex_agents.turn.id") == "turn-1"
    assert session.state.value is not None
    assert session.state.value.turn_traceparent is None, "a finished turn drops its trace context"

    turn_spans = [span for group in named.values() for span in group]
    assert {span.context.trace_id for span in turn_spans} == {root.context.trace_id}
    children = [span for span in turn_spans if span is not root]
    assert all(span.parent is not None and span.parent.span_id == root.context.span_id for span in children)
    assert sorted(named) == [
        "AwaitToolApproval refund",
        "AwaitUserMessage",
        "CallSingleAttemptTool refund",
        "CallTool find_order",
        "ResumeTurn",
        "RunModel",
    ]
    first_model, last_model = named["RunModel"]
    assert attr(first_model, "dex_agents.session.id") == session.flow_id
    assert attr(first_model, "dex_agents.turn.id") == "turn-1"
    assert attr(first_model, "dex_agents.step.attempt") == 1
    assert attr(first_model, "dex_agents.step.retry") is False
    assert str(attr(first_model, "dex_agents.step.execution_id")).startswith("RunModel-")
    assert (attr(first_model, "gen_ai.usage.input_tokens"), attr(first_model, "gen_ai.usage.output_tokens")) == (30, 9)
    assert attr(first_model, "dex_agents.step.outcome") == "approval_requested"
    assert attr(last_model, "dex_agents.step.outcome") == "turn_completed"
    assert attr(last_model, "gen_ai.usage.input_tokens") == 12
    assert [event.name for event in first_model.events].count("tool_call_deferred") == 2

    (refund,) = named["CallSingleAttemptTool refund"]
    assert attr(refund, "dex_agents.tool.effect") == "non_idempotent_write"
    assert attr(refund, "dex_agents.tool.call_id") == "c2"
    assert (attr(refund, "dex_agents.tool.status"), attr(refund, "dex_agents.step.outcome")) == (
        "succeeded",
        "tool_succeeded",
    )
    assert "interrupt_raised" in [event.name for event in first_model.events], "the wait starts where it was asked"
    (approval,) = named["AwaitToolApproval refund"]
    assert attr(approval, "dex_agents.step.outcome") == "approval_answered"
    assert (attr(approval, "dex_agents.approval.approved"), attr(approval, "dex_agents.approval.approver")) == (
        True,
        "ana",
    )
    assert all("R-1" not in str(event.attributes) for span in spans for event in span.events), "no outputs"


async def test_each_turn_is_its_own_trace(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    session = InMemorySessionHost(
        ScriptedRunner([answer("one"), answer("two")]), options=AgentSessionOptions(tracing=provider)
    )
    await session.drive(await session.start("first"))
    await session.send_user_message("second")
    await session.drive(GoTo(step=StepName.AWAIT_USER_MESSAGE))

    traces: dict[object, set[str]] = {}
    for span in exporter.get_finished_spans():
        traces.setdefault(attr(span, "dex_agents.turn.id"), set()).add(f"{span.context.trace_id:032x}")
    assert set(traces) == {"turn-1", "turn-2"}
    assert all(len(ids) == 1 for ids in traces.values())
    assert traces["turn-1"] != traces["turn-2"]


async def test_a_retried_attempt_is_a_new_span_marked_as_a_retry_in_the_same_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    session = InMemorySessionHost(
        ScriptedRunner([ConnectionError("provider down"), answer()]), options=AgentSessionOptions(tracing=provider)
    )
    await session.drive(await session.start("hello"))

    failed, retried = by_name(exporter.get_finished_spans())["RunModel"]
    assert (attr(failed, "dex_agents.step.attempt"), attr(failed, "dex_agents.step.retry")) == (1, False)
    assert (attr(retried, "dex_agents.step.attempt"), attr(retried, "dex_agents.step.retry")) == (2, True)
    assert attr(failed, "dex_agents.step.execution_id") == attr(retried, "dex_agents.step.execution_id")
    assert failed.status.status_code is StatusCode.ERROR
    assert attr(failed, "dex_agents.step.outcome") == "error"
    assert [event.name for event in failed.events] == ["exception"]
    assert failed.context.trace_id == retried.context.trace_id
    assert attr(retried, "dex_agents.step.outcome") == "turn_completed"


async def test_a_turn_begun_untraced_continues_in_a_trace_derived_from_its_session_and_turn(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "find_order")), answer()], tool_replies={"find_order": "found"}
    )
    session = InMemorySessionHost(runner, options=AgentSessionOptions(tracing=provider))
    tracer, session.tracer = session.tracer, None  # a Worker that did not trace began the turn
    await session.drive(await session.start())
    await session.send_user_message("look it up")
    message = session.queue.take_one()
    assert message is not None
    await session.await_user_message([message])
    asked = await session.run_model()
    began = session.state.value
    assert began is not None
    assert (began.active_turn_id, began.turn_traceparent) == ("turn-1", None)
    session.tracer = tracer
    await session.drive(asked)

    spans = exporter.get_finished_spans()
    assert sorted(span.name for span in spans) == ["CallTool find_order", "RunModel"]
    derived = trace.get_current_span(turn_context(session.flow_id, began)).get_span_context()
    assert {span.context.trace_id for span in spans} == {derived.trace_id}
    assert {span.parent.span_id for span in spans if span.parent is not None} == {derived.span_id}


def test_tracing_takes_a_provider_or_a_switch_and_refuses_anything_else() -> None:
    assert AgentSessionOptions().tracing is False
    assert InMemorySessionHost(ScriptedRunner()).tracer is None
    assert InMemorySessionHost(ScriptedRunner(), options=AgentSessionOptions(tracing=True)).tracer is not None
    with pytest.raises(TypeError, match="TracerProvider"):
        AgentSessionOptions(tracing="yes")  # type: ignore[arg-type]


def test_a_session_not_traced_imports_no_opentelemetry() -> None:
    program = textwrap.dedent(
        """
        import asyncio
        import sys

        from dex_agents import AgentSessionFlow
        from dex_agents import TurnCompleted
        from dex_agents.testing import ScriptedRunner, assistant_message
        from dex_agents.testing.memory import InMemorySessionHost

        AgentSessionFlow(ScriptedRunner(), flow_type="echo")
        session = InMemorySessionHost(ScriptedRunner([TurnCompleted(new_messages=[assistant_message("hi")])]))

        async def turn():
            await session.drive(await session.start("hello"))

        asyncio.run(turn())
        assert session.messages.texts == ("hello", "hi"), session.messages.texts
        leaked = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
        assert not leaked, leaked
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
