"""`LifecycleRunner`: a stateless scripted runner whose every user message carries its own plan.

A message's text is ``"<tag> <plan>"``: ``tag`` names the message (``m7``) and
``plan`` is what a turn it opens does, rounds of tool calls separated by ``;``
(``r,a;w`` asks for ``r`` and ``a``, then for ``w``, then answers), with a
trailing ``!`` when the turn's last model call fails (every attempt: the turn
fails). Tool codes, each its own tool:

| code | tool | policy | what it does |
| --- | --- | --- | --- |
| ``r`` | ``read`` | read | answers ``ok`` |
| ``x`` | ``fail`` | read | raises `ToolExecutionError` (``failed``) |
| ``c`` | ``crash`` | read | raises (a Step failure: retried, then ``failed``) |
| ``a`` | ``approve`` | idempotent write, approval | answers ``ok`` |
| ``w`` | ``write`` | non-idempotent write | answers ``ok`` |
| ``q`` | ``ask`` | non-idempotent write | asks approval as it runs (`ToolApprovalRequestedError`); approved: ``ok`` |

Everything a model call decides comes from its arguments: the opening
message's plan and the run state, a JSON object of the round and the steered
texts each call got. The final answer stores, per round, an assistant message
asking for the round's calls, one tool message answering them, and the texts
steered in after them (in the order the calls got them), then ``done <tag>``.
An optional ``seen`` callback hears every tag a model call read (the opening
one and each steered one) and every tool run, with the session ID, so a test
can tell what ran.
"""

import json
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import attrs

from dex_agents import (
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    CompactionPolicy,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ToolApprovalRequestedError,
    ToolCallsRequested,
    ToolCallStatus,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.domain.usage import AgentUsage

TOOLS = {
    "r": ("read", ToolPolicy(ToolEffect.READ)),
    "x": ("fail", ToolPolicy(ToolEffect.READ)),
    "c": ("crash", ToolPolicy(ToolEffect.READ)),
    "a": ("approve", ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)),
    "w": ("write", ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)),
    "q": ("ask", ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)),
}
"""Tool code -> (tool name, policy)."""

TOOL_POLICIES = dict(TOOLS.values())
"""The Flow's policies, by tool name."""

MODEL_FAILURE = "the scripted model failed"

APPROVAL_DEADLINE = timedelta(minutes=5)
"""How long an approval of the lifecycle Flow waits."""


def lifecycle_options(deadline: timedelta = APPROVAL_DEADLINE) -> AgentSessionOptions:
    """The lifecycle Flow's options: its tools' policies, an approval ``deadline``, a history that compacts early."""
    return AgentSessionOptions(
        tool_policies=TOOL_POLICIES,
        interrupt_deadline=deadline,
        compaction=CompactionPolicy(context_budget_chars=6 * 1024, keep_recent_messages=4),
    )


@attrs.frozen(kw_only=True)
class Plan:
    """What a turn opened by a message does."""

    rounds: tuple[tuple[str, ...], ...]
    """Tool codes per model response."""
    fails: bool = False
    """Whether the turn's last model call fails."""

    @classmethod
    def parse(cls, text: str) -> "Plan":
        """Read the plan of a message's text (no plan: answer at once)."""
        _tag, _, plan = text.partition(" ")
        fails = plan.endswith("!")
        plan = plan.removesuffix("!")
        rounds = tuple(tuple(code for code in part.split(",") if code in TOOLS) for part in plan.split(";") if part)
        return cls(rounds=tuple(r for r in rounds if r), fails=fails)

    def render(self) -> str:
        """The plan as message text after the tag."""
        return ";".join(",".join(codes) for codes in self.rounds) + ("!" if self.fails else "")


def tag_of(text: str | None) -> str | None:
    """The tag of a message text (``None`` for a text that is not a lifecycle message)."""
    if not text:
        return None
    tag = text.partition(" ")[0]
    return tag if tag.startswith("m") and tag[1:].isdigit() else None


def call_id(round_index: int, position: int) -> str:
    """The ID of a round's call (unique within a turn)."""
    return f"t{round_index}x{position}"


