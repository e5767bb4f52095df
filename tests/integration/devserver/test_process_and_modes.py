"""Starting the dev server as a child process / CLI, and listening-mode Workers."""

import asyncio
import contextlib
import socket
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import dex
import pytest

from dex_agents.devserver._process import config_from_json, config_to_json
from dex_agents.testing.devserver import DevServer, DevServerConfig, DevServerProcess
from tests.integration.devserver.flows import Flows, Seen, WaitOutcome, make_registry
from tests.integration.devserver.support import open_cache, running_client, running_worker, wait_until

pytestmark = pytest.mark.integration


async def test_child_process_serves_a_flow_and_advances_its_clock(tmp_path: Path, flows: Flows) -> None:
    async with DevServerProcess(DevServerConfig(frozen_clock=True, start_time=1_800_000_000)) as fake:
        assert fake.address.startswith("127.0.0.1:")
        assert await fake.now() == 1_800_000_000
        async with (
            running_worker(make_registry(flows), fake.address, tmp_path / "w"),
            running_client(make_registry(flows), fake.address, tmp_path / "c") as client,
        ):
            await client.start_flow(flows.wait, "p-timer", "timer")
            info = await client.describe_flow("p-timer")
            assert info.started_at.timestamp() == 1_800_000_000
            await _advance_until_done(fake, client, "p-timer")
            result = await client.wait_for_flow("p-timer")
            assert result.single_output(WaitOutcome).timer_fired


async def _advance_until_done(fake: DevServerProcess, client: dex.AsyncClient, flow_id: str) -> None:
    # The Waiter may not be waiting yet when the clock moves: advance until it completes.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while (await client.describe_flow(flow_id)).status is dex.FlowStatus.RUNNING:
        assert loop.time() < deadline, "the Timer never fired"
        await fake.advance(timedelta(seconds=30))


async def test_cli_prints_the_address_and_stops_on_sigterm() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dex_agents.devserver", "--port", "0", stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode().strip()
    assert line.startswith("127.0.0.1:")
    assert int(line.rsplit(":", 1)[1]) > 0
    process.terminate()
    assert await asyncio.wait_for(process.wait(), 10) == 0
    await process.stdout.read()


def test_config_json_round_trip() -> None:
    config = DevServerConfig(retry_delay_scale=0.5, dispatch_wait=timedelta(seconds=3), waiter_order="newest_first")
    assert config_from_json(config_to_json(config)) == config
    with pytest.raises(ValueError, match="unknown"):
        config_from_json('{"nope": 1}')


@contextlib.asynccontextmanager
async def _listening_worker(
    registry: dex.Registry, address: str, cache_dir: Path, bind: str = "127.0.0.1:0"
) -> AsyncIterator[dex.AsyncWorker]:
    cache = open_cache(cache_dir)
    worker = dex.AsyncWorker(registry, cache, dex.WorkerOptions(server_address=address, bind_address=bind))
    task = asyncio.create_task(worker.start())
    try:
        await wait_until(lambda: not worker.worker_target.address.endswith(":0"), what="the Worker to bind")
        yield worker
    finally:
        await worker.stop()
        await task
        cache.close()


async def test_listening_worker_runs_flows_and_rpcs(tmp_path: Path, flows: Flows) -> None:
    registry = make_registry(flows)
    async with (
        DevServer() as fake,
        _listening_worker(registry, fake.address, tmp_path / "w") as worker,
    ):
        cache = open_cache(tmp_path / "c")
        try:
            options = dex.ClientOptions(server_address=fake.address, worker_target=worker.worker_target)
            async with dex.AsyncClient(registry, cache, options) as client:
                await client.start_flow(flows.basic, "l-1", "listening")
                result = await client.wait_for_flow("l-1")
                assert result.single_output(Seen).state == "listening"
                assert await client.invoke_rpc(flows.basic.state, "l-1") == "listening"
                await client.start_flow(flows.retry, "l-2", "fail-3")
                assert (await client.wait_for_flow("l-2")).completions[0].step_type == "Recover"
        finally:
            cache.close()


async def test_listening_worker_address_as_server_default(tmp_path: Path, flows: Flows) -> None:
    registry = make_registry(flows)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = DevServerConfig(default_worker_target=f"127.0.0.1:{port}")
    async with (
        DevServer(config) as fake,
        _listening_worker(registry, fake.address, tmp_path / "w", bind=f"127.0.0.1:{port}"),
        running_client(registry, fake.address, tmp_path / "c") as client,
    ):
        await client.start_flow(flows.basic, "l-3", "default")
        assert (await client.wait_for_flow("l-3")).single_output(Seen).state == "default"
