"""Retries, back-off, RetryAfter, heartbeats, timeouts and failure routes."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dex import FlowErrorType, FlowStatus

from dex_agents.testing.devserver import HEARTBEAT_TIMEOUT, METHOD_TIMEOUT, DevServer, DevServerConfig
from tests.integration.devserver.flows import RETRY_LOG, Flows, Recovered, Succeeded, make_registry, reached
from tests.integration.devserver.support import Stack, running_client, running_worker, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _clear_retry_log() -> None:
    RETRY_LOG.clear()


async def test_attempts_first_attempt_at_and_heartbeat_carry_over(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.retry, "r-ok", "fail-2")
    result = (await stack.client.wait_for_flow("r-ok")).single_output(Succeeded)
    assert (result.attempt, result.last_heartbeat, result.step_execution_id) == (3, "hb-2", "Flaky-1")
    assert [(step, attempt) for step, attempt, _ in RETRY_LOG] == [("Flaky-1", 1), ("Flaky-1", 2), ("Flaky-1", 3)]
    assert len({first for _, _, first in RETRY_LOG}) == 1
    first = datetime.fromisoformat(result.first_attempt_at)
    assert abs(first - datetime.now(UTC)) < timedelta(minutes=1)
    attempts = stack.devserver.attempts("r-ok")
    assert [(a.attempt, a.error_type, a.next_delay_seconds) for a in attempts] == [
        (1, "builtins.RuntimeError", 1.0),
        (2, "builtins.RuntimeError", 2.0),
        (3, "", None),
    ]


async def test_failed_attempts_commit_nothing(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.retry, "r-atomic", "fail-2")
    await stack.client.wait_for_flow("r-atomic")
    assert await stack.client.invoke_rpc(flows.retry.state, "r-atomic") is None


async def test_exhausted_retries_take_the_failure_route(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.retry, "r-route", "fail-3")
    recovered = (await stack.client.wait_for_flow("r-route")).single_output(Recovered)
    assert recovered == Recovered(
        input="fail-3",
        error_type="builtins.RuntimeError",
        detail="attempt 3 failed",
        from_step_execution_id="Flaky-1",
        step_execution_id="Recover-1",
        attempt=1,
    )


async def test_retry_after_overrides_the_back_off(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.retry, "r-after", "retry_after-1")
    assert (await stack.client.wait_for_flow("r-after")).single_output(Succeeded).attempt == 2
    assert stack.devserver.attempts("r-after")[0].next_delay_seconds == 7.0


async def test_no_route_fails_the_flow(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.no_route, "r-fail", "x")
    result = await stack.client.wait_for_flow("r-fail")
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    assert "NoRoute-1 execute failed" in (result.error_message or "")
    assert [a.attempt for a in stack.devserver.attempts("r-fail")] == [1, 2]


async def test_back_off_waits_on_the_fake_clock(tmp_path: Path, flows: Flows) -> None:
    config = DevServerConfig(retry_delay_scale=1.0, frozen_clock=True)
    async with (
        DevServer(config) as fake,
        running_worker(make_registry(flows), fake.address, tmp_path / "w"),
        running_client(make_registry(flows), fake.address, tmp_path / "c") as client,
    ):
        await client.start_flow(flows.retry, "r-clock", "fail-1")
        await wait_until(lambda: len(fake.attempts("r-clock")) == 1, what="attempt 1 to fail")
        fake.advance(0.5)
        assert len(fake.attempts("r-clock")) == 1
        fake.advance(0.5)
        assert (await client.wait_for_flow("r-clock")).single_output(Succeeded).attempt == 2


async def test_total_duration_limits_retries(tmp_path: Path, flows: Flows) -> None:
    config = DevServerConfig(default_total_retry_duration=timedelta(seconds=2))
    async with (
        DevServer(config) as fake,
        running_worker(make_registry(flows), fake.address, tmp_path / "w"),
        running_client(make_registry(flows), fake.address, tmp_path / "c") as client,
    ):
        await client.start_flow(flows.retry, "r-total", "fail-2")
        recovered = (await client.wait_for_flow("r-total")).single_output(Recovered)
        assert recovered.detail == "attempt 2 failed"
        flaky = [a for a in fake.attempts("r-total") if a.step_type == "Flaky"]
        assert [a.next_delay_seconds for a in flaky] == [1.0, None]


async def test_silent_worker_fails_the_attempt_after_the_heartbeat_timeout(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.timeout, "r-silent", "heartbeat")
    await wait_until(lambda: stack.devserver.last_heartbeat("r-silent", "Silent-1") is not None)
    stack.devserver.advance(9)
    assert stack.devserver.attempts("r-silent") == []
    stack.devserver.advance(1)
    result = await stack.client.wait_for_flow("r-silent")
    assert result.single_output(str) == "alive"
    assert [a.error_type for a in stack.devserver.attempts("r-silent")] == [HEARTBEAT_TIMEOUT, ""]


async def test_method_timeout_fails_the_attempt(stack: Stack, flows: Flows) -> None:
    await stack.client.start_flow(flows.timeout, "r-slow", "plain")
    await wait_until(reached("silent@1").is_set, what="Silent-1 to start")
    await stack.client.invoke_rpc(flows.timeout.slow, "r-slow", "x")
    await wait_until(reached("slow@1").is_set, what="Slow-1 to start")
    stack.devserver.advance(20)
    result = await stack.client.wait_for_flow("r-slow")
    assert sorted(c.decode(str) for c in result.completions) == ["none", "slow done"]
    slow = [a for a in stack.devserver.attempts("r-slow") if a.step_type == "Slow"]
    assert [a.error_type for a in slow] == [METHOD_TIMEOUT, ""]
