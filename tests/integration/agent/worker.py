"""The Worker child of the binding's integration tests (``$AGENT_TEST_WORKER_SLOTS`` task slots, 16 by default)."""

import os

from dex_agents.testing import run_agent_worker
from tests.integration.agent.scripted_agent import WORKER_SLOTS_ENV, build_flow

if __name__ == "__main__":
    run_agent_worker([build_flow()], max_concurrent_tasks=int(os.environ.get(WORKER_SLOTS_ENV, "16")))
