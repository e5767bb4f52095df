"""Flow start/stop/describe/wait and the typed errors the SDK raises for them."""

from datetime import timedelta
from pathlib import Path

import dex
import grpc  # type: ignore[import-untyped]
import pytest
from dex import ErrorSubStatus, FlowErrorType, FlowStatus, StepExecutionId, TimerId

from dex_agents.testing.devserver import (
    NO_WORKER_AVAILABLE,
    UNKNOWN_NAME,
    DevServer,
    DevServerConfig,
)
from tests.integration.devserver.flows import (
    BASIC_EVENTS,
    Flows,
    GhostBasicFlow,
    Seen,
    Unregistered,
    make_registry,
)
from tests.integration.devserver.support import Stack, running_client, running_worker

pytestmark = pytest.mark.integration


async def test_start_describe_and_wait(stack: Stack, flows: Flows) -> None:
    run_id = await stack.client.start_flow(flows.basic, "life-1", "hi")
    result = await stack.client.wait_for_flow("life-1")
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].step_execution_id == "Inspect-1"
    assert result.completions[0].step_type == "Inspect"
    assert result.single_output(Seen).state == "hi"
    info = await stack.client.describe_flow("life-1")
    assert (info.flow_id, info.run_id, info.flow_type, info.status) == (
        "life-1",
        run_id,
        "BasicFlow",
        FlowStatus.COMPLETED,
    )
    assert await stack.client.health_check()


async def test_duplicate_flow_id_raises_flow_already_started(stack: Stack, flows: Flows) -> None:
    options = dex.StartFlowOptions(request_id="req-1", ignore_already_started=True)
    run_id = await stack.client.start_flow(flows.wait, "dup-1", "idle", options)
    with pytest.raises(dex.FlowAlreadyStartedError) as raised:
        await stack.client.start_flow(flows.wait, "dup-1", "idle")
    assert raised.value.code is grpc.StatusCode.ALREADY_EXISTS
    assert await stack.client.start_flow(flows.wait, "dup-1", "idle", options) == run_id
    await stack.client.stop_flow("dup-1")
    await stack.client.wait_for_flow("dup-1")  # a CANCEL closes the Flow asynchronously
    with pytest.raises(dex.FlowAlreadyStartedError):
        await stack.client.start_flow(flows.wait, "dup-1", "idle")
    reuse = dex.StartFlowOptions(id_reuse_policy=dex.IdReusePolicy.ALLOW_IF_NOT_RUNNING)
    assert await stack.client.start_flow(flows.wait, "dup-1", "idle", reuse) != run_id


async def test_unknown_flow_errors(stack: Stack, flows: Flows) -> None:
    client = stack.client
    with pytest.raises(dex.FlowNotFoundError):
        await client.describe_flow("nope")
    with pytest.raises(dex.FlowNotFoundError):
        await client.wait_for_flow("nope")
    with pytest.raises(dex.FlowNotActiveOrNotFoundError) as raised:
        await client.invoke_rpc(flows.basic.state, "nope")
    assert raised.value.sub_status is ErrorSubStatus.FLOW_NOT_EXISTS
    with pytest.raises(dex.FlowNotActiveOrNotFoundError):
        await client.stop_flow("nope")
    with pytest.raises(dex.FlowNotActiveOrNotFoundError):
        await client.skip_timer("nope", StepExecutionId("Waiter", 1), TimerId(condition_index=0))


async def test_stream_read_on_unknown_flow_long_polls_by_default(stack: Stack) -> None:
    with pytest.raises(dex.LongPollTimeoutError):
        await stack.client.read_stream("nope", BASIC_EVENTS, timeout=timedelta(seconds=1))


async def test_stream_read_on_unknown_flow_can_be_not_found(tmp_path: Path, flows: Flows) -> None:
    async with (
        DevServer(DevServerConfig(stream_read_requires_flow=True)) as fake,
        running_client(make_registry(flows), fake.address, tmp_path) as client,
    ):
        with pytest.raises(dex.DexServiceError) as raised:
            await client.read_stream("nope", BASIC_EVENTS)
        assert raised.value.sub_status is ErrorSubStatus.FLOW_NOT_EXISTS
        with pytest.raises(dex.DexServiceError):
            await client.list_stream_messages("nope", BASIC_EVENTS, 5)


async def test_stop_types(stack: Stack, flows: Flows) -> None:
    client = stack.client
    for flow_id, stop_type, status in (
        ("stop-cancel", dex.StopType.CANCEL, FlowStatus.CANCELED),
        ("stop-terminate", dex.StopType.TERMINATE, FlowStatus.TERMINATED),
        ("stop-fail", dex.StopType.FAIL, FlowStatus.FAILED),
    ):
        await client.start_flow(flows.wait, flow_id, "idle")
        await stack.devserver.wait_until_waiting(flow_id, "Waiter-1")
        await client.stop_flow(flow_id, dex.StopFlowOptions(stop_type, reason="enough"))
        result = await client.wait_for_flow(flow_id)
        assert result.status is status
        assert stack.devserver.active_executions(flow_id) == {}
    failed = await client.wait_for_flow("stop-fail")
    assert failed.error_type is FlowErrorType.CLIENT_API_FAILED
    assert failed.error_message == "enough"
    with pytest.raises(dex.FlowNotActiveOrNotFoundError):
        await client.stop_flow("stop-fail")


async def test_flow_type_no_worker_serves(tmp_path: Path, flows: Flows) -> None:
    config = DevServerConfig(dispatch_wait=timedelta(seconds=0), default_maximum_attempts=1)
    unregistered = Unregistered()
    async with (
        DevServer(config) as fake,
        running_worker(make_registry(flows), fake.address, tmp_path / "w"),
        running_client(make_registry(flows, unregistered), fake.address, tmp_path / "c") as client,
    ):
        await client.start_flow(unregistered, "orphan-1", "force_complete")
        result = await client.wait_for_flow("orphan-1")
        assert result.status is FlowStatus.FAILED
        assert result.error_type is FlowErrorType.WORKER_API_FAILED
        assert [a.error_type for a in fake.attempts("orphan-1")] == [NO_WORKER_AVAILABLE]
        with pytest.raises(dex.WorkerInvocationError) as raised:
            await client.invoke_rpc(unregistered.publish, "orphan-1", "x")
        assert raised.value.worker_error_type == NO_WORKER_AVAILABLE


async def test_unregistered_step_and_rpc(tmp_path: Path, flows: Flows) -> None:
    config = DevServerConfig(default_maximum_attempts=2)
    ghost = GhostBasicFlow()
    async with (
        DevServer(config) as fake,
        running_worker(make_registry(flows), fake.address, tmp_path / "w"),
        running_client(dex.Registry([ghost], allow_async_handlers=True), fake.address, tmp_path / "c") as client,
    ):
        await client.start_flow(ghost, "ghost-1", "x")
        result = await client.wait_for_flow("ghost-1")
        assert result.status is FlowStatus.FAILED
        assert [a.error_type for a in fake.attempts("ghost-1")] == [UNKNOWN_NAME, UNKNOWN_NAME]
        await client.start_flow(
            ghost,
            "ghost-2",
            "x",
            dex.StartFlowOptions(id_reuse_policy=dex.IdReusePolicy.ALLOW_IF_NOT_RUNNING),
        )
        with pytest.raises(dex.WorkerInvocationError) as raised:
            await client.invoke_rpc(ghost.ghost, "ghost-2")
        assert raised.value.code is grpc.StatusCode.FAILED_PRECONDITION
        assert raised.value.worker_error_type == UNKNOWN_NAME
