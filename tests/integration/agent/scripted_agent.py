"""A command-driven agent for the binding's integration tests, shared by the test and its Worker children.

The turn's user message is a JSON script::

    {"tools": [{"id": "c1", "name": "read_tool", "args": {"gate": "g1"}}],
     "model_gate": "m1", "fail_model": "always" | "after_tools",
     "stream": 1000000, "delta": 1024,
     "contract": "empty_run_state" | "slash_id" | "duplicate_ids",
     "tool_results": "each" | "together"}

The first model call asks for ``tools`` (in order); the next one answers with
the outcome of each, after one tool-result message per call (``each``) or
one for all of them (``together``) when ``tool_results`` asks for them. Tool
arguments steer the tool: ``gate`` parks it at a `FileGate`, ``error`` raises
`ToolExecutionError`, ``crash`` raises, ``big_output`` returns that many
characters, ``die`` SIGKILLs the Worker once (``after_effect``: right after the
tool's effect, its `InvocationLog` line; ``after_tool``: once it returned).
``emit`` makes the model answer with that many assistant messages of
``emit_size`` characters each (a long history without many turns);
``overflow`` makes the model raise `ContextOverflowError` while its window has
no summary (``"resuming"``: only a call after tool results), after parking at
the `FileGate` ``overflow_gate`` when set. ``compact`` (the runner's `HistoryCompactor`) records each call and,
with ``$AGENT_TEST_COMPACT_GATE`` set, parks its first call at that gate.
``$AGENT_TEST_CONTEXT_BUDGET`` and ``$AGENT_TEST_KEEP_RECENT`` set the compaction
policy. Every model call records its window: message count, bytes and summary.
The reconcile probe of ``reconciled_write`` looks for the call's effect (a
``tool`` line with its idempotency key) in the `InvocationLog`: found, it
answers the output the tool would have returned; not found, not applied.
``probe: "fails"`` makes the probe raise instead, ``probe: "unknown"`` answer unknown.
With ``$AGENT_TEST_KILL_POINT`` set, the Flow is a `KillPointFlow`. ``stream``
streams that many characters of text and answers with them; ``contract`` asks
for tools in a way the runner contract forbids. A message holding `BREAK_BUILD`
makes ``build_user_message`` raise; one holding `WRONG_ROLE` makes it return an
assistant message. Steered messages a model call gets are counted on its
``model`` line (``steered``) and stored after the tool results. Every real model and tool
call is counted in the `InvocationLog` under ``$AGENT_TEST_STATE``. A user message in the
runner-conformance scenarios' script language (``{"name": ..., "steps": [...]}``) runs in
`conformance_script` instead, its tool calls too.
"""

import asyncio
import hashlib
import json
import os
import signal
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs

from dex_agents import (
    DEFAULT_EVENT_STREAM_CAPACITY_BYTES,
    AgentMessage,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    CompactionPolicy,
    CompactionSummary,
    ContextOverflowError,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ReconcileResult,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.domain.usage import AgentUsage
from tests.integration.agent import conformance_script
from tests.integration.case_state import case_state
from tests.integration.scenario_tools import SCENARIO_TOOL_POLICIES

STATE_ENV = "AGENT_TEST_STATE"
DEADLINE_ENV = "AGENT_TEST_INTERRUPT_DEADLINE_SECONDS"
HEARTBEAT_ENV = "AGENT_TEST_HEARTBEAT_SECONDS"
EVENT_CAPACITY_ENV = "AGENT_TEST_EVENT_CAPACITY_BYTES"
WORKER_SLOTS_ENV = "AGENT_TEST_WORKER_SLOTS"
KILL_POINT_ENV = "AGENT_TEST_KILL_POINT"
COMPACT_GATE_ENV = "AGENT_TEST_COMPACT_GATE"
CONTEXT_BUDGET_ENV = "AGENT_TEST_CONTEXT_BUDGET"
KEEP_RECENT_ENV = "AGENT_TEST_KEEP_RECENT"
CLOCK_SKEW_ENV = "AGENT_TEST_WORKER_CLOCK_SKEW_SECONDS"
COALESCE_ENV = "AGENT_TEST_DELTA_COALESCE_SECONDS"
TRACE_FILE_ENV = "AGENT_TEST_TRACE_FILE"
FLOW_TYPE = "ScriptedAgent"
BREAK_BUILD = "[break build_user_message]"
WRONG_ROLE = "[build with the assistant role]"

TOOL_POLICIES = {
    **SCENARIO_TOOL_POLICIES,
    "approved_write": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
    "reconciled_write": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False, reconcilable=True),
}


