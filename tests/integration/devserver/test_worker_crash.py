"""A Worker SIGKILLed inside a Step handler: the attempt fails at once and moves on."""

import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.testing.devserver import (
    EXECUTE_COMPLETED_EVENT,
    WORKER_DISCONNECTED,
    DevServer,
    DevServerConfig,
    read_step_history,
)
from tests.integration.devserver.flows import Flows, make_registry
from tests.integration.devserver.support import WorkerProcess, running_client, wait_until

REPLACEMENT_WAIT = timedelta(seconds=60)
"""How long a task waits for a Worker: the replacement child takes over the 10 s default to start on a loaded machine
(the task would fail with no Worker available and cost an attempt)."""

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def first_and_replacement(
    fake: DevServer, tmp_path: Path, gates: Path
) -> AsyncIterator[tuple[WorkerProcess, WorkerProcess]]:
    """Two Worker children on ``fake`` sharing ``gates``: the first started, its replacement not; both stopped after."""
    first = WorkerProcess(fake.address, tmp_path / "cache-1", gates)
    second = WorkerProcess(fake.address, tmp_path / "cache-2", gates)
    try:
        await first.start()
        yield first, second
    finally:
        await first.stop()
        await second.stop()


async def test_sigkilled_worker_attempt_runs_again_on_the_replacement(tmp_path: Path, flows: Flows) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    async with DevServer(DevServerConfig(dispatch_wait=REPLACEMENT_WAIT)) as fake:
        async with (
            first_and_replacement(fake, tmp_path, gates) as (first, second),
            running_client(make_registry(flows), fake.address, tmp_path / "c") as client,
        ):
            await client.start_flow(flows.kill, "kill-1", "kill-1")
            reached = gates / "kill-1-attempt-1.reached"
            await wait_until(reached.exists, 30, "attempt 1 to reach its gate")
            assert reached.read_text() == str(first.pid)
            await wait_until(lambda: fake.last_heartbeat("kill-1", "KillStep-1") is not None)
            await first.kill()
            await wait_until(
                lambda: any(a.error_type == WORKER_DISCONNECTED for a in fake.attempts("kill-1")),
                10,
                "the broken stream to fail attempt 1",
            )
            await second.start()
            result = await client.wait_for_flow("kill-1")
            assert result.single_output(str) == f"attempt=2 pid={second.pid}"
        history = await read_step_history(fake.address, "kill-1")
        completed = [e for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]
        assert [(e.step_type, e.step_execution_id, e.final_attempt) for e in completed] == [
            ("KillStep", "KillStep-1", 2)
        ]
        attempts = fake.attempts("kill-1")
        assert [(a.attempt, a.error_type) for a in attempts] == [
            (1, WORKER_DISCONNECTED),
            (2, ""),
        ]


@pytest.mark.parametrize(("redeliver", "expected_attempt"), [(True, 1), (False, 2)])
async def test_worker_killed_before_any_output(
    tmp_path: Path, flows: Flows, redeliver: bool, expected_attempt: int
) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    # A real back-off before the retry (3 s): the killed Worker has several task streams, and a retry sent
    # before the server read the end of each (slow on a loaded machine) would cost a further attempt.
    config = DevServerConfig(
        redeliver_before_first_output=redeliver, retry_delay_scale=3.0, dispatch_wait=REPLACEMENT_WAIT
    )
    async with (
        DevServer(config) as fake,
        first_and_replacement(fake, tmp_path, gates) as (first, second),
        running_client(make_registry(flows), fake.address, tmp_path / "c") as client,
    ):
        await client.start_flow(flows.kill, "quiet-1", "quiet-1")
        await wait_until((gates / "quiet-1-attempt-1.reached").exists, 30, "the gate")
        await first.kill()
        await wait_until(lambda: not fake.pull_worker_ids(), 30, "the server to drop the killed Worker")
        await second.start()
        result = await client.wait_for_flow("quiet-1")
        assert result.single_output(str) == f"attempt={expected_attempt} pid={second.pid}"
