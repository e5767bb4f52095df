"""Running the `dex-agents` command line from tests, and the order agent on an engine in the test process."""

import io
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
from rich.console import Console

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.cli.engine import Engine, open_engine
from dex_agents.cli.order_agent import build_order_flow
from dex_agents.cli.shop import CHUNK_DELAY_ENV, STATE_ENV
from dex_agents.cli.views import MARK

ORDER_FLOW = "dex_agents.cli.order_agent:build_order_flow"
PROMPT = "Refund order 7 and tell the customer."
REFUND_APPROVAL = "turn-1.call-2"
ASSISTANT = f"assistant {MARK} "
YOU = f"you {MARK} "

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def command(*args: str) -> list[str]:
    """The argv of ``dex-agents ARGS`` (through this interpreter)."""
    return [sys.executable, "-m", "dex_agents.cli", *args]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a command-line child: fast streaming, wide output."""
    return {**os.environ, CHUNK_DELAY_ENV: "0.002", "COLUMNS": "200", **extra}


def strip_ansi(text: str) -> str:
    """Remove terminal control sequences."""
    return _ANSI.sub("", text)


def process_gone(pid: int) -> bool:
    """Whether no live process has ``pid`` (a zombie counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status


def processes_started_under(directory: Path) -> list[int]:
    """Return the live processes whose environment names ``directory`` (the demo's Workers get it via TMPDIR)."""
    found: list[int] = []
    marker = str(directory).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ and not process_gone(int(entry.name)):
            found.append(int(entry.name))
    return found


@attrs.frozen
class OrderStack:
    """The dev server and the order agent's Worker in the test process."""

    engine: Engine
    flow: AgentSessionFlow
    sessions: AgentSessionClient
    shop: Path

    @property
    def address(self) -> str:
        return self.engine.address


@asynccontextmanager
async def order_stack(shop: Path) -> AsyncIterator[OrderStack]:
    """Serve the order agent on the dev server in this process (set ``STATE_ENV`` to ``shop`` first)."""
    assert os.environ.get(STATE_ENV) == str(shop), "the tools run here: point STATE_ENV at the shop"
    flow = build_order_flow()
    async with open_engine(None, [flow], Console(file=io.StringIO())) as engine, engine.worker():
        yield OrderStack(engine, flow, engine.sessions(flow), shop)
