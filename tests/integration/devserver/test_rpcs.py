"""RPCs: locks fail fast, transactional commits, query-only reads of closed Flows, loads."""

import dex
import grpc  # type: ignore[import-untyped]
import pytest
from dex import FlowStatus

from tests.integration.devserver.flows import INSIDE, ITEMS, OVERLAPS, Flows, Ticket, gate, reached
from tests.integration.devserver.support import Stack, wait_until

pytestmark = pytest.mark.integration


async def test_held_lock_fails_the_rpc_at_once_and_commits_nothing(stack: Stack, flows: Flows) -> None:
    client = stack.client
    await client.start_flow(flows.lock, "lock-1", "")
    await wait_until(reached("holder").is_set, what="Holder to take the lock")
    with pytest.raises(dex.RpcLockConflictError) as raised:
        await client.invoke_rpc(flows.lock.locked_write, "lock-1", "early")
    assert raised.value.code is grpc.StatusCode.ABORTED
    assert raised.value.sub_status is dex.ErrorSubStatus.WORKER_API_ERROR
    assert await client.invoke_rpc(flows.lock.read_state, "lock-1") is None
    assert stack.devserver.channel_messages("lock-1", "INBOX") == []
    gate("holder").set()
    await stack.devserver.wait_until_waiting("lock-1", "Listener-1")
    assert await client.invoke_rpc(flows.lock.locked_write, "lock-1", "late") == "held"
    result = await client.wait_for_flow("lock-1")
    assert result.single_output(str) == "late"


async def test_failing_transactional_rpc_commits_nothing(stack: Stack, flows: Flows) -> None:
    gate("holder").set()
    await stack.client.start_flow(flows.lock, "lock-tx", "")
    await stack.devserver.wait_until_waiting("lock-tx", "Listener-1")
    with pytest.raises(dex.WorkerInvocationError) as raised:
        await stack.client.invoke_rpc(flows.lock.transactional_fail, "lock-tx", "nope")
    assert raised.value.code is grpc.StatusCode.FAILED_PRECONDITION
    assert raised.value.worker_error_type == "builtins.RuntimeError"
    assert raised.value.worker_error_detail == "refused after staging a write"
    assert await stack.client.invoke_rpc(flows.lock.read_state, "lock-tx") == "held"


async def test_query_only_rpc_reads_a_closed_flow(stack: Stack, flows: Flows) -> None:
    gate("holder").set()
    await stack.client.start_flow(flows.lock, "lock-closed", "")
    await stack.devserver.wait_until_waiting("lock-closed", "Listener-1")
    await stack.client.invoke_rpc(flows.lock.locked_write, "lock-closed", "bye")
    assert (await stack.client.wait_for_flow("lock-closed")).status is FlowStatus.COMPLETED
    assert await stack.client.invoke_rpc(flows.lock.read_state, "lock-closed") == "bye"
    with pytest.raises(dex.FlowNotActiveOrNotFoundError):
        await stack.client.invoke_rpc(flows.lock.locked_write, "lock-closed", "again")
    with pytest.raises(dex.FlowNotActiveOrNotFoundError):
        await stack.client.invoke_rpc(flows.lock.put_item, "lock-closed", Ticket("a", "A"))


async def test_rpc_map_loads_per_call(stack: Stack, flows: Flows) -> None:
    gate("holder").set()
    client = stack.client
    await client.start_flow(flows.lock, "lock-map", "")
    await stack.devserver.wait_until_waiting("lock-map", "Listener-1")
    await client.invoke_rpc(flows.lock.put_item, "lock-map", Ticket("a", "A"))
    await client.invoke_rpc(flows.lock.put_item, "lock-map", Ticket("b", "B"))
    with pytest.raises(dex.WorkerInvocationError) as raised:
        await client.invoke_rpc(flows.lock.read_item, "lock-map", "a")
    assert raised.value.worker_error_type == "dex.runtime_errors.AttributeMapNotLoadedError"
    options = dex.RPCInvokeOptions(load_attribute_map_instances=(ITEMS.load("a"),))
    assert await client.invoke_rpc(flows.lock.read_item, "lock-map", "a", options=options) == "A"
    assert await client.invoke_rpc(flows.lock.item_keys, "lock-map") == ["a", "b"]
    assert stack.devserver.attribute("lock-map", "ITEMS/b") is not None


async def test_channel_message_ids_and_transactional_deletion(stack: Stack, flows: Flows) -> None:
    client = stack.client
    await client.start_flow(flows.decide, "del-1", "dead_end")
    for value in ("a", "b", "c"):
        await client.invoke_rpc(flows.decide.publish, "del-1", value)
    pending = await client.invoke_rpc(flows.decide.drop, "del-1", "")
    ids = [entry.split("=")[0] for entry in pending]
    assert [entry.split("=")[1] for entry in pending] == ["a", "b", "c"]
    assert len(set(ids)) == 3
    assert [m.message_id for m in stack.devserver.channel_messages("del-1", "INBOX")] == ids[1:]
    with pytest.raises(dex.ChannelMessageNotFoundError):
        await client.invoke_rpc(flows.decide.drop, "del-1", ids[0])
    assert len(stack.devserver.channel_messages("del-1", "INBOX")) == 2
    await client.invoke_rpc(flows.decide.drop, "del-1", ids[2])
    assert [m.value.string_value for m in stack.devserver.channel_messages("del-1", "INBOX")] == ["b"]


async def test_a_step_waits_for_a_lock_another_step_holds(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.lock, "lock-steps", "")
    await wait_until(reached("holder").is_set, what="Holder-1 to take the lock")
    await stack.client.invoke_rpc(flows.lock.another_holder, "lock-steps")
    await wait_until(lambda: "Holder-2" in stack.devserver.active_executions("lock-steps"))
    assert stack.devserver.engine.run("lock-steps").locks == {"STATE": "Holder-1:execute"}
    assert {"Holder-1"} == INSIDE
    gate("holder").set()
    await stack.devserver.wait_until_waiting("lock-steps", "Listener-2")
    assert {"Holder-1", "Holder-2"} not in OVERLAPS
    holders = [e.step_execution_id for e in stack.devserver.step_history("lock-steps") if e.step_type == "Holder"]
    assert holders == ["Holder-1", "Holder-2"]
    await stack.client.stop_flow("lock-steps")


async def test_channel_map_loads_and_sizes(stack: Stack, flows: Flows) -> None:
    client = stack.client
    await client.start_flow(flows.wait, "cm-1", "idle")
    await client.invoke_rpc(flows.wait.reply, "cm-1", "r1")
    await client.invoke_rpc(flows.wait.reply, "cm-1", "r2")
    assert await client.invoke_rpc(flows.wait.pending_replies, "cm-1") == ["r1", "r2"]
    with pytest.raises(dex.WorkerInvocationError) as raised:
        await client.invoke_rpc(flows.wait.pending_replies_unloaded, "cm-1")
    assert raised.value.worker_error_type == "dex.runtime_errors.ChannelMessagesNotLoadedError"
    assert await client.invoke_rpc(flows.wait.reply_keys, "cm-1") == ["k", "2"]
