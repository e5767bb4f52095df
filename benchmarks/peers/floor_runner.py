"""Configuration ``dex-floor``: the ``dex`` set-up with no agent framework at all, to measure the binding's floor.

`FloorRunner` is a runner contract implementation that makes the scripted turn's Steps without Pydantic AI:
K ``RunModel`` Steps that each ask for M ``work`` calls (``read``, so ``CallTool``), then one that answers,
with the same shape of stored messages as the real agent's turn but none of its work. What the Worker
spends on it is what dex-agents itself costs per Step (the Dex binding, the SDK, gRPC): the part of the
``dex`` row that no framework adapter can remove. It is not a peer; the bench shows it beside ``dex`` so
the Worker-CPU ratio of ``dex`` can be read as binding + framework (``docs/performance.md``).
"""

import json
import re

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    CompactionPolicy,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ReconcileResult,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.domain.turns import AgentTurnOutcome
from dex_agents.domain.usage import AgentUsage

_SHAPE = re.compile(r"k=(\d+)\s+m=(\d+)")
_USAGE = AgentUsage(model_calls=1, input_tokens=100, output_tokens=10)


class FloorRunner:
    """The scripted K x M turn without a framework: state is the count of model responses so far."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Store the prompt as a user message."""
        return FrameworkMessage(role=MessageRole.USER, framework_item=json.dumps({"user": text}), text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Ask for M calls K times, then answer with text."""
        prompt = next(m.text for m in turn.messages if m.turn_id == turn.turn_id and m.role is MessageRole.USER)
        match = _SHAPE.search(prompt or "")
        if match is None:
            raise ValueError(f"the prompt carries no k= and m=: {prompt!r}")
        k, m = int(match.group(1)), int(match.group(2))
        done = 0 if turn.framework_run_state is None else int(turn.framework_run_state)
        if done < k:
            calls = [
                DeferredToolCall(
                    tool_call_id=f"{turn.turn_id}-{done}-{j}",
                    tool_name="work",
                    arguments=json.dumps({"n": done * 1000 + j}),
                    policy=ToolPolicy(ToolEffect.READ),
                )
                for j in range(m)
            ]
            return ToolCallsRequested(framework_run_state=str(done + 1), tool_calls=calls, usage=_USAGE)
        returns = len(turn.tool_calls)
        answer = f"done: {returns} tool results in history"
        message = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=json.dumps({"text": answer}), text=answer)
        return TurnCompleted(new_messages=[message], usage=_USAGE)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Return the ``work`` tool's result."""
        n = json.loads(call.tool_call.arguments)["n"]
        return ToolExecutionResult(f"result {n}")

    async def reconcile_tool_call(self, call: DeferredToolExecution) -> ReconcileResult:
        """Never asked: ``work`` is a read."""
        return ReconcileResult.unknown()


def build_floor_flow(flow_type: str, compaction: CompactionPolicy) -> AgentSessionFlow:
    """The ``dex-floor`` session Flow: `FloorRunner` with the ``dex`` configuration's options."""
    return AgentSessionFlow(FloorRunner(), flow_type=flow_type, options=AgentSessionOptions(compaction=compaction))
