"""The scripted agent of the binding benchmark, shared by the driver and its Worker child.

The turn's user message is a command:

- ``seed <n>``: the model answers at once with ``n`` messages (fills a history in one turn);
- ``tool``: the model asks for one ``read`` tool call, the tool answers, the model
  completes the turn with three messages (the tool-call request, the tool return and the
  answer, as a Pydantic AI runner stores them), so a turn adds four messages;
- ``write``: like ``tool``, with one ``non_idempotent_write`` call (no approval), which runs
  in ``CallSingleAttemptTool`` and reads its start back from the Stream first;
- ``plain``: the model answers at once with one message.

Messages carry a framework item of about ``MESSAGE_BYTES`` bytes of JSON, the size of a
short Pydantic AI ``ModelMessage``. Nothing here sleeps: a model or tool call costs only
what building its answer costs, so what is measured is the session machinery.
"""

import json
import os

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    CompactionPolicy,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.domain.usage import AgentUsage

FLOW_TYPE = "BindingBenchAgent"
CONTEXT_BUDGET_TOKENS_ENV = "BINDING_BENCH_CONTEXT_BUDGET_TOKENS"
"""Set, the agent's compaction policy has this token budget (the long-session benchmark); else the defaults."""
MESSAGE_BYTES = 240
_USAGE = AgentUsage(model_calls=1, input_tokens=50, output_tokens=20)


def _item(role: MessageRole, index: int, text: str) -> str:
    body = {"kind": role.value, "index": index, "parts": [{"part_kind": "text", "content": text}]}
    filler = MESSAGE_BYTES - len(json.dumps(body))
    body["timestamp"] = "2026-11-29T12:00:00.000000Z" + " " * max(0, filler - 20)
    return json.dumps(body)


def message(role: MessageRole, index: int, text: str = "") -> FrameworkMessage:
    """Return one framework message of about ``MESSAGE_BYTES`` bytes."""
    text = text or f"message {index}: the quick brown fox jumps over the lazy dog"
    return FrameworkMessage(role=role, framework_item=_item(role, index, text), text=text)


class BenchRunner:
    """Answers the turn's command without waiting for anything."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        return message(MessageRole.USER, 0, text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        command = "resume" if turn.is_resuming else turn.messages[-1].text or ""
        if command.startswith("seed "):
            count = int(command.split()[1])
            return TurnCompleted(new_messages=[message(MessageRole.ASSISTANT, n) for n in range(count)], usage=_USAGE)
        if command in ("tool", "write"):
            name = "lookup" if command == "tool" else "send"
            call = DeferredToolCall(
                tool_call_id="c1",
                tool_name=name,
                arguments='{"query": "order 7"}',
                policy=turn.resolve_tool_policy(name),
            )
            return ToolCallsRequested(framework_run_state='{"step": 1}', tool_calls=[call], usage=_USAGE)
        if command == "resume":
            outcome = turn.tool_calls["c1"].output or ""
            return TurnCompleted(
                new_messages=[
                    message(MessageRole.ASSISTANT, 1, "calling lookup"),
                    message(MessageRole.TOOL, 2, outcome),
                    message(MessageRole.ASSISTANT, 3, f"the answer is {outcome}"),
                ],
                usage=_USAGE,
            )
        return TurnCompleted(new_messages=[message(MessageRole.ASSISTANT, 1)], usage=_USAGE)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult(f"{call.tool_call.tool_name} found order 7")


def build_flow() -> AgentSessionFlow:
    """Return the benchmark's agent Flow (the same in the driver and the Worker)."""
    budget = os.environ.get(CONTEXT_BUDGET_TOKENS_ENV)
    compaction = CompactionPolicy() if budget is None else CompactionPolicy(context_budget_tokens=int(budget))
    options = AgentSessionOptions(
        compaction=compaction,
        tool_policies={
            "lookup": ToolPolicy(ToolEffect.READ),
            "send": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
        },
    )
    return AgentSessionFlow(BenchRunner(), flow_type=FLOW_TYPE, options=options)
