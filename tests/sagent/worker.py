"""The Worker child of the sagent adapter's integration tests."""

from dex_agents.testing import run_agent_worker
from tests.sagent.order_agent import build_flows

if __name__ == "__main__":
    run_agent_worker(build_flows())
