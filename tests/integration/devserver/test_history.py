"""GetHistoryEvents: Step events with step type, execution ID and final attempt."""

from pathlib import Path

import pytest

from dex_agents.testing.devserver import (
    EXECUTE_COMPLETED_EVENT,
    DevServer,
    DevServerConfig,
    StepHistoryEntry,
    read_history_events,
    read_step_history,
)
from tests.integration.devserver.flows import Flows, make_registry
from tests.integration.devserver.support import Stack, running_client, running_worker

pytestmark = pytest.mark.integration


async def test_a_flow_read_back_through_history(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.retry, "h-1", "fail-1")
    await stack.client.wait_for_flow("h-1")
    info = await stack.client.describe_flow("h-1")
    entries = await read_step_history(stack.devserver.address, "h-1", info.run_id)
    assert entries == [StepHistoryEntry(EXECUTE_COMPLETED_EVENT, "Flaky", "Flaky-1", 2)]
    events = await read_history_events(stack.devserver.address, "h-1")
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds == ["flow_started_or_continued", EXECUTE_COMPLETED_EVENT, "flow_closed"]
    assert [event.event_id for event in events] == [1, 2, 3]
    completed = events[1].step_execute_completed
    assert completed.context.last_failure_info.attempt == 0
    assert completed.output.step_decision.close_decision.HasField("close_input")


async def test_wait_for_and_failure_events(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.retry, "h-2", "fail-3")
    await stack.client.wait_for_flow("h-2")
    assert stack.devserver.step_history("h-2") == [
        StepHistoryEntry("step_execute_failed", "Flaky", "Flaky-1", 3),
        StepHistoryEntry(EXECUTE_COMPLETED_EVENT, "Recover", "Recover-1", 1),
    ]
    failed = stack.devserver.history("h-2")[1].step_execute_failed
    details = failed.output.failure.details
    assert (details.original_worker_error_type, details.original_worker_error_detail) == (
        "builtins.RuntimeError",
        "attempt 3 failed",
    )
    await stack.client.start_flow(flows.wait, "h-3", "timer")
    await stack.devserver.wait_until_waiting("h-3", "Waiter-1")
    stack.devserver.advance(30)
    await stack.client.wait_for_flow("h-3")
    assert [(e.event_type, e.step_execution_id) for e in stack.devserver.step_history("h-3")] == [
        ("step_wait_for_completed", "Waiter-1"),
        (EXECUTE_COMPLETED_EVENT, "Waiter-1"),
    ]


async def test_history_pages(tmp_path: Path, flows: Flows) -> None:
    async with (
        DevServer(DevServerConfig(history_page_size=1)) as fake,
        running_worker(make_registry(flows), fake.address, tmp_path / "w"),
        running_client(make_registry(flows), fake.address, tmp_path / "c") as client,
    ):
        await client.start_flow(flows.basic, "h-pages", "x")
        await client.wait_for_flow("h-pages")
        entries = await read_step_history(fake.address, "h-pages")
        assert [e.step_execution_id for e in entries] == ["Begin-1", "Inspect-1"]
        rpc_events = await read_history_events(fake.address, "h-pages")
        assert len(rpc_events) == 4
