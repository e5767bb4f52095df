"""Fixtures every engine-backed test shares: the backend each case runs on."""

import os
from pathlib import Path

import pytest

from dex_agents import WorkerMode
from dex_agents.testing.stack import DEXCLI_ENV, WORKER_MODE_ENV, Backend

PROJECT_ROOT = Path(__file__).resolve().parents[2]
"""Where Worker children run from, so they import ``tests.…`` modules."""

_NO_DEXCLI = f"no real Dex server: set {DEXCLI_ENV} to a dexcli binary to run this case on 'dexcli dev'"


@pytest.fixture(
    params=[
        "devserver",
        pytest.param("dexcli", marks=pytest.mark.skipif(not os.environ.get(DEXCLI_ENV), reason=_NO_DEXCLI)),
    ]
)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each case runs on the dev server, and on a private ``dexcli dev`` when ``DEXCLI`` is set."""
    value: Backend = request.param
    return value


WORKER_MODES_ENV = "DEX_AGENTS_TEST_WORKER_MODES"
"""Comma-separated Worker modes every engine-backed case runs in (e.g. ``listen,pull``)."""

_BOTH_MODES_MODULES = ("test_single_attempt_kills", "test_reconcile_kills")
"""Modules whose every case also runs with pull Workers: the kill tests."""
_BOTH_MODES_WORDS = ("kill", "crash", "dies", "restart", "replace")
"""Cases whose name has one of these also run with pull Workers (the kill tests of other modules)."""


def _worker_modes(metafunc: pytest.Metafunc) -> list[str]:
    given = os.environ.get(WORKER_MODES_ENV, "").strip()
    if given:
        return [mode.strip() for mode in given.split(",") if mode.strip()]
    name = metafunc.function.__name__
    package, _, module = metafunc.module.__name__.rpartition(".")
    if not package.endswith((".agent", ".pydantic_ai")):
        return [
            WorkerMode.LISTEN.value
        ]  # no AgentTestStack: the CLI picks its own mode, the dev server tests their own
    both = module in _BOTH_MODES_MODULES or any(word in name for word in _BOTH_MODES_WORDS)
    return [WorkerMode.LISTEN.value, WorkerMode.PULL.value] if both else [WorkerMode.LISTEN.value]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every case with listening Workers (the default), and the kill tests with pull Workers too."""
    if "worker_mode" in metafunc.fixturenames:
        metafunc.parametrize("worker_mode", _worker_modes(metafunc), indirect=True)


@pytest.fixture(autouse=True)
def worker_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> WorkerMode:
    """The mode of every `AgentTestStack` (and Worker child) of the case, through ``DEX_AGENTS_WORKER_MODE``."""
    mode = WorkerMode(getattr(request, "param", WorkerMode.LISTEN.value))
    monkeypatch.setenv(WORKER_MODE_ENV, mode.value)
    return mode
