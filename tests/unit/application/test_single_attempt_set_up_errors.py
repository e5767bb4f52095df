"""A single-attempt call whose Worker cannot confirm its start at all is a set-up error: failed, said, never run."""

import logging

import pytest

from dex_agents import ToolCallStatus, ToolEffect, ToolPolicy, TurnCompleted
from dex_agents.domain.errors import DeliveryLedgerUnavailableError
from dex_agents.testing import InMemorySessionHost, ScriptedRunner, deferred_tool_call, tool_calls_requested

FIX = "a non-idempotent tool call needs a Dex Client to confirm its start: flow.bind_client(lambda: client)"


class NoClientLedger:
    async def started(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int
    ) -> tuple[str, ...]:
        raise DeliveryLedgerUnavailableError(FIX)

    async def confirm(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int, delivery: str
    ) -> tuple[str, ...]:
        raise AssertionError("never reached: nothing was announced")


async def test_a_call_that_cannot_be_confirmed_for_want_of_a_client_fails_with_the_fix_and_never_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    write = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "email", "{}", policy=write)), TurnCompleted(new_messages=[])],
        tool_replies={"email": "sent"},
    )
    host = InMemorySessionHost(runner)
    host.deliveries = NoClientLedger()  # type: ignore[assignment]

    with caplog.at_level(logging.ERROR):
        await host.drive(await host.start("email the customer"))

    (record,) = runner.model_turns[1].tool_calls.values()
    assert record.status is ToolCallStatus.FAILED
    assert record.error == FIX
    assert runner.tool_executions == ()
    assert FIX in caplog.text
