"""A work-around for a per-task cost of the pull Worker in ``dex-python-sdk`` 1.23.0.

The pull Worker serves each task on its own task stream and opens a fresh
stream for every task it takes. Registering a stream sends the SDK's version,
which ``dex._server_protocol.sdk_version`` reads from the installed package's
metadata each time (``importlib.metadata`` parses the ``METADATA`` file): about
0.4 ms of CPU per task, about a quarter of a pull Worker's CPU per Step in
``benchmarks.binding_bench``. The version cannot change while a process runs.

`cache_sdk_version` makes the pull Worker read it once per process. It changes
nothing else, is idempotent, and leaves an SDK whose layout differs from 1.23.0
alone (then it returns ``False``). `AgentContainer` applies it when it builds a
Worker; an application that builds its ``dex.AsyncWorker`` itself may call it too.
"""

import functools

from dex import _pull_worker, _server_protocol

_read_sdk_version = _server_protocol.sdk_version


@functools.cache
def cached_sdk_version() -> str:
    """Return the SDK's version, read from the package metadata on the first call only."""
    return _read_sdk_version()


def cache_sdk_version() -> bool:
    """Make the pull Worker read the SDK's version once per process; return whether it does now."""
    current = getattr(_pull_worker, "sdk_version", None)
    if current is cached_sdk_version:
        return True
    if current is not _read_sdk_version:
        return False
    _pull_worker.sdk_version = cached_sdk_version  # type: ignore[attr-defined]  # the SDK imports it, unexported
    return True
