"""The session scenarios every framework adapter passes, end to end on an engine with the Worker in a child process.

Each adapter's suite subclasses `SessionConformance` (the class is not collected
itself: its name does not start with ``Test``) and gives its `RunnerKit`: how
its test agent reports what the model was given. The adapter's conftest serves
the ``stack`` and ``flow`` fixtures, so every scenario runs on the stack each
adapter's cases already build (no engine of its own). Three adapters pass them:
Pydantic AI, sagent and the binding's scripted agent (``tests.integration.agent``).
Their test agents share the scripted model's script language (``script``, ``call``:
the same JSON for the Pydantic AI and the sagent model, and a second language the
scripted agent speaks) and the tools the scenarios call
(``find_order``, ``refund_order`` with approval, ``email_customer``,
``read_tool``, ``idempotent_write``, ``write``, ``unclassified_write``, each
parking at its ``gate``).

Each scenario states its invariant through the `InvocationLog` (real model and
tool calls across every Worker process) and the Step shape from the Flow's
history. The helpers (`idle`, `executed`, `approve_until_idle`, `answer`) serve
the adapters' other cases too.
"""

import json
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import attrs

from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentSessionFlow,
    AgentSnapshot,
    MessageRole,
    ToolCallStatus,
    TurnResult,
    TurnStatus,
)
from dex_agents.domain.events import ReasoningDeltaPayload, TextDeltaPayload
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER, cancel_rejection_message
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    FileGate,
    InvocationLog,
    session_is_idle,
    wait_for_agent_snapshot,
)
from tests.integration.case_state import case_state
from tests.integration.stacks import session_on_a_worker, started_session


def script(*steps: str | list[Any] | dict[str, Any], name: str = "turn") -> str:
    """The user message that makes the scripted model answer ``steps`` in order (both adapters' format)."""
    return json.dumps({"name": name, "steps": list(steps)})


def call(tool_call_id: str, name: str, **args: Any) -> list[Any]:
    """One tool call of a script step."""
    return [tool_call_id, name, args]


ToolResults = dict[str, tuple[str, str]]
"""What the model was given for each call: ``{call ID: (outcome word, content)}``."""


@attrs.frozen
class RunnerKit:
    """What the scenarios need of one adapter's test agent."""

    state_env: str
    """The variable naming the case's state directory (the test agent's ``case_state``)."""
    ok: str = attrs.field(kw_only=True)
    """The outcome word of a call that succeeded, in ``@summary`` answers and `results` (``name[ok]=text``)."""
    failed: str = attrs.field(kw_only=True)
    """The outcome word of a call that failed."""
    decode_results: Callable[[str], Iterable[tuple[str, str, str]]] = attrs.field(kw_only=True)
    """The tool results one tool message's framework item holds: ``(call ID, outcome word, content)``."""
    deltas_coalesced: bool = attrs.field(kw_only=True)
    """Whether the adapter's deltas of one kind arrive joined per Step attempt (else they may come in pieces)."""

    def invocations(self) -> InvocationLog:
        """The case's `InvocationLog`."""
        return case_state(self.state_env)[1]()

    def gate(self, name: str) -> FileGate:
        """The case's `FileGate` ``name``."""
        return case_state(self.state_env)[2](name)

    def results(self, snapshot: AgentSnapshot) -> ToolResults:
        """Every tool result the snapshot's messages hold (a later one of a call ID wins)."""
        return {
            call_id: (outcome, content)
            for message in snapshot.messages
            if message.role is MessageRole.TOOL
            for call_id, outcome, content in self.decode_results(message.framework_item)
        }


