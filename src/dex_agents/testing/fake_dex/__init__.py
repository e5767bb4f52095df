"""Fake Dex: a loopback Dex server the unmodified ``dex-python-sdk==1.23.0`` runs Flows on.

Start it in-process (``async with FakeDex() as dex: dex.address``), as a child process
(``async with FakeDexProcess() as dex``) or from a shell
(``python -m dex_agents.testing.fake_dex --port 0`` prints the address it bound).

Workers connect in pull mode (recommended)::

    WorkerOptions(server_address=dex.address,
                  pull=PullWorkerOptions(max_concurrent_tasks=16,
                                         stop_drain_timeout=timedelta(seconds=1)))
    ClientOptions(server_address=dex.address)  # worker_target defaults to pull

or listening mode, when the Client advertises the Worker's address
(``ClientOptions(server_address=dex.address, worker_target=worker.worker_target)``).

The emulated server rules, their sources and the configurable assumptions
(``FakeDexConfig``) are listed in ``docs/fake-dex.md``.
"""

from dex_agents.testing.fake_dex._attempts import HEARTBEAT_TIMEOUT, METHOD_TIMEOUT, AttemptRecord
from dex_agents.testing.fake_dex._clock import FakeClock
from dex_agents.testing.fake_dex._config import TEST_RETRY_DELAY_SCALE, FakeDexConfig
from dex_agents.testing.fake_dex._process import FakeDexProcess
from dex_agents.testing.fake_dex._server import (
    EXECUTE_COMPLETED_EVENT,
    FakeDex,
    StepHistoryEntry,
    read_history_events,
    read_step_history,
    step_history,
)
from dex_agents.testing.fake_dex._workers import (
    NO_WORKER_AVAILABLE,
    UNKNOWN_NAME,
    WORKER_DISCONNECTED,
    WORKER_UNAVAILABLE,
)

__all__ = [
    "EXECUTE_COMPLETED_EVENT",
    "HEARTBEAT_TIMEOUT",
    "METHOD_TIMEOUT",
    "NO_WORKER_AVAILABLE",
    "TEST_RETRY_DELAY_SCALE",
    "UNKNOWN_NAME",
    "WORKER_DISCONNECTED",
    "WORKER_UNAVAILABLE",
    "AttemptRecord",
    "FakeClock",
    "FakeDex",
    "FakeDexConfig",
    "FakeDexProcess",
    "StepHistoryEntry",
    "read_history_events",
    "read_step_history",
    "step_history",
]
