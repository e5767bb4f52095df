"""wait_for -> waiting condition -> execute: Channels, Timers, any_of/all_of, consumption."""

from pathlib import Path

import dex
import pytest
from dex import StepExecutionId, TimerId

from dex_agents.testing.devserver import TEST_RETRY_DELAY_SCALE, DevServer, DevServerConfig
from tests.integration.devserver.flows import Batch, Flows, WaitOutcome, make_registry
from tests.integration.devserver.support import Stack, running_client, running_worker

pytestmark = pytest.mark.integration


async def _outcome(stack: Stack, flow_id: str) -> WaitOutcome:
    return (await stack.client.wait_for_flow(flow_id)).single_output(WaitOutcome)


async def _publish(stack: Stack, flows: Flows, flow_id: str, *values: str) -> None:
    for value in values:
        await stack.client.invoke_rpc(flows.wait.publish, flow_id, value)


async def _preloaded(stack: Stack, flows: Flows, flow_id: str, mode: str, *values: str) -> None:
    """Start idle, then queue ``values`` and start ``Waiter-2(mode)`` in one RPC commit."""
    await stack.client.start_flow(flows.wait, flow_id, "idle")
    await stack.client.invoke_rpc(flows.wait.load, flow_id, Batch(mode, list(values)))


async def test_for_one_consumes_one_in_fifo_order(stack: Stack, flows: Flows) -> None:
    await _preloaded(stack, flows, "w-one", "for_one", "a", "b")
    outcome = await _outcome(stack, "w-one")
    assert (outcome.values, outcome.inbox_left, outcome.mode) == (["a"], 1, "for_one")
    assert [m.value.string_value for m in stack.devserver.channel_messages("w-one", "INBOX")] == ["b"]


