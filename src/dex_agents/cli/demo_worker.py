"""The demo's Worker child: ``python -m dex_agents.cli.demo_worker`` serves the order agent.

The demo starts it in its own process group with the engine address in
``DEX_AGENTS_SERVER_ADDRESS`` and the shop's directory in
``DEX_AGENTS_DEMO_STATE``; ``DEX_AGENTS_DEMO_FRAMEWORK=sagent`` serves the
sagent order agent instead of the Pydantic AI one. It stops on SIGTERM or SIGINT, and also when the
process that started it is gone (so even a killed demo leaves no Worker
behind).
"""

import importlib
import os
import signal
import threading
import time

import pydantic_ai

from dex_agents.cli.order_agent import build_order_flow
from dex_agents.cli.shop import FRAMEWORK_ENV, SAGENT
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.testing.stack import run_agent_worker

PARENT_POLL_SECONDS = 0.5
"""How often the Worker checks that its parent still runs."""


def stop_when_orphaned(parent: int) -> None:
    """Send this process SIGTERM once ``parent`` is no longer its parent (it died)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def order_flow() -> AgentSessionFlow:
    """Return the order agent's Flow in the framework ``$DEX_AGENTS_DEMO_FRAMEWORK`` names (Pydantic AI by default)."""
    if os.environ.get(FRAMEWORK_ENV) == SAGENT:
        # Imported by name: the sagent version needs Python 3.13 and sagent (mypy checks it in .venv-sagent).
        module = importlib.import_module("dex_agents.cli.sagent_order_agent")
        flow: AgentSessionFlow = module.build_order_flow()
        return flow
    return build_order_flow()


def main() -> None:
    """Serve the order agent until told to stop."""
    pydantic_ai.BANNER_ENABLED = False  # its output goes to a log file
    stop_when_orphaned(os.getppid())
    run_agent_worker([order_flow()], max_concurrent_tasks=8)


if __name__ == "__main__":
    main()
