"""Where the command line's dev server keeps its data: ``--data DIR``, ``--in-memory``, or a default dir.

``dev-server`` keeps each port's data in ``$XDG_STATE_HOME/dex-agents/dev/<port>/``
(``~/.local/state/dex-agents/dev/<port>/`` when ``XDG_STATE_HOME`` is unset), as
``dexcli dev`` keeps ``$HOME/.dex/dev/<port>/``; ``chat`` and ``console --demo``,
whose dev server runs in their own process, keep theirs in
``$XDG_STATE_HOME/dex-agents/chat/`` and ``.../console-demo/``. Deleting the dir
throws every session in it away; ``--in-memory`` keeps nothing.
"""

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from dex_agents.launch.errors import UsageError

F = TypeVar("F", bound=Callable[..., object])


def state_home() -> Path:
    """``$XDG_STATE_HOME``, else ``~/.local/state``."""
    configured = os.environ.get("XDG_STATE_HOME")
    return Path(configured) if configured else Path.home() / ".local" / "state"


def dev_server_dir(port: int) -> Path:
    """The default data dir of ``dev-server --port PORT``."""
    return state_home() / "dex-agents" / "dev" / str(port)


def embedded_dir(command: str) -> Path:
    """The default data dir of a command whose dev server runs in its own process (``chat``, ``console-demo``)."""
    return state_home() / "dex-agents" / command


def choose_data_dir(data: str | None, default: Path, *, in_memory: bool) -> Path | None:
    """The data dir ``--data`` / ``--in-memory`` name (``None``: in memory), else ``default``.

    Raises:
        UsageError: both were given.
    """
    if data is not None and in_memory:
        raise UsageError("--data and --in-memory exclude each other")
    if in_memory:
        return None
    return Path(data).expanduser() if data is not None else default


def describe(data_dir: Path | None) -> str:
    """One line on what the dev server keeps, for the start-up banner."""
    if data_dir is None:
        return "in memory (--in-memory): every session is gone when it stops"
    return f"data in {data_dir} (sessions survive a restart; delete the dir to throw them away)"


def data_options(function: F) -> F:
    """``--data DIR`` and ``--in-memory``."""
    function = click.option(
        "--in-memory",
        is_flag=True,
        default=False,
        help="Keep nothing: every session is gone when the dev server stops.",
    )(function)
    return click.option(
        "--data",
        "data",
        metavar="DIR",
        default=None,
        help="Where the dev server keeps its sessions (created if missing; default: a dir under $XDG_STATE_HOME).",
    )(function)
