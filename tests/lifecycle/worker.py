"""The Worker child of the engine-backed lifecycle test: the lifecycle Flow, its runner logging what it ran."""

import os
from datetime import timedelta

from dex_agents.testing import InvocationLog, run_agent_worker
from tests.lifecycle.stack import lifecycle_flow

SEEN_LOG_ENV = "LIFECYCLE_SEEN_LOG"
"""The `InvocationLog` file the runner writes: one line per tag a model call read and per tool run."""

ENGINE_DEADLINE = timedelta(seconds=30)
"""The approval deadline of the engine-backed runs (the test moves the dev server's clock past it)."""


def log_seen(kind: str, what: str, flow_id: str) -> None:
    """Append what the runner ran to the log named by ``$LIFECYCLE_SEEN_LOG``."""
    InvocationLog(os.environ[SEEN_LOG_ENV]).record(kind, what, session=flow_id)


if __name__ == "__main__":
    run_agent_worker([lifecycle_flow(log_seen, deadline=ENGINE_DEADLINE)])
