"""``CallSingleAttemptTool`` runs its tool at most once per Step attempt, whatever the engine redelivers.

A delivery is one hand-over of a Step attempt to a Worker; an engine may hand
the same attempt over again. The in-memory ledger reads the recorded events
as the engine's stored Stream.
"""

import attrs
import pytest

from dex_agents.application.next import GoTo, StepName
from dex_agents.application.runner import DeferredToolExecution
from dex_agents.application.steps.call_tool import CONCURRENT_DELIVERY, EARLIER_DELIVERY
from dex_agents.domain.errors import DeliveryUnconfirmedError
from dex_agents.domain.events import ToolCallStartedPayload
from dex_agents.domain.tools import ToolCallStatus, ToolPolicy
from dex_agents.testing import ScriptedRunner, deferred_tool_call, tool_calls_requested
from dex_agents.testing.memory import InMemoryDeliveryLedger, InMemorySessionHost
from tests.unit.application.policies import NON_IDEMPOTENT_NO_APPROVAL, READ

S = ToolCallStatus


class WorkerDiedError(Exception):
    """Stands for a Worker that vanished after the tool's effect, before its result left."""


async def session_with_call(policy: ToolPolicy, ran: list[int]) -> InMemorySessionHost:
    runner = ScriptedRunner([tool_calls_requested(deferred_tool_call("c1", "tool", "{}", policy=policy))])
    session = InMemorySessionHost(runner)
    await session.start("go")
    await session.run_model()

    def tool(call: DeferredToolExecution) -> str:
        ran.append(call.attempt)
        if len(ran) == 1:
            raise WorkerDiedError
        return "done"

    runner.script_tool("c1", tool)
    return session


async def test_a_redelivered_attempt_whose_start_was_stored_records_outcome_unknown_without_running() -> None:
    ran: list[int] = []
    session = await session_with_call(NON_IDEMPOTENT_NO_APPROVAL, ran)
    with pytest.raises(WorkerDiedError):
        await session.call_single_attempt_tool("c1", step_execution_id="CallSingleAttemptTool-7")

    decision = await session.call_single_attempt_tool("c1", step_execution_id="CallSingleAttemptTool-7")

    assert decision == GoTo(step=StepName.RUN_MODEL, window=session.state.current.model_window()), "its turn resumes"
    assert ran == [1]
    record = session.tool_calls["c1"]
    assert (record.status, record.error, record.attempts) == (S.OUTCOME_UNKNOWN, EARLIER_DELIVERY, 1)


async def test_a_read_redelivered_after_its_start_runs_again_on_todays_path() -> None:
    ran: list[int] = []
    session = await session_with_call(READ, ran)
    with pytest.raises(WorkerDiedError):
        await session.call_tool("c1", step_execution_id="CallTool-7")

    await session.call_tool("c1", step_execution_id="CallTool-7")

    assert ran == [1, 1]
    assert session.tool_calls["c1"].status is S.SUCCEEDED


async def test_the_tool_runs_only_after_its_marked_start_is_read_back() -> None:
    ran: list[int] = []
    session = await session_with_call(NON_IDEMPOTENT_NO_APPROVAL, ran)
    stored_before_running: list[tuple[str, ...]] = []

    def tool(call: DeferredToolExecution) -> str:
        stored_before_running.append(tuple(p.delivery or "" for p in session.sink.payloads(ToolCallStartedPayload)))
        return "done"

    session.scripted.script_tool("c1", tool)
    await session.call_single_attempt_tool("c1")

    (marker,) = stored_before_running[0]
    assert marker  # a fresh, non-empty delivery marker
    assert session.tool_calls["c1"].status is S.SUCCEEDED


@attrs.define
class RacingLedger:
    """A ledger where another delivery of the same attempt stored its start just before this one."""

    inner: InMemoryDeliveryLedger

    async def started(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int
    ) -> tuple[str, ...]:
        return await self.inner.started(flow_id, tool_call_id, step_execution_id=step_execution_id, attempt=attempt)

    async def confirm(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int, delivery: str
    ) -> tuple[str, ...]:
        stored = await self.inner.confirm(
            flow_id, tool_call_id, step_execution_id=step_execution_id, attempt=attempt, delivery=delivery
        )
        return ("the-other-delivery", *stored)


async def test_a_delivery_that_was_not_first_to_announce_does_not_run_the_tool() -> None:
    ran: list[int] = []
    session = await session_with_call(NON_IDEMPOTENT_NO_APPROVAL, ran)
    session.deliveries = RacingLedger(session.deliveries)  # type: ignore[assignment]

    await session.call_single_attempt_tool("c1")

    assert ran == []
    record = session.tool_calls["c1"]
    assert (record.status, record.error) == (S.OUTCOME_UNKNOWN, CONCURRENT_DELIVERY)


async def test_a_start_that_never_reached_the_engine_fails_the_attempt_before_the_tool_runs() -> None:
    ran: list[int] = []
    session = await session_with_call(NON_IDEMPOTENT_NO_APPROVAL, ran)
    session.sink.emit = lambda event: None  # type: ignore[method-assign]  # the engine never stores the start

    with pytest.raises(DeliveryUnconfirmedError):
        await session.call_single_attempt_tool("c1")

    assert ran == []
    assert session.tool_calls["c1"].status is S.PENDING  # the failure route records outcome_unknown
