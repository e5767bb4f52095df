"""The pull Worker reads the SDK's version once per process, and gets the same version as before."""

import importlib.metadata
from collections.abc import Callable, Iterator

import dex
import pytest
from dex import _pull_worker, _server_protocol

from dex_agents.infrastructure.dex.container import AgentContainer, _async_worker
from dex_agents.infrastructure.dex.sdk_tuning import cache_sdk_version, cached_sdk_version


def pull_worker_sdk_version() -> Callable[[], str]:
    """What the pull Worker calls when it registers a task stream."""
    function: Callable[[], str] = vars(_pull_worker)["sdk_version"]
    return function


@pytest.fixture
def untouched_sdk(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_pull_worker, "sdk_version", _server_protocol.sdk_version)
    cached_sdk_version.cache_clear()
    yield
    cached_sdk_version.cache_clear()


@pytest.fixture
def metadata_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    read = importlib.metadata.version

    def counting(name: str) -> str:
        reads.append(name)
        return read(name)

    monkeypatch.setattr(_server_protocol, "version", counting)
    return reads


@pytest.mark.usefixtures("untouched_sdk")
def test_the_pull_worker_reads_the_metadata_once(metadata_reads: list[str]) -> None:
    assert cache_sdk_version()
    versions = {pull_worker_sdk_version()() for _ in range(5)}
    assert versions == {importlib.metadata.version("dex-python-sdk")}
    assert metadata_reads == ["dex-python-sdk"]


@pytest.mark.usefixtures("untouched_sdk")
def test_without_it_every_task_stream_reads_the_metadata(metadata_reads: list[str]) -> None:
    for _ in range(3):
        pull_worker_sdk_version()()
    assert len(metadata_reads) == 3


@pytest.mark.usefixtures("untouched_sdk")
def test_applying_it_twice_keeps_one_cache() -> None:
    assert cache_sdk_version()
    assert cache_sdk_version()
    assert pull_worker_sdk_version() is cached_sdk_version


@pytest.mark.usefixtures("untouched_sdk")
def test_an_sdk_laid_out_differently_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def other() -> str:
        return "other"

    monkeypatch.setattr(_pull_worker, "sdk_version", other)
    assert not cache_sdk_version()
    assert pull_worker_sdk_version() is other


@pytest.mark.usefixtures("untouched_sdk")
def test_the_container_applies_it_when_it_builds_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[object] = []

    class FakeWorker:
        def __init__(self, *args: object) -> None:
            built.append(args)

    assert AgentContainer.worker.provides is _async_worker
    monkeypatch.setattr(dex, "AsyncWorker", FakeWorker)
    worker = _async_worker("registry", "cache", "options", [], lambda: "client")
    assert isinstance(worker, FakeWorker)
    assert built == [("registry", "cache", "options")]
    assert pull_worker_sdk_version() is cached_sdk_version
