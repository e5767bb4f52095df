"""The Worker child of the binding's integration tests."""

from dex_agents.testing import run_agent_worker
from tests.integration.agent.scripted_agent import build_flow

if __name__ == "__main__":
    run_agent_worker([build_flow()])