state_dir, invocations, gate = case_state(STATE_ENV)
CONFORMANCE = conformance_script.ConformanceScript(invocations, gate)


def script(text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def write_from_threads(turn: AgentTurnContext) -> None:
    """Write one event from another thread now, and one after the Step call has returned."""
    writer = threading.Thread(target=turn.events.write_text_delta, args=("from a thread",))
    writer.start()
    writer.join()

    def too_late() -> None:
        turn.events.write_text_delta("too late")
        invocations().record("late_write", turn.turn_id)

    threading.Timer(0.2, too_late).start()


def tool_results(turn: AgentTurnContext, shape: str | None) -> list[FrameworkMessage]:
    """The turn's tool-result messages, as the script's ``tool_results`` asks."""
    records = sorted(turn.tool_calls.values(), key=lambda record: record.deferral_order)
    if not records or shape is None:
        return []
    if shape == "together":
        item = json.dumps([record.tool_call_id for record in records])
        return [
            FrameworkMessage(
                role=MessageRole.TOOL, framework_item=item, tool_call_ids=[r.tool_call_id for r in records]
            )
        ]
    return [
        FrameworkMessage(
            role=MessageRole.TOOL,
            framework_item=json.dumps(record.tool_call_id),
            tool_call_id=record.tool_call_id,
            tool_name=record.tool_name,
        )
        for record in records
    ]


class ScriptedAgentRunner:
    """Runs the JSON script of the turn's user message."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        if BREAK_BUILD in text:
            raise ValueError("this runner cannot build that message")
        role = MessageRole.ASSISTANT if WRONG_ROLE in text else MessageRole.USER
        return FrameworkMessage(role=role, framework_item=json.dumps({"user": text}), text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        prompt = next(m.text for m in turn.messages if m.turn_id == turn.turn_id and m.role is MessageRole.USER)
        assert prompt is not None
        steps = script(prompt)
        if conformance_script.speaks(steps):
            return await CONFORMANCE.run_model_step(turn, steps)
        return await self._run_model_call(turn, steps)

    async def _run_model_call(self, turn: AgentTurnContext, steps: dict[str, Any]) -> AgentTurnOutcome:
        """Answer one model call of a turn in the scripted agent's own script language."""
        steered = [message.text for message in turn.steered_messages]
        invocations().record("model", turn.turn_id, attempt=turn.attempt, resuming=turn.is_resuming, steered=steered)
        if turn.is_resuming:
            invocations().record("run_state", turn.turn_id, bytes=len(turn.framework_run_state or ""))
        invocations().record(
            "window",
            turn.turn_id,
            messages=len(turn.messages),
            bytes=sum(len(m.framework_item) for m in turn.messages),
            first=turn.messages[0].sequence if turn.messages else None,
            summary=None if turn.summary is None else turn.summary.number,
        )
        overflow = steps.get("overflow")
        if overflow and turn.summary is None and (overflow != "resuming" or turn.is_resuming):
            overflow_gate = steps.get("overflow_gate")
            if overflow_gate:
                await gate(overflow_gate).wait_for_release()
            raise ContextOverflowError("prompt is too long: the provider refused the context")
        if steps.get("emit"):
            size = int(steps.get("emit_size", 100))
            emitted = [
                FrameworkMessage(
                    role=MessageRole.ASSISTANT, framework_item=json.dumps(f"{n}:" + "e" * size), text=str(n)
                )
                for n in range(int(steps["emit"]))
            ]
            return TurnCompleted(new_messages=emitted, usage=AgentUsage(model_calls=1))
        turn.events.write_text_delta(f"model call {turn.attempt}")
        if steps.get("thread_events") and not turn.is_resuming:
            write_from_threads(turn)
        model_gate = steps.get("model_gate")
        if model_gate and not turn.is_resuming:
            await gate(model_gate).wait_for_release()
        usage = AgentUsage(model_calls=1, input_tokens=10, output_tokens=5)
        if steps.get("fail_model") == "always":
            raise RuntimeError("the model is down")
        if steps.get("stream"):
            return stream_answer(turn, int(steps["stream"]), int(steps.get("delta", 1024)), usage)
        if steps.get("contract") and not turn.is_resuming:
            return broken_contract(turn, str(steps["contract"]), usage)
        if not turn.is_resuming and steps.get("tools"):
            calls = [
                DeferredToolCall(
                    tool_call_id=tool["id"],
                    tool_name=tool["name"],
                    arguments=json.dumps(tool.get("args", {}), sort_keys=True),
                    policy=turn.resolve_tool_policy(tool["name"]),
                )
                for tool in steps["tools"]
            ]
            # ``run_state_pad`` deflates to almost nothing; ``run_state_noise`` (hex digits of hashes) hardly at all.
            noise = int(steps.get("run_state_noise", 0))
            pad = "r" * int(steps.get("run_state_pad", 0))
            pad += "".join(hashlib.sha256(str(n).encode()).hexdigest() for n in range(-(-noise // 64)))[:noise]
            run_state = json.dumps({"asked": len(calls), "pad": pad})
            return ToolCallsRequested(framework_run_state=run_state, tool_calls=calls, usage=usage)
        if steps.get("fail_model") == "after_tools":
            raise RuntimeError("the model failed after the tools")
        outcomes = {
            record.tool_call_id: f"{record.status.value}: {describe_tool_call_outcome(record)}"
            for record in turn.tool_calls.values()
        }
        answer = FrameworkMessage(
            role=MessageRole.ASSISTANT, framework_item=json.dumps(outcomes), text=json.dumps(outcomes, sort_keys=True)
        )
        # Steered messages join after the tool results, where the model saw them.
        joined = [self.build_user_message(text) for text in steered]
        return TurnCompleted(
            new_messages=[*tool_results(turn, steps.get("tool_results")), *joined, answer], usage=usage
        )

    async def compact(self, messages: Sequence[AgentMessage], previous_summary: str | None) -> CompactionSummary:
        invocations().record("compact", "history", first=messages[0].sequence, through=messages[-1].sequence)
        gate_name = os.environ.get(COMPACT_GATE_ENV)
        if gate_name and first_death(f"compact-gate-{gate_name}"):
            await gate(gate_name).wait_for_release()
        text = f"{previous_summary or ''}|{messages[0].sequence}-{messages[-1].sequence}"[-2000:]
        return CompactionSummary(text, usage=AgentUsage(model_calls=1, input_tokens=len(messages)))

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        if call.tool_call.framework_state == conformance_script.DIALECT:
            return await CONFORMANCE.execute(call)
        args: dict[str, Any] = json.loads(call.tool_call.arguments)
        invocations().record(
            "tool",
            call.tool_call.tool_name,
            key=call.idempotency_key,
            attempt=call.attempt,
            id=call.tool_call.tool_call_id,
        )
        if args.get("die") == "after_effect" and first_death("after_effect"):
            die()  # the effect (the line above) happened; nothing of this Step left the Worker since
        if args.get("die") == "after_tool" and first_death("after_tool"):
            asyncio.get_running_loop().call_soon(die)  # once the tool has returned its result
        if "gate" in args:
            await gate(args["gate"]).wait_for_release()
        if "error" in args:
            raise ToolExecutionError(args["error"])
        if "value_error" in args:
            raise ValueError(args["value_error"])
        if "big_output" in args:
            return ToolExecutionResult("y" * int(args["big_output"]))
        if args.get("crash"):
            raise RuntimeError(f"{call.tool_call.tool_name} crashed")
        return ToolExecutionResult(tool_output(call))

    async def reconcile_tool_call(self, call: DeferredToolExecution) -> ReconcileResult:
        args: dict[str, Any] = json.loads(call.tool_call.arguments)
        invocations().record("probe", call.tool_call.tool_name, key=call.idempotency_key, attempt=call.attempt)
        match args.get("probe"):
            case "fails":
                raise RuntimeError("the outbox cannot be read")
            case "unknown":
                return ReconcileResult.unknown()
            case _:
                if invocations().count("tool", call.tool_call.tool_name, key=call.idempotency_key):
                    return ReconcileResult.applied(tool_output(call))
                return ReconcileResult.not_applied()


def tool_output(call: DeferredToolExecution) -> str:
    """What the tool returns for ``call`` (and what its probe finds once it took effect)."""
    return f"{call.tool_call.tool_name} done with key {call.idempotency_key}"


def stream_answer(turn: AgentTurnContext, size: int, delta: int, usage: AgentUsage) -> TurnCompleted:
    """Stream ``size`` characters of text in deltas of ``delta`` characters, and answer with all of it."""
    text = "".join(chr(ord("a") + n % 26) for n in range(size))
    for start in range(0, size, delta):
        turn.events.write_text_delta(text[start : start + delta])
    return TurnCompleted(
        new_messages=[FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=json.dumps(text), text=text)],
        usage=usage,
    )


def broken_contract(turn: AgentTurnContext, kind: str, usage: AgentUsage) -> ToolCallsRequested:
    """Ask for tools in a way the runner contract forbids."""
    read = turn.resolve_tool_policy("read_tool")
    call = DeferredToolCall(tool_call_id="c1", tool_name="read_tool", arguments="{}", policy=read)
    match kind:
        case "empty_run_state":
            return ToolCallsRequested(framework_run_state="", tool_calls=[call], usage=usage)
        case "slash_id":
            slashed = DeferredToolCall(tool_call_id="c/1", tool_name="read_tool", arguments="{}", policy=read)
            return ToolCallsRequested(framework_run_state="{}", tool_calls=[slashed], usage=usage)
        case "duplicate_ids":
            return ToolCallsRequested(framework_run_state="{}", tool_calls=[call, call], usage=usage)
        case _:
            raise AssertionError(f"unknown contract breach {kind!r}")


def first_death(point: str) -> bool:
    """Whether this is the first time any Worker reached kill point ``point`` (then it is marked)."""
    marker = state_dir() / f"died-{point}"
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return False
    return True


def die() -> None:
    """SIGKILL this Worker process at once."""
    os.kill(os.getpid(), signal.SIGKILL)


class KillingStreamReader:
    """A Worker's Dex Client whose Stream reads SIGKILL the Worker once at a named point of a single-attempt Step.

    ``before_confirmation``: on the Step's first read after it wrote ``tool_call_started``
    (its second read: the first is the check for an earlier delivery);
    ``after_confirmation``: once a read returned the Step's own marked start, before the tool runs.
    """

    def __init__(self, client: Any, point: str) -> None:
        self._client = client
        self._point = point
        self._reads = 0

    async def list_stream_messages(self, flow_id: str, stream: Any, page_size: int, before_page_token: str = "") -> Any:
        self._reads += 1
        if self._point == "before_confirmation" and self._reads == 2 and first_death(self._point):
            die()
        page = await self._client.list_stream_messages(flow_id, stream, page_size, before_page_token)
        marked = any(getattr(m.value.payload, "delivery", None) for m in page.messages)
        if self._point == "after_confirmation" and marked and first_death(self._point):
            die()
        return page

    async def close(self) -> None:
        await self._client.close()


class KillPointFlow(AgentSessionFlow):
    """The scripted Flow whose Worker dies once at ``$AGENT_TEST_KILL_POINT`` of a single-attempt Step."""

    def bind_client(self, client_factory: Callable[[], Any]) -> None:
        point = os.environ[KILL_POINT_ENV]

        def reader() -> Any:  # the stand-in has the one Client method the ledger reads with
            return KillingStreamReader(client_factory(), point)

        super().bind_client(reader)


class SkewedClock:
    """A Worker clock off by ``$AGENT_TEST_WORKER_CLOCK_SKEW_SECONDS`` (what a badly synced host has)."""

    def __init__(self, skew: timedelta) -> None:
        self.skew = skew

    def now(self) -> datetime:
        return datetime.now(UTC) + self.skew


def json_lines_tracing(path: Path) -> Any:
    """A ``TracerProvider`` writing each ended span at once as a JSON line to ``path`` (it survives a SIGKILL)."""
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class JsonLinesExporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            lines = [
                json.dumps(
                    {
                        "name": span.name,
                        "trace_id": f"{span.context.trace_id:032x}",
                        "span_id": f"{span.context.span_id:016x}",
                        "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
                        "attributes": dict(span.attributes or {}),
                        "pid": os.getpid(),
                    }
                )
                for span in spans
                if span.context is not None
            ]
            with path.open("a", encoding="utf-8") as file:
                file.write("".join(line + "\n" for line in lines))
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter()))
    return provider


def build_flow() -> AgentSessionFlow:
    skew = os.environ.get(CLOCK_SKEW_ENV)
    if skew is not None:
        return AgentSessionFlow(
            ScriptedAgentRunner(),
            flow_type=FLOW_TYPE,
            options=AgentSessionOptions(
                tool_policies=TOOL_POLICIES,
                interrupt_deadline=timedelta(seconds=float(os.environ.get(DEADLINE_ENV, "60"))),
            ),
            clock=SkewedClock(timedelta(seconds=float(skew))),
        )
    deadline = os.environ.get(DEADLINE_ENV)
    capacity = os.environ.get(EVENT_CAPACITY_ENV)
    budget = os.environ.get(CONTEXT_BUDGET_ENV)
    keep = os.environ.get(KEEP_RECENT_ENV)
    compaction = CompactionPolicy(
        context_budget_chars=None if budget is None else int(budget),
        keep_recent_messages=20 if keep is None else int(keep),
    )
    options = AgentSessionOptions(
        compaction=compaction,
        tool_policies=TOOL_POLICIES,
        interrupt_deadline=None if deadline is None else timedelta(seconds=float(deadline)),
        event_stream_capacity_bytes=DEFAULT_EVENT_STREAM_CAPACITY_BYTES if capacity is None else int(capacity),
    )
    coalesce = os.environ.get(COALESCE_ENV)
    if coalesce is not None:
        options = attrs.evolve(options, delta_coalesce_window=float(coalesce))
    trace_file = os.environ.get(TRACE_FILE_ENV)
    if trace_file is not None:
        options = attrs.evolve(options, tracing=json_lines_tracing(Path(trace_file)))
    heartbeat = os.environ.get(HEARTBEAT_ENV)
    if os.environ.get(KILL_POINT_ENV):
        return KillPointFlow(ScriptedAgentRunner(), flow_type=FLOW_TYPE, options=options)
    if heartbeat is None:
        return AgentSessionFlow(ScriptedAgentRunner(), flow_type=FLOW_TYPE, options=options)
    return AgentSessionFlow(
        ScriptedAgentRunner(),
        flow_type=FLOW_TYPE,
        options=options,
        heartbeat_interval=timedelta(seconds=float(heartbeat)),
    )
