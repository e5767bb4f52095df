"""The files a test case shares with its Worker children, under a directory an environment variable names.

A test agent module binds one: ``state_dir, invocations, gate = case_state(STATE_ENV)``;
the test sets the variable (the ``state_dir`` fixture of `tests.integration.stacks`)
and passes it to the Worker children, so both sides read the same `InvocationLog`
and `FileGate` files.
"""

import os
from collections.abc import Callable
from pathlib import Path

from dex_agents.testing import FileGate, InvocationLog


def case_state(
    state_env: str,
) -> tuple[Callable[[], Path], Callable[[], InvocationLog], Callable[[str], FileGate]]:
    """The case's directory, its invocation log and its gates by name, each read from ``state_env`` when called."""

    def state_dir() -> Path:
        return Path(os.environ[state_env])

    def invocations() -> InvocationLog:
        return InvocationLog(state_dir() / "invocations.jsonl")

    def gate(name: str) -> FileGate:
        return FileGate(state_dir() / "gates", name)

    return state_dir, invocations, gate
