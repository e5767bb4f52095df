"""Reconcile probes declared in tool metadata: the policy becomes reconcilable and the runner runs the probe."""

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_ai import Agent, Tool
from pydantic_ai.toolsets import FunctionToolset

from dex_agents import (
    AgentMessage,
    AgentSessionOptions,
    ReconcileResult,
    ToolCallReconciler,
    ToolCallsRequested,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.adapters.pydantic_ai import PydanticAIRunner, ReconcileCall, reconcile_probe
from dex_agents.testing import make_tool_execution, make_turn_context
from tests.unit.adapters.pydantic_ai.scripted_model import ScriptedModel, script

OUTBOX: dict[str, str] = {}
PROBED: list[ReconcileCall] = []


@dataclass(frozen=True)
class Deps:
    session_id: str


async def find_in_outbox(call: ReconcileCall) -> ReconcileResult:
    PROBED.append(call)
    if call.arguments.get("fail"):
        raise ConnectionError("outbox down")
    sent = OUTBOX.get(call.idempotency_key)
    return ReconcileResult.not_applied() if sent is None else ReconcileResult.applied(sent)


def email_agent(model: ScriptedModel | None = None) -> Agent[Deps, str]:
    toolset: FunctionToolset[Deps] = FunctionToolset(
        [Tool(lambda to: "queued", name="queue_email", metadata=reconcile_probe(find_in_outbox))]
    )
    agent: Agent[Deps, str] = Agent(
        "test" if model is None else model.model(), deps_type=Deps, toolsets=[toolset.prefixed("mail")]
    )

    @agent.tool_plain(metadata=reconcile_probe(find_in_outbox))
    def email_customer(to: str) -> str:
        return "sent"

    @agent.tool_plain
    def plain_write(to: str) -> str:
        return "written"

    return agent


NON_IDEMPOTENT = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)


@pytest.mark.parametrize(
    ("tool_name", "reconcilable"), [("email_customer", True), ("mail_queue_email", True), ("plain_write", False)]
)
async def test_a_tool_whose_metadata_declares_a_probe_gets_a_reconcilable_policy(
    tool_name: str, reconcilable: bool
) -> None:
    runner = PydanticAIRunner(email_agent(ScriptedModel()), deps_factory=Deps)
    user = AgentMessage.stored(
        runner.build_user_message(script([["c1", tool_name, {"to": "a"}]])), sequence=1, turn_id="turn-1"
    )
    options = AgentSessionOptions(tool_policies={tool_name: NON_IDEMPOTENT})

    outcome = await runner.run_model_step(make_turn_context(messages=[user], options=options))

    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].policy == ToolPolicy(
        ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False, reconcilable=reconcilable
    )


async def test_the_runner_runs_the_probe_with_arguments_key_and_deps_and_returns_what_it_found() -> None:
    runner = PydanticAIRunner(email_agent(), deps_factory=Deps)
    assert isinstance(runner, ToolCallReconciler)
    execution = make_tool_execution(
        "email_customer", '{"to": "a"}', tool_call_id="c7", flow_id="s9", turn_id="turn-2", policy=NON_IDEMPOTENT
    )
    OUTBOX["s9/turn-2/c7"] = "sent to a"

    found = await runner.reconcile_tool_call(execution)

    assert found == ReconcileResult.applied("sent to a")
    probe = PROBED[-1]
    assert (probe.session_id, probe.tool_name, dict(probe.arguments)) == ("s9", "email_customer", {"to": "a"})
    assert (probe.idempotency_key, probe.deps) == ("s9/turn-2/c7", Deps("s9"))


async def test_a_probe_that_finds_nothing_says_not_applied_and_a_failing_probe_raises() -> None:
    runner = PydanticAIRunner(email_agent(), deps_factory=Deps)
    missing = make_tool_execution("mail_queue_email", '{"to": "b"}', tool_call_id="c8", policy=NON_IDEMPOTENT)
    failing = make_tool_execution("email_customer", '{"to": "b", "fail": true}', policy=NON_IDEMPOTENT)

    assert await runner.reconcile_tool_call(missing) == ReconcileResult.not_applied()
    with pytest.raises(ConnectionError, match="outbox down"):
        await runner.reconcile_tool_call(failing)


async def test_a_tool_without_a_probe_is_reconciled_unknown() -> None:
    runner: PydanticAIRunner[Any] = PydanticAIRunner(email_agent(), deps_factory=Deps)
    execution = make_tool_execution("plain_write", '{"to": "c"}', policy=NON_IDEMPOTENT)

    assert await runner.reconcile_tool_call(execution) == ReconcileResult.unknown()