def _message(role: MessageRole, text: str | None, **item: object) -> FrameworkMessage:
    return FrameworkMessage(
        role=role,
        framework_item=json.dumps({"role": role.value, "text": text, **item}, sort_keys=True),
        text=text,
        tool_call_ids=tuple(item.get("ids", ())),  # type: ignore[arg-type]
    )


class LifecycleRunner:
    """The runner of the lifecycle model: stateless, every outcome from its arguments."""

    def __init__(self, seen: Callable[[str, str, str], None] | None = None) -> None:
        self._seen = seen

    def _note(self, kind: str, what: str, flow_id: str) -> None:
        if self._seen is not None:
            self._seen(kind, what, flow_id)

    def build_user_message(self, text: str) -> FrameworkMessage:
        """A user message holding ``text``."""
        return _message(MessageRole.USER, text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Ask for the next round's calls, or answer with everything the turn did."""
        opening = next(m for m in turn.messages if m.turn_id == turn.turn_id and m.role is MessageRole.USER)
        plan = Plan.parse(opening.text or "")
        state: dict[str, Any] = (
            json.loads(turn.framework_run_state) if turn.framework_run_state else {"round": 0, "steered": []}
        )
        round_index = int(state["round"])
        steered: list[list[str]] = [*state["steered"], [m.text for m in turn.steered_messages]]
        if round_index == 0:
            self._note("model", tag_of(opening.text) or "", turn.flow_id)
        for text in steered[-1]:
            self._note("model", tag_of(text) or "", turn.flow_id)
        if round_index < len(plan.rounds):
            calls = [
                DeferredToolCall(
                    tool_call_id=call_id(round_index, position),
                    tool_name=TOOLS[code][0],
                    arguments=json.dumps({"turn": turn.turn_id, "code": code}),
                    policy=turn.resolve_tool_policy(TOOLS[code][0]),
                )
                for position, code in enumerate(plan.rounds[round_index])
            ]
            return ToolCallsRequested(
                framework_run_state=json.dumps({"round": round_index + 1, "steered": steered}),
                tool_calls=calls,
                usage=AgentUsage(model_calls=1),
            )
        if plan.fails:
            raise RuntimeError(MODEL_FAILURE)
        return TurnCompleted(new_messages=self._answer(plan, steered, turn), usage=AgentUsage(model_calls=1))

    def _answer(self, plan: Plan, steered: Sequence[Sequence[str]], turn: AgentTurnContext) -> list[FrameworkMessage]:
        messages: list[FrameworkMessage] = []
        for round_index, codes in enumerate(plan.rounds):
            ids = [call_id(round_index, position) for position in range(len(codes))]
            messages.append(_message(MessageRole.ASSISTANT, f"calls {' '.join(ids)}", ids=ids, kind="calls"))
            statuses = [turn.tool_calls[i].status.value if i in turn.tool_calls else "missing" for i in ids]
            messages.append(_message(MessageRole.TOOL, None, ids=ids, kind="returns", statuses=statuses))
            messages.extend(_message(MessageRole.USER, text) for text in steered[round_index + 1])
        if not plan.rounds:
            messages.extend(_message(MessageRole.USER, text) for text in steered[-1])
        opening_tag = next(
            (tag_of(m.text) for m in turn.messages if m.turn_id == turn.turn_id and m.role is MessageRole.USER), None
        )
        messages.append(_message(MessageRole.ASSISTANT, f"done {opening_tag}"))
        return messages

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run one scripted tool."""
        record = call.tool_call
        if record.tool_name == "ask":
            if record.status is not ToolCallStatus.APPROVED:
                self._note("asked", call.idempotency_key, call.flow_id)
                raise ToolApprovalRequestedError("the tool asks for approval as scripted")
            # Its approved run is the write: it must run once at the most, as every non-idempotent write.
            self._note("tool", f"write {call.idempotency_key}", call.flow_id)
            return ToolExecutionResult("ok")
        self._note("tool", f"{record.tool_name} {call.idempotency_key}", call.flow_id)
        if record.tool_name == "fail":
            raise ToolExecutionError("the tool failed as scripted")
        if record.tool_name == "crash":
            raise RuntimeError("the tool crashed as scripted")
        return ToolExecutionResult("ok")