async def test_for_n_waits_for_all_n(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-n", "for_n")
    await stack.devserver.wait_until_waiting("w-n", "Waiter-1")
    await _publish(stack, flows, "w-n", "a")
    assert stack.devserver.active_executions("w-n") == {"Waiter-1": "waiting"}
    await _publish(stack, flows, "w-n", "b")
    assert (await _outcome(stack, "w-n")).values == ["a", "b"]


async def test_at_least_consumes_everything_queued(stack: Stack, flows: Flows) -> None:
    await _preloaded(stack, flows, "w-least", "at_least", "a", "b", "c")
    outcome = await _outcome(stack, "w-least")
    assert (outcome.step_execution_id, outcome.values, outcome.inbox_left) == (
        "Waiter-2",
        ["a", "b", "c"],
        0,
    )


async def test_at_most_never_blocks(stack: Stack, flows: Flows) -> None:
    await _preloaded(stack, flows, "w-most", "at_most", "a", "b", "c")
    outcome = await _outcome(stack, "w-most")
    assert (outcome.values, outcome.inbox_left) == (["a", "b"], 1)
    await _preloaded(stack, flows, "w-most-empty", "at_most")
    assert (await _outcome(stack, "w-most-empty")).values == []


async def test_for_range_consumes_up_to_at_most(stack: Stack, flows: Flows) -> None:
    await _preloaded(stack, flows, "w-range", "for_range", "a", "b", "c")
    outcome = await _outcome(stack, "w-range")
    assert (outcome.values, outcome.inbox_left) == (["a", "b"], 1)


async def test_channel_beats_timer_when_message_comes_first(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-race-msg", "any_of")
    await stack.devserver.wait_until_waiting("w-race-msg", "Waiter-1")
    stack.devserver.advance(20)
    await _publish(stack, flows, "w-race-msg", "a")
    outcome = await _outcome(stack, "w-race-msg")
    assert (outcome.values, outcome.timer_fired) == (["a"], False)


async def test_timer_beats_channel_when_it_fires_first(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-race-timer", "any_of")
    await stack.devserver.wait_until_waiting("w-race-timer", "Waiter-1")
    stack.devserver.advance(30)
    outcome = await _outcome(stack, "w-race-timer")
    assert (outcome.values, outcome.timer_fired, outcome.timer_0) == ([], True, True)


@pytest.mark.parametrize(
    "config", [DevServerConfig(keep_early_timer_skips=True, retry_delay_scale=TEST_RETRY_DELAY_SCALE)]
)
async def test_any_of_picks_timers_first_when_both_are_ready(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-canon", "idle")
    # Skip the Timer of Waiter-2 before it exists, then queue a message and start it:
    # at its first evaluation both are ready, and the canonical order picks the Timer.
    await stack.client.skip_timer("w-canon", StepExecutionId("Waiter", 2), TimerId(condition_index=0))
    await stack.client.invoke_rpc(flows.wait.load, "w-canon", Batch("any_of", ["a"]))
    outcome = await _outcome(stack, "w-canon")
    assert (outcome.timer_fired, outcome.values, outcome.inbox_left) == (True, [], 1)


async def test_any_of_consumes_only_the_chosen_channel(stack: Stack, flows: Flows) -> None:
    await _preloaded(stack, flows, "w-choose", "any_of_map", "a")
    outcome = await _outcome(stack, "w-choose")
    assert (outcome.values, outcome.replies, outcome.inbox_left) == (["a"], [], 0)


async def test_all_of_needs_every_condition(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-all", "all_of")
    await stack.devserver.wait_until_waiting("w-all", "Waiter-1")
    await _publish(stack, flows, "w-all", "a")
    await stack.client.invoke_rpc(flows.wait.reply, "w-all", "r")
    assert stack.devserver.active_executions("w-all") == {"Waiter-1": "waiting"}
    stack.devserver.advance(5)
    outcome = await _outcome(stack, "w-all")
    assert (outcome.values, outcome.replies, outcome.timer_fired) == (["a"], ["r"], True)


async def test_timer_results_follow_timer_order(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-timers", "two_timers")
    await stack.devserver.wait_until_waiting("w-timers", "Waiter-1")
    stack.devserver.advance(9)
    assert stack.devserver.active_executions("w-timers") == {"Waiter-1": "waiting"}
    stack.devserver.advance(1)
    outcome = await _outcome(stack, "w-timers")
    assert (outcome.timer_0, outcome.timer_1) == (False, True)


async def test_any_combination_picks_a_whole_group(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-combo", "combination")
    await stack.devserver.wait_until_waiting("w-combo", "Waiter-1")
    await stack.client.invoke_rpc(flows.wait.reply, "w-combo", "r")
    await _publish(stack, flows, "w-combo", "a", "b")
    outcome = await _outcome(stack, "w-combo")
    assert (outcome.values, outcome.replies, outcome.timer_fired) == (["a", "b"], ["r"], False)


async def test_skip_timer_fires_it_now(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-skip", "timer")
    await stack.devserver.wait_until_waiting("w-skip", "Waiter-1")
    await stack.client.skip_timer("w-skip", StepExecutionId("Waiter", 1), TimerId(condition_index=0))
    assert (await _outcome(stack, "w-skip")).timer_fired


async def test_oldest_waiter_gets_the_message(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-order", "for_one")
    await stack.devserver.wait_until_waiting("w-order", "Waiter-1")
    await stack.client.invoke_rpc(flows.wait.load, "w-order", Batch("for_one", []))
    await stack.devserver.wait_until_waiting("w-order", "Waiter-2")
    await _publish(stack, flows, "w-order", "a")
    assert (await _outcome(stack, "w-order")).step_execution_id == "Waiter-1"


async def test_newest_waiter_first_is_configurable(tmp_path: Path, flows: Flows) -> None:
    async with (
        DevServer(DevServerConfig(waiter_order="newest_first")) as fake,
        running_worker(make_registry(flows), fake.address, tmp_path / "w"),
        running_client(make_registry(flows), fake.address, tmp_path / "c") as client,
    ):
        await client.start_flow(flows.wait, "w-newest", "for_one")
        await fake.wait_until_waiting("w-newest", "Waiter-1")
        await client.invoke_rpc(flows.wait.load, "w-newest", Batch("for_one", []))
        await fake.wait_until_waiting("w-newest", "Waiter-2")
        await client.invoke_rpc(flows.wait.publish, "w-newest", "a")
        result = await client.wait_for_flow("w-newest")
        assert result.single_output(WaitOutcome).step_execution_id == "Waiter-2"


async def test_wait_for_failure_can_proceed_to_execute(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-fail", "fail")
    outcome = await _outcome(stack, "w-fail")
    assert outcome.wait_for_failed
    assert outcome.mode == ""
    attempts = stack.devserver.attempts("w-fail")
    assert [a.method for a in attempts].count("wait_for") == 3
    assert attempts[0].error_type == "builtins.RuntimeError"


async def test_messages_published_before_anyone_waits_are_kept(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.wait, "w-early", "idle")
    await _publish(stack, flows, "w-early", "a", "b")
    await stack.client.invoke_rpc(flows.wait.load, "w-early", Batch("for_n", []))
    assert (await _outcome(stack, "w-early")).values == ["a", "b"]


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="retry_delay_scale"):
        DevServerConfig(retry_delay_scale=-1)
    with pytest.raises(ValueError, match="default_worker_target"):
        DevServerConfig(default_worker_target="nowhere")
    assert isinstance(dex.WaitForFailurePolicy.PROCEED, dex.WaitForFailurePolicy)
