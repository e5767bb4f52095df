"""The Worker child of `test_unstreamed_model`."""

from dex_agents.testing import run_agent_worker
from tests.integration.pydantic_ai.unstreamed_agent import build_flows

if __name__ == "__main__":
    run_agent_worker(build_flows())
