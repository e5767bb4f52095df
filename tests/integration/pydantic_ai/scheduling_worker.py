"""The Worker child of the scheduling tests."""

from dex_agents.testing import run_agent_worker
from tests.integration.pydantic_ai.scheduling_agent import build_flows

if __name__ == "__main__":
    run_agent_worker(build_flows())
