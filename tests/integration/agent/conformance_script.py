"""The scripted agent's second script language: the one the runner-conformance scenarios share.

A turn whose user message is ``{"name": ..., "steps": [...]}`` (`tests.integration.runner_conformance.script`,
the scripted model language of the Pydantic AI and sagent test agents) runs here instead of the scripted
agent's own ``{"tools": ...}`` script. The turn's n-th model call answers ``steps[n]`` (``"@summary"`` once
they run out) and is recorded as ``("model", <name>, step=n)``; n is how many tool batches the run state
holds, so a repeated model call records the same n. A step is a list of calls ``[[id, name, args], ...]``, a
string (the answer), or an object with ``think`` (reasoning), ``text``, ``calls`` and ``gate`` (the model parks
at that `FileGate` first). Text and reasoning stream in two halves each. ``"@summary"`` lists the results of the
last batch, in call order: ``name[ok|error]=content; ...``.

Each call it asks for carries `DIALECT` as its framework state, so its tool Step runs here too: the tools
are the scenarios' (``find_order``, ``refund_order``, ``email_customer``, ``read_tool``, ``idempotent_write``,
``write``, ``unclassified_write``; their policies are `tests.integration.scenario_tools`), each recorded as
``("tool", <name>, key=<idempotency key>)`` and parking at the `FileGate` its ``gate`` argument names. The
turn's answer holds, per batch, the assistant message of its calls and one tool message per call
(`decode_result` reads one).
"""

import json
from collections.abc import Callable
from typing import Any

import attrs

from dex_agents import (
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ToolCallsRequested,
    ToolCallStatus,
    ToolExecutionResult,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.domain.usage import AgentUsage
from dex_agents.testing import FileGate, InvocationLog

DIALECT = "conformance-script"
"""The framework state of every call this language asks for."""

_OUTPUTS: dict[str, Callable[[dict[str, Any], str], str]] = {
    "find_order": lambda args, _key: f"order {args['order_id']} delivered",
    "refund_order": lambda args, key: f"refund of {args['order_id']} with key {key}",
    "email_customer": lambda args, _key: f"emailed the customer of order {args['order_id']}",
    "read_tool": lambda _args, _key: "read done",
    "idempotent_write": lambda _args, key: f"written with key {key}",
    "write": lambda _args, _key: "written",
    "unclassified_write": lambda _args, _key: "written",
}
"""What each tool returns, as the other adapters' test agents' tools do."""


def speaks(loaded: dict[str, Any]) -> bool:
    """Whether a turn's loaded script is in this language."""
    return "steps" in loaded


def decode_result(framework_item: str) -> list[tuple[str, str, str]]:
    """The one tool result a stored tool message holds: ``(call ID, "ok" or "error", content)``."""
    call_id, outcome, content = json.loads(framework_item)
    return [(call_id, outcome, content)]


def _outcome(status: ToolCallStatus) -> str:
    # A framework tells its model only whether a call succeeded; the record's content says the rest.
    return "ok" if status is ToolCallStatus.SUCCEEDED else "error"


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]


@attrs.frozen
class ConformanceScript:
    """Runs a turn (its model calls and tool calls) in this language, on the case's log and gates."""

    invocations: Callable[[], InvocationLog]
    gate: Callable[[str], FileGate]

    async def run_model_step(self, turn: AgentTurnContext, loaded: dict[str, Any]) -> AgentTurnOutcome:
        """Answer the model call: the step the run state's batches count to."""
        batches: list[list[str]] = [] if turn.framework_run_state is None else json.loads(turn.framework_run_state)
        steps: list[Any] = loaded["steps"]
        step = steps[len(batches)] if len(batches) < len(steps) else "@summary"
        self.invocations().record("model", loaded["name"], step=len(batches))
        if isinstance(step, dict) and step.get("gate"):
            await self.gate(step["gate"]).wait_for_release()
        think, text, calls = _parts(step)
        for piece in _halves(think):
            turn.events.write_reasoning_delta(piece)
        if text == "@summary":
            text = _summary(turn, batches[-1] if batches else [])
        for piece in _halves(text):
            turn.events.write_text_delta(piece)
        usage = AgentUsage(model_calls=1, input_tokens=10, output_tokens=5)
        if calls:
            requested = [
                DeferredToolCall(
                    call_id,
                    name,
                    json.dumps(args, sort_keys=True),
                    turn.resolve_tool_policy(name),
                    framework_state=DIALECT,
                )
                for call_id, name, args in calls
            ]
            run_state = json.dumps([*batches, [call_id for call_id, _, _ in calls]])
            return ToolCallsRequested(framework_run_state=run_state, tool_calls=requested, usage=usage)
        answer = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=json.dumps(text), text=text)
        return TurnCompleted(new_messages=[*_batch_messages(turn, batches), answer], usage=usage)

    async def execute(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run one of the scenarios' tools."""
        name = call.tool_call.tool_name
        args: dict[str, Any] = json.loads(call.tool_call.arguments)
        self.invocations().record(
            "tool", name, key=call.idempotency_key, attempt=call.attempt, id=call.tool_call.tool_call_id
        )
        if args.get("gate"):
            await self.gate(args["gate"]).wait_for_release()
        return ToolExecutionResult(_OUTPUTS[name](args, call.idempotency_key))


def _parts(step: str | list[Any] | dict[str, Any]) -> tuple[str, str, list[Any]]:
    """A step's reasoning, text and calls."""
    match step:
        case str():
            return "", step, []
        case list():
            return "", "", step
        case dict():
            return step.get("think", ""), step.get("text", ""), step.get("calls", [])
        case _:
            raise AssertionError(f"not a script step: {step!r}")


def _summary(turn: AgentTurnContext, call_ids: list[str]) -> str:
    records = [turn.tool_calls[call_id] for call_id in call_ids]
    return "; ".join(f"{r.tool_name}[{_outcome(r.status)}]={describe_tool_call_outcome(r)}" for r in records)


def _batch_messages(turn: AgentTurnContext, batches: list[list[str]]) -> list[FrameworkMessage]:
    """Each batch's assistant message (its calls), then one tool message per call."""
    messages: list[FrameworkMessage] = []
    for call_ids in batches:
        messages.append(
            FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=json.dumps(call_ids), tool_call_ids=call_ids)
        )
        for call_id in call_ids:
            record = turn.tool_calls[call_id]
            result = [call_id, _outcome(record.status), describe_tool_call_outcome(record)]
            messages.append(
                FrameworkMessage(
                    role=MessageRole.TOOL,
                    framework_item=json.dumps(result),
                    tool_call_id=call_id,
                    tool_name=record.tool_name,
                )
            )
    return messages
