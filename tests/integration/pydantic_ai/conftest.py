from tests.integration.pydantic_ai.order_agent import STATE_ENV, build_flows
from tests.integration.stacks import flow_fixtures, stack_fixtures

WORKER_MODULE = "tests.integration.pydantic_ai.worker"

state_dir, stack = stack_fixtures(WORKER_MODULE, STATE_ENV)

flows, flow = flow_fixtures(build_flows)
