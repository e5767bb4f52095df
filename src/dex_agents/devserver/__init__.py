"""The dev server: the embedded Dex engine, for development and tests; production runs on Dex.

A Dex server written in Python that the unmodified ``dex-python-sdk==1.23.0``
``AsyncWorker`` and ``AsyncClient`` run Flows on, over loopback gRPC (127.0.0.1 only).
``dex-agents dev-server`` serves it from the command line; ``chat``, ``demo`` and
``console --demo`` start one in their own process.

Start it in-process (``async with DevServer() as server: server.address``), as a child
process (``async with DevServerProcess() as server``) or from a shell
(``python -m dex_agents.devserver --port 0`` prints the address it bound).

With a data dir (``DevServer(data_dir=DIR)``, ``dex-agents dev-server --data DIR``) it
keeps every Flow, Step execution and attempt, Attribute, Channel and Stream message,
Timer, history event and blob in one SQLite file there, and a server started again on
the dir goes on with every session; without one it keeps everything in memory.

Workers connect in pull mode (recommended)::

    WorkerOptions(server_address=server.address,
                  pull=PullWorkerOptions(max_concurrent_tasks=16,
                                         stop_drain_timeout=timedelta(seconds=1)))
    ClientOptions(server_address=server.address)  # worker_target defaults to pull

or listening mode, when the Client advertises the Worker's address
(``ClientOptions(server_address=server.address, worker_target=worker.worker_target)``).

The emulated server rules, their sources and the configurable assumptions
(``DevServerConfig``) are listed in ``docs/dev-server.md``. The knobs only tests turn
(the clock, the retry scale, history readers) are in ``dex_agents.testing.devserver``.
"""

from dex_agents.devserver._attempts import HEARTBEAT_TIMEOUT, METHOD_TIMEOUT, AttemptRecord
from dex_agents.devserver._config import DevServerConfig
from dex_agents.devserver._data_dir import DATABASE_FILE, SCHEMA_VERSION, StoreError
from dex_agents.devserver._history import EXECUTE_COMPLETED_EVENT, StepHistoryEntry, step_history
from dex_agents.devserver._process import DevServerProcess
from dex_agents.devserver._server import DevServer
from dex_agents.devserver._store import CommitStats, StoreWriteError
from dex_agents.devserver._workers import (
    NO_WORKER_AVAILABLE,
    UNKNOWN_NAME,
    WORKER_DISCONNECTED,
    WORKER_UNAVAILABLE,
)

__all__ = [
    "DATABASE_FILE",
    "EXECUTE_COMPLETED_EVENT",
    "HEARTBEAT_TIMEOUT",
    "METHOD_TIMEOUT",
    "NO_WORKER_AVAILABLE",
    "SCHEMA_VERSION",
    "UNKNOWN_NAME",
    "WORKER_DISCONNECTED",
    "WORKER_UNAVAILABLE",
    "AttemptRecord",
    "CommitStats",
    "DevServer",
    "DevServerConfig",
    "DevServerProcess",
    "StepHistoryEntry",
    "StoreError",
    "StoreWriteError",
    "step_history",
]