async def idle(stack: AgentTestStack, flow: AgentSessionFlow, session_id: str, turns: int = 1) -> AgentSnapshot:
    """The session's snapshot once its turn ``turns`` has ended."""

    def done(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        state = snapshot.state
        return snapshot if state and state.turn_count == turns and state.active_turn_id is None else None

    return await wait_for_agent_snapshot(stack.sessions(flow), session_id, done, description=f"turn {turns} to end")


async def executed(stack: AgentTestStack, session_id: str) -> list[str]:
    """The Step types the session completed, in order."""
    history = await stack.read_step_history(session_id)
    return [entry.step_type for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]


async def approve_until_idle(
    stack: AgentTestStack, flow: AgentSessionFlow, session_id: str, *, rejection: str | None = None
) -> AgentSnapshot:
    """Answer every approval as it appears (approve, or reject with ``rejection``) until the turn ends."""
    sessions = stack.sessions(flow)

    def next_step(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        return snapshot if snapshot.pending_interrupts or session_is_idle(snapshot) else None

    while True:
        snapshot = await wait_for_agent_snapshot(sessions, session_id, next_step, description="an approval or idle")
        if session_is_idle(snapshot) is not None:
            return snapshot
        for interrupt in snapshot.pending_interrupts:
            await sessions.resolve_interrupt(
                session_id, interrupt.interrupt_id, approved=rejection is None, rejection_message=rejection
            )


def answer(snapshot: AgentSnapshot) -> str:
    """The text of the session's last message."""
    text = snapshot.messages[-1].text
    assert text is not None
    return text


def assert_cancelled_at_its_approval(result: TurnResult, reason: str) -> None:
    """Check ``result`` is of a turn a cancel with ``reason`` ended at its one approval.

    The turn is cancelled, its call rejected with the cancel's reason, and the cancel's note is its last message.
    """
    assert result.status is TurnStatus.CANCELLED
    (outcome,) = result.tool_outcomes
    assert (outcome.status, outcome.rejection_message) == (ToolCallStatus.REJECTED, cancel_rejection_message(reason))
    note = result.messages[-1].text
    assert note is not None
    assert note.startswith(f"{TURN_CANCELLED_NOTE_HEADER} (reason: {reason}).")


async def live_deltas(stack: AgentTestStack, flow: AgentSessionFlow, session_id: str) -> list[tuple[str, str, str]]:
    """The text and reasoning deltas of the session's first turn: ``(event type, text, step execution ID)``."""
    sessions = stack.sessions(flow)
    pieces: list[tuple[str, str, str]] = []
    token = ""
    while True:
        message = await sessions.read_agent_event(session_id, token)
        token = message.resume_token
        event = message.event
        if isinstance(event.payload, TextDeltaPayload | ReasoningDeltaPayload):
            pieces.append((event.type.value, event.payload.text, event.step_execution_id))
        if event.type == "turn_completed":
            return pieces


def joined_runs(pieces: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``pieces`` with each run of one kind joined into one piece."""
    runs: list[tuple[str, str]] = []
    for kind, text in pieces:
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1] + text)
        else:
            runs.append((kind, text))
    return runs


class SessionConformance:
    """The scenarios; a subclass named ``Test…`` sets `kit` and may check more (the ``check_…`` hooks)."""

    kit: ClassVar[RunnerKit]

    def check_order_session(self, first: AgentSnapshot, second: AgentSnapshot) -> None:
        """What the adapter checks beyond the shared scenario of the two-turn order session."""

    def check_effects_after_kill(self) -> None:
        """What the adapter checks beyond the shared scenario of the Worker killed during each tool effect."""

    async def test_a_two_turn_order_session_finds_refunds_after_approval_and_emails(
        self, stack: AgentTestStack, flow: AgentSessionFlow
    ) -> None:
        kit = self.kit
        sessions = await started_session(
            stack,
            flow,
            script(
                [call("f1", "find_order", order_id="7")],
                [call("r1", "refund_order", order_id="7")],
                [call("e1", "email_customer", order_id="7", text="Your refund is on its way.")],
                "Order 7 is refunded and the customer knows.",
                name="order",
            ),
        )
        first = await approve_until_idle(stack, flow, "s")
        assert answer(first) == "Order 7 is refunded and the customer knows."
        assert await executed(stack, "s") == [
            "StartAgentSession",
            "RunModel",
            "CallTool",  # the response's one call: its tool Step resumes the turn
            "RunModel",
            "AwaitToolApproval",
            "CallTool",
            "ResumeTurn",
            "RunModel",
            "AwaitToolApproval",
            "CallSingleAttemptTool",
            "ResumeTurn",
            "RunModel",
        ]
        assert [kit.invocations().count("model", "order", step=n) for n in range(4)] == [1, 1, 1, 1]
        tools = [(e["name"], e["key"]) for e in kit.invocations().entries() if e["kind"] == "tool"]
        assert tools == [
            ("find_order", "s/turn-1/f1"),
            ("refund_order", "s/turn-1/r1"),
            ("email_customer", "s/turn-1/e1"),
        ]
        assert kit.results(first)["r1"] == (kit.ok, "refund of 7 with key s/turn-1/r1")
        assert first.usage.model_calls == 4
        assert first.tool_calls == ()
        # The call ID of the first turn again: its key is the second turn's.
        await sessions.send_user_message("s", script([call("f1", "find_order", order_id="8")], name="second"))
        second = await idle(stack, flow, "s", turns=2)
        assert answer(second) == f"find_order[{kit.ok}]=order 8 delivered"
        keys = [e["key"] for e in kit.invocations().entries() if e["name"] == "find_order"]
        assert keys == ["s/turn-1/f1", "s/turn-2/f1"]
        assert second.usage.model_calls == 6
        assert second.tool_calls == ()
        self.check_order_session(first, second)

    async def test_worker_killed_during_a_model_step_repeats_only_that_model_call(
        self, stack: AgentTestStack, flow: AgentSessionFlow
    ) -> None:
        kit = self.kit
        worker, _ = await session_on_a_worker(
            stack, flow, script([call("c1", "read_tool")], {"gate": "m1", "text": "@summary"}, name="kill")
        )
        await kit.gate("m1").wait_until_reached()
        worker.kill()
        await stack.start_worker()
        kit.gate("m1").release()
        snapshot = await idle(stack, flow, "s")
        assert answer(snapshot) == f"read_tool[{kit.ok}]=read done"
        assert kit.invocations().count("model", "kill", step=0) == 1
        assert kit.invocations().count("model", "kill", step=1) == 2
        assert kit.invocations().count("tool", "read_tool") == 1
        history = await stack.read_step_history("s")
        run_model = [e for e in history if e.step_type == "RunModel" and e.event_type == EXECUTE_COMPLETED_EVENT]
        # The repeat is the same RunModel execution (redelivered, or a second attempt), not a new model Step.
        assert [e.step_execution_id for e in run_model] == ["RunModel-1", "RunModel-2"]

    async def test_worker_killed_during_each_tool_effect_repeats_only_the_calls_whose_effect_allows_it(
        self, stack: AgentTestStack, flow: AgentSessionFlow
    ) -> None:
        kit = self.kit
        effects = ["read_tool", "idempotent_write", "write", "unclassified_write"]
        worker, sessions = await session_on_a_worker(
            stack, flow, script([call(f"c{i}", name, gate=name) for i, name in enumerate(effects)])
        )
        interrupt = await wait_for_agent_snapshot(
            sessions, "s", lambda s: next(iter(s.pending_interrupts), None), description="the unclassified approval"
        )
        assert interrupt.tool_name == "unclassified_write"
        await sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=True)
        for name in effects:
            await kit.gate(name).wait_until_reached()
        worker.kill()
        await stack.start_worker()
        for name in effects:
            kit.gate(name).release()
        snapshot = await idle(stack, flow, "s")
        assert kit.results(snapshot) == {
            "c0": (kit.ok, "read done"),
            "c1": (kit.ok, "written with key s/turn-1/c1"),
            "c2": (kit.failed, OUTCOME_UNKNOWN_TOOL_RESULT),
            "c3": (kit.failed, OUTCOME_UNKNOWN_TOOL_RESULT),
        }
        keys = {name: [e["key"] for e in kit.invocations().entries() if e["name"] == name] for name in effects}
        assert keys == {
            "read_tool": ["s/turn-1/c0", "s/turn-1/c0"],
            "idempotent_write": ["s/turn-1/c1", "s/turn-1/c1"],
            "write": ["s/turn-1/c2"],
            "unclassified_write": ["s/turn-1/c3"],
        }
        assert (await executed(stack, "s")).count("RecordToolOutcomeUnknown") == 2
        assert kit.invocations().count("model") == 2
        self.check_effects_after_kill()

    async def test_text_and_reasoning_stream_live_from_model_steps(
        self, stack: AgentTestStack, flow: AgentSessionFlow
    ) -> None:
        await started_session(
            stack,
            flow,
            script(
                {
                    "think": "Let me check.",
                    "text": "Checking the order.",
                    "calls": [call("f1", "find_order", order_id="7")],
                },
                "All good.",
            ),
        )
        await idle(stack, flow, "s")
        pieces = await live_deltas(stack, flow, "s")
        first, second = sorted({execution for _, _, execution in pieces})
        of_first = [(kind, text) for kind, text, execution in pieces if execution == first]
        of_second = [(kind, text) for kind, text, execution in pieces if execution == second]
        assert joined_runs(of_first) == [("reasoning_delta", "Let me check."), ("text_delta", "Checking the order.")]
        assert joined_runs(of_second) == [("text_delta", "All good.")]
        if self.kit.deltas_coalesced:
            # Each kind's pieces arrive joined per Step attempt (delta coalescing), in the order written.
            assert (of_first, of_second) == (joined_runs(of_first), joined_runs(of_second))
