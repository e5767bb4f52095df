"""Approvals are bound to the exact call (a digest of tool name and canonical arguments) and name their approver."""

import attrs
import pytest

from dex_agents.application.next import End, GoTo, StepName
from dex_agents.application.runner import DeferredToolExecution
from dex_agents.domain.events import InterruptResolvedPayload
from dex_agents.domain.interrupts import AgentInterruptResolution
from dex_agents.domain.tools import ToolCallStatus, ToolEffect, ToolPolicy, call_digest
from dex_agents.testing import ScriptedRunner, deferred_tool_call, tool_calls_requested
from dex_agents.testing.memory import InMemorySessionHost

INTERRUPT = "turn-1.c1"
ARGS = '{"order": 7, "amount": 42}'
S = ToolCallStatus


async def waiting_for_approval() -> tuple[InMemorySessionHost, list[str]]:
    ran: list[str] = []
    runner = ScriptedRunner(
        [
            tool_calls_requested(
                deferred_tool_call("c1", "refund", ARGS, policy=ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE))
            )
        ]
    )

    def refund(call: DeferredToolExecution) -> str:
        ran.append(call.tool_call.arguments)
        return "refunded"

    runner.script_tool("c1", refund)
    session = InMemorySessionHost(runner)
    await session.start("Refund order 7")
    await session.run_model()
    return session, ran


async def apply_answer(session: InMemorySessionHost) -> None:
    (resolution,) = session.resolutions.published
    assert isinstance(resolution, AgentInterruptResolution)
    decision = await session.await_tool_approval("c1", resolution=resolution)
    assert decision == GoTo(step=StepName.CALL_SINGLE_ATTEMPT_TOOL, input="c1")


def test_the_digest_ignores_key_order_and_whitespace_and_tells_tools_and_arguments_apart() -> None:
    digest = call_digest("refund", '{"order": 7, "amount": 42}')
    assert digest == call_digest("refund", '{ "amount":42,"order":7 }')
    assert digest != call_digest("refund", '{"order": 7, "amount": 43}')
    assert digest != call_digest("email", '{"order": 7, "amount": 42}')
    assert digest.startswith("sha256:")


async def test_the_raised_interrupt_carries_the_calls_digest_in_the_snapshot() -> None:
    session, _ = await waiting_for_approval()

    (interrupt,) = (await session.get_agent_snapshot()).pending_interrupts

    assert interrupt.call_digest == call_digest("refund", ARGS)


async def test_an_approval_for_this_call_runs_it_once_and_names_the_approver_everywhere() -> None:
    session, ran = await waiting_for_approval()
    assert await session.resolve_interrupt(
        INTERRUPT, approved=True, approver="ada", call_digest=call_digest("refund", ARGS)
    )
    await apply_answer(session)

    assert await session.call_single_attempt_tool("c1") == End()
    assert await session.call_single_attempt_tool("c1") == End()  # the approval is used once

    assert ran == [ARGS]
    record = session.tool_calls["c1"]
    assert (record.status, record.approver) == (S.SUCCEEDED, "ada")
    assert record.outcome().approver == "ada"
    (resolved,) = session.sink.payloads(InterruptResolvedPayload)
    assert (resolved.approved, resolved.approver) == (True, "ada")
    assert [c.approver for c in (await session.get_agent_snapshot()).tool_calls] == ["ada"]


async def test_an_approval_given_for_other_arguments_fails_the_call_clearly_without_running_it() -> None:
    session, ran = await waiting_for_approval()
    seen = call_digest("refund", '{"order": 7, "amount": 4200}')
    assert await session.resolve_interrupt(INTERRUPT, approved=True, approver="ada", call_digest=seen)
    await apply_answer(session)

    assert await session.call_single_attempt_tool("c1") == End()

    assert ran == []
    record = session.tool_calls["c1"]
    assert record.status is S.FAILED
    assert record.error is not None
    assert "approval was given for a different call" in record.error
    assert seen in record.error
    assert record.attempts == 0
    assert [r.status for r in session.results.published] == [S.FAILED]


async def test_a_call_whose_arguments_changed_after_its_approval_is_not_run() -> None:
    session, ran = await waiting_for_approval()
    assert await session.resolve_interrupt(INTERRUPT, approved=True)  # bound to the interrupt's digest
    await apply_answer(session)
    session.tool_calls.put(attrs.evolve(session.tool_calls["c1"], arguments='{"order": 8, "amount": 42}'))

    await session.call_single_attempt_tool("c1")

    assert ran == []
    assert session.tool_calls["c1"].status is S.FAILED


@pytest.mark.parametrize("digest", ["", "a/b"])
async def test_a_malformed_digest_is_refused_before_it_is_sent(digest: str) -> None:
    session, _ = await waiting_for_approval()

    assert await session.resolve_interrupt(INTERRUPT, approved=True, call_digest=digest) is False
    assert session.resolutions.published == []
