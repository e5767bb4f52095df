"""A Flow served by a hand-built ``dex.AsyncWorker`` reads single-attempt starts through a Client for that Worker's
own server, without ``bind_client``; where no such Worker can be told, one error says how to fix it."""

import asyncio
from collections.abc import Iterator
from pathlib import Path

import dex
import pytest

from dex_agents import AgentSessionFlow, codec_registry
from dex_agents.domain.errors import DeliveryLedgerUnavailableError
from dex_agents.infrastructure.dex.deliveries import DexDeliveryLedger
from dex_agents.infrastructure.dex.own_worker import OwnWorkerNotFoundError, serving_workers, worker_client
from dex_agents.testing import ScriptedRunner


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[dex.BlobCache]:
    opened = dex.open_blob_cache(dex.BlobCacheConfig(str(tmp_path / "cache"), 1 << 20))
    yield opened
    opened.close()


def flow() -> AgentSessionFlow:
    return AgentSessionFlow(ScriptedRunner(), flow_type="OwnWorker")


def worker_of(served: AgentSessionFlow, cache: dex.BlobCache, address: str) -> dex.AsyncWorker:
    registry = dex.Registry([served], codec_registry(), allow_async_handlers=True)
    return dex.AsyncWorker(registry, cache, dex.WorkerOptions(server_address=address, pull=dex.PullWorkerOptions()))


async def test_the_client_is_built_for_the_server_of_the_worker_that_serves_the_flow(cache: dex.BlobCache) -> None:
    served, other = flow(), flow()
    worker = worker_of(served, cache, "127.0.0.1:18801")
    worker_of(other, cache, "127.0.0.1:18802")

    assert serving_workers(served) == [worker]
    built = worker_client(served, "OwnWorker")
    assert built.client.options.server_address == "127.0.0.1:18801"
    assert built.client.registry is worker.registry
    assert built.current
    await built.client.close()
    await worker.close()


async def test_no_worker_serving_the_flow_is_one_error_naming_the_fix() -> None:
    ledger = DexDeliveryLedger(flow().events_stream, flow=(served := flow()))

    with pytest.raises(DeliveryLedgerUnavailableError) as raised:
        await ledger.started("s", "c1", step_execution_id="CallSingleAttemptTool-1", attempt=1)
    message = str(raised.value)
    assert "no dex.AsyncWorker of this process serves Flow type 'OwnWorker'" in message
    assert "flow.bind_client" in message
    assert "AgentContainer.worker()" in message
    assert "the tool did not run" in message
    assert served.get_flow_type() == "OwnWorker"


async def test_workers_of_two_servers_serving_one_flow_are_refused_with_both_addresses(cache: dex.BlobCache) -> None:
    served = flow()
    first, second = worker_of(served, cache, "127.0.0.1:18803"), worker_of(served, cache, "127.0.0.1:18804")

    with pytest.raises(OwnWorkerNotFoundError, match=r"several Dex servers \(127\.0\.0\.1:18803, 127\.0\.0\.1:18804\)"):
        worker_client(served, "OwnWorker")
    await asyncio.gather(first.close(), second.close())
