"""Rules where the dev server follows the real server's stricter behaviour (issue 12).

Locks held through back-off, unlimited attempts with capped back-off, pending-only
Timer skips, 60 s long-poll cap, 16 MiB gRPC messages, Stream message and capacity limits.
"""

import time
from datetime import timedelta

import dex
import grpc  # type: ignore[import-untyped]
import pytest
from dex import StepExecutionId, TimerId
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

from dex_agents.testing.devserver import DevServerConfig
from tests.integration.devserver.flows import SMALL_EVENTS, STREAM_EVENTS, Flows, gate
from tests.integration.devserver.support import Stack, wait_until

pytestmark = pytest.mark.integration

FROZEN = DevServerConfig(dispatch_wait=timedelta(seconds=2), retry_delay_scale=1.0, frozen_clock=True)


@pytest.mark.parametrize("config", [FROZEN])
async def test_a_step_keeps_its_lock_through_the_retry_back_off(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.lock, "lk-backoff", "fail-1")
    await wait_until(lambda: len(stack.devserver.attempts("lk-backoff")) == 1, what="the first attempt to fail")
    assert stack.devserver.attempts("lk-backoff")[0].next_delay_seconds == 1.0
    with pytest.raises(dex.RpcLockConflictError):
        await stack.client.invoke_rpc(flows.lock.locked_write, "lk-backoff", "during back-off")
    gate("holder").set()
    stack.devserver.advance(1)
    await stack.devserver.wait_until_waiting("lk-backoff", "Listener-1")
    assert await stack.client.invoke_rpc(flows.lock.locked_write, "lk-backoff", "after") == "held"


@pytest.mark.parametrize("config", [DevServerConfig(dispatch_wait=timedelta(seconds=2), retry_delay_scale=0.001)])
async def test_a_step_without_an_attempt_limit_retries_past_ten_attempts_with_capped_back_off(
    stack: Stack, flows: Flows
) -> None:
    gate("holder").set()
    await stack.client.start_flow(flows.lock, "lk-unlimited", "fail-11")
    await stack.devserver.wait_until_waiting("lk-unlimited", "Listener-1", within=20)
    attempts = [a for a in stack.devserver.attempts("lk-unlimited") if a.step_type == "Holder"]
    assert [a.attempt for a in attempts] == list(range(1, 13))
    assert [a.next_delay_seconds for a in attempts[:-1]] == [1, 2, 4, 8, 16, 32, 64, 100, 100, 100, 100]


@pytest.mark.parametrize("flow_id", ["a/b", "a$b", "SubFlow:x"])
async def test_start_flow_refuses_a_flow_id_with_a_reserved_character_as_real_dex_does(
    stack: Stack, flows: Flows, flow_id: str
) -> None:
    with pytest.raises(dex.DexServiceError) as raised:
        await stack.client.start_flow(flows.wait, flow_id, "idle")
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
    reserved = next(c for c in "/$:" if c in flow_id)
    assert f'flow ID contains reserved character "{reserved}"' in str(raised.value)
    assert stack.devserver.attempts(flow_id) == []


