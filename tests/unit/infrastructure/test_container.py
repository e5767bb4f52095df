"""The composition root builds a pull Worker and a pull-routing Client from declared dependencies."""

from pathlib import Path

import dex
import pytest
from dependency_injector import errors

from dex_agents import AgentContainer, AgentSessionFlow, codec_registry
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
