from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.testing.devserver import TEST_RETRY_DELAY_SCALE, DevServer, DevServerConfig
from tests.integration.devserver.flows import Flows, Unregistered, make_flows, make_registry, reset_gates
from tests.integration.devserver.support import Stack, running_client, running_worker


@pytest.fixture(autouse=True)
def _gates() -> Iterator[None]:
    reset_gates()
    yield
    reset_gates()


@pytest.fixture
def flows() -> Flows:
    return make_flows()


@pytest.fixture
def unregistered() -> Unregistered:
    return Unregistered()


@pytest.fixture
def config() -> DevServerConfig:
    return DevServerConfig(dispatch_wait=timedelta(seconds=2), retry_delay_scale=TEST_RETRY_DELAY_SCALE)


@pytest.fixture
async def stack(
    tmp_path: Path, flows: Flows, unregistered: Unregistered, config: DevServerConfig
) -> AsyncIterator[Stack]:
    async with DevServer(config) as dex:
        worker_registry = make_registry(flows)
        client_registry = make_registry(flows, unregistered)
        async with (
            running_worker(worker_registry, dex.address, tmp_path / "worker-cache") as worker,
            running_client(client_registry, dex.address, tmp_path / "client-cache") as client,
        ):
            yield Stack(dex, worker, client)