async def test_start_flow_refuses_a_failure_proceed_step_type_with_a_reserved_character(stack: Stack) -> None:
    options = pb.StepOptions(execute_failure_proceed_step_type="Fallback")
    options.execute_failure_proceed_step_options.execute_failure_proceed_step_type = "Sub:Fallback"
    request = pb.StartFlowRequest(flow_id="proceed", flow_type="Waits", start_step_type="Waiter", step_options=options)
    async with grpc.aio.insecure_channel(stack.devserver.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await dex_pb2_grpc.FlowServiceStub(channel).StartFlow(request)  # type: ignore[no-untyped-call]  # generated stubs are untyped
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert 'step type contains reserved character ":"' in str(raised.value.details())


async def test_skip_timer_before_the_step_waits_is_rejected(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-early", "idle")
    with pytest.raises(dex.DexServiceError) as raised:
        await stack.client.skip_timer("w-early", StepExecutionId("Waiter", 2), TimerId(condition_index=0))
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT


async def test_skip_timer_of_a_timer_that_is_not_there_is_rejected(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-nottimer", "timer")
    await stack.devserver.wait_until_waiting("w-nottimer", "Waiter-1")
    with pytest.raises(dex.DexServiceError) as raised:
        await stack.client.skip_timer("w-nottimer", StepExecutionId("Waiter", 1), TimerId(condition_index=5))
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("config", [DevServerConfig(max_wait_seconds=0.2)])
async def test_long_polls_are_cut_to_the_server_maximum(stack: Stack, flows: Flows) -> None:
    started = time.monotonic()
    with pytest.raises(dex.LongPollTimeoutError):
        await stack.client.read_stream("nobody", STREAM_EVENTS, timeout=timedelta(seconds=30))
    assert time.monotonic() - started < 10


async def test_the_server_takes_messages_over_4_mib_up_to_16_mib(stack: Stack) -> None:
    with pytest.raises(dex.DexServiceError) as raised:
        await stack.client.write_stream("big", STREAM_EVENTS, "client#1", "x" * (5 * 1024 * 1024))
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "message limit" in str(raised.value)
    with pytest.raises(dex.DexServiceError) as too_big:
        await stack.client.write_stream("big", STREAM_EVENTS, "client#1", "x" * (17 * 1024 * 1024))
    assert too_big.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_a_stream_message_over_100_kib_is_rejected(stack: Stack) -> None:
    await stack.client.write_stream("s-limit", STREAM_EVENTS, "client#1", "x" * (100 * 1024 - 10))
    with pytest.raises(dex.DexServiceError) as raised:
        await stack.client.write_stream("s-limit", STREAM_EVENTS, "client#1", "x" * (100 * 1024 + 1))
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
    page = await stack.client.list_stream_messages("s-limit", STREAM_EVENTS, 10)
    assert len(page.messages) == 1


async def test_a_stream_write_past_its_capacity_is_rejected_and_the_oldest_are_trimmed(stack: Stack) -> None:
    for index in range(10):
        await stack.client.write_stream("s-cap", SMALL_EVENTS, "client#1", f"m-{index}")
    kept = [m.value for m in (await stack.client.list_stream_messages("s-cap", SMALL_EVENTS, 100)).messages]
    assert kept[0] == "m-9"
    assert 1 < len(kept) < 10
    with pytest.raises(dex.DexServiceError) as raised:
        await stack.client.write_stream("s-cap", SMALL_EVENTS, "client#1", "y" * 2000)
    assert raised.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    again = [m.value for m in (await stack.client.list_stream_messages("s-cap", SMALL_EVENTS, 100)).messages]
    assert again == kept


@pytest.mark.parametrize(
    "config", [DevServerConfig(dispatch_wait=timedelta(seconds=2), stop_close_delay=timedelta(seconds=2))]
)
async def test_a_cancel_is_a_signal_and_requests_while_the_flow_closes_get_flow_closing(
    stack: Stack, flows: Flows
) -> None:
    gate("holder").set()
    await stack.client.start_flow(flows.lock, "lk-stop", "")
    await stack.devserver.wait_until_waiting("lk-stop", "Listener-1")
    await stack.client.stop_flow("lk-stop", dex.StopFlowOptions(type=dex.StopType.CANCEL, reason="bye"))
    with pytest.raises(dex.FlowClosingError):
        await stack.client.stop_flow("lk-stop", dex.StopFlowOptions(type=dex.StopType.CANCEL))
    with pytest.raises(dex.FlowClosingError):
        await stack.client.invoke_rpc(flows.lock.locked_write, "lk-stop", "late")
    assert await stack.client.invoke_rpc(flows.lock.read_state, "lk-stop") == "held"
    result = await stack.client.wait_for_flow("lk-stop")
    assert result.status is dex.FlowStatus.CANCELED
    with pytest.raises(dex.FlowNotActiveOrNotFoundError):
        await stack.client.stop_flow("lk-stop", dex.StopFlowOptions(type=dex.StopType.CANCEL))


async def test_terminate_closes_the_flow_at_once(stack: Stack, flows: Flows) -> None:
    gate("holder").set()
    await stack.client.start_flow(flows.lock, "lk-term", "")
    await stack.devserver.wait_until_waiting("lk-term", "Listener-1")
    await stack.client.stop_flow("lk-term", dex.StopFlowOptions(type=dex.StopType.TERMINATE))
    assert (await stack.client.describe_flow("lk-term")).status is dex.FlowStatus.TERMINATED
