"""The composition root builds a pull Worker and a pull-routing Client from declared dependencies."""

import asyncio
import socket
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import dex
import grpc  # type: ignore[import-untyped]  # grpcio ships no stubs
import pytest
from dependency_injector import errors

from dex_agents import AgentContainer, AgentSessionFlow, WorkerMode, codec_registry, wait_worker_serving
from dex_agents.infrastructure.dex.container import (
    DEFAULT_LISTEN_ADDRESS,
    HELD_LISTEN_PORTS,
    free_listen_address,
    free_loopback_address,
)
from dex_agents.testing import ScriptedRunner


def test_a_container_without_flows_or_address_reports_the_missing_dependencies() -> None:
    with pytest.raises(errors.Error, match=r"flows|server_address"):
        AgentContainer().check_dependencies()


def test_the_container_builds_a_registry_with_the_codecs_and_pull_options(tmp_path: Path) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="Container")
    container = AgentContainer.build(
        flows=[flow], server_address="127.0.0.1:1", blob_cache_directory=str(tmp_path), max_concurrent_tasks=5
    )
    container.check_dependencies()
    assert isinstance(container.registry(), dex.Registry)
    assert container.registry() is container.registry()
    assert container.codecs() is codec_registry()
    worker_options = container.worker_options()
    assert worker_options.server_address == "127.0.0.1:1"
    assert worker_options.pull is not None
    assert worker_options.pull.max_concurrent_tasks == 5
    client_options = container.client_options()
    assert client_options.worker_target == dex.WorkerTarget(pull=True)
    container.blob_cache().close()


def test_build_passes_its_keyword_arguments_to_the_providers(tmp_path: Path) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="Built")
    container = AgentContainer.build(
        flows=(flow,),
        server_address="127.0.0.1:2",
        blob_cache_directory=str(tmp_path),
        blob_cache_bytes=1024 * 1024,
        max_concurrent_tasks=3,
        stop_drain_seconds=2,
    )
    assert container.flows() == [flow]
    assert container.blob_cache_config().directory == str(tmp_path)
    pull = container.worker_options().pull
    assert pull is not None
    assert pull.max_concurrent_tasks == 3
    assert pull.stop_drain_timeout.total_seconds() == 2


def test_a_listening_container_binds_its_address_and_routes_started_flows_there(tmp_path: Path) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="Listening")
    container = AgentContainer.build(
        flows=[flow],
        server_address="127.0.0.1:3",
        blob_cache_directory=str(tmp_path),
        worker_mode=WorkerMode.LISTEN,
        listen_address="127.0.0.1:9911",
    )
    worker_options = container.worker_options()
    assert worker_options.pull is None
    assert worker_options.bind_address == "127.0.0.1:9911"
    assert worker_options.worker_target == dex.WorkerTarget("127.0.0.1:9911")
    assert container.client_options().worker_target == dex.WorkerTarget("127.0.0.1:9911")
    container.blob_cache().close()


def test_a_listening_container_advertises_the_address_dex_reaches(tmp_path: Path) -> None:
    container = AgentContainer.build(
        flows=[AgentSessionFlow(ScriptedRunner(), flow_type="Advertised")],
        server_address="dex:8801",
        blob_cache_directory=str(tmp_path),
        worker_mode="listen",
        listen_address="0.0.0.0:8803",
        advertised_address="worker-7.internal:8803",
    )
    assert container.worker_options().bind_address == "0.0.0.0:8803"
    assert container.client_options().worker_target == dex.WorkerTarget("worker-7.internal:8803")
    container.blob_cache().close()


def test_the_default_listening_address_is_loopback() -> None:
    assert DEFAULT_LISTEN_ADDRESS.startswith("127.0.0.1:")
    assert free_loopback_address().startswith("127.0.0.1:")
    assert free_listen_address().startswith("127.0.0.1:")


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


async def test_a_listen_address_is_held_from_other_binders_but_a_grpc_server_binds_it() -> None:
    port = _port(free_listen_address())

    with socket.socket() as other, pytest.raises(OSError, match="in use"):
        other.bind(("127.0.0.1", port))  # what another process's probe or server would get
    server = grpc.aio.server()
    try:
        assert server.add_insecure_port(f"127.0.0.1:{port}") == port  # the Worker's gRPC server
        await server.start()
    finally:
        await server.stop(None)


def test_listen_addresses_differ_while_they_are_held() -> None:
    ports = [_port(free_listen_address()) for _ in range(HELD_LISTEN_PORTS)]

    assert len(set(ports)) == HELD_LISTEN_PORTS


@pytest.mark.parametrize("address", ["8803", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:70000", ":8803"])
def test_a_listening_container_refuses_an_address_without_host_and_port(address: str) -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="Bad")
    with pytest.raises(ValueError, match="HOST:PORT"):
        AgentContainer.build(flows=[flow], server_address="127.0.0.1:1", worker_mode="listen", listen_address=address)


def test_an_unknown_worker_mode_is_refused() -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="Bad")
    with pytest.raises(ValueError, match="push"):
        AgentContainer.build(flows=[flow], server_address="127.0.0.1:1", worker_mode="push")


async def test_waiting_for_a_worker_that_stopped_first_raises_with_its_error(tmp_path: Path) -> None:
    container = AgentContainer.build(
        flows=[AgentSessionFlow(ScriptedRunner(), flow_type="Unreachable")],
        server_address=free_loopback_address(),  # nothing serves there
        blob_cache_directory=str(tmp_path),
        worker_mode="listen",
        listen_address=free_listen_address(),
    )
    worker = container.worker()
    options = worker.options
    worker = dex.AsyncWorker(
        container.registry(),
        container.blob_cache(),
        replace(options, attribute_index_sync_timeout=timedelta(seconds=1)),
    )
    serving = asyncio.create_task(worker.start())
    with pytest.raises(RuntimeError, match="stopped before it served") as raised:
        await wait_worker_serving(worker, serving, timeout=30)
    assert raised.value.__cause__ is not None
    container.blob_cache().close()
