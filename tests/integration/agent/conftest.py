import pytest

from dex_agents import AgentSessionFlow
from tests.integration.agent.scripted_agent import STATE_ENV, build_flow
from tests.integration.stacks import stack_fixtures

WORKER_MODULE = "tests.integration.agent.worker"

state_dir, stack = stack_fixtures(WORKER_MODULE, STATE_ENV)


@pytest.fixture
def flow() -> AgentSessionFlow:
    return build_flow()


@pytest.fixture
def flows(flow: AgentSessionFlow) -> list[AgentSessionFlow]:
    return [flow]
