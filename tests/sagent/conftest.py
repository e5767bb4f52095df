"""The sagent adapter's tests: collected only where sagent imports (Python 3.13+, ``dex-agents[sagent]``).

``make check`` runs them in ``.venv-sagent`` with ``DEX_AGENTS_REQUIRE_SAGENT=1``,
where a missing sagent is an error, never a skip. The main environment
(Python 3.11, no sagent) collects nothing here.
"""

import importlib.util
import os
import sys

REQUIRE_ENV = "DEX_AGENTS_REQUIRE_SAGENT"

_available = sys.version_info >= (3, 13) and importlib.util.find_spec("sagent") is not None

if not _available:
    if os.environ.get(REQUIRE_ENV):
        raise RuntimeError(
            f"{REQUIRE_ENV} is set but sagent does not import here (Python {sys.version.split()[0]}): "
            "run these tests in .venv-sagent (make sagent)"
        )
    collect_ignore_glob = ["*.py"]

from tests.integration.conftest import backend  # noqa: E402, F401 - the engine fixture, shared with the other suites

if _available:
    import pytest

    from dex_agents import AgentSessionFlow
    from tests.integration.stacks import stack_fixtures
    from tests.sagent.order_agent import STATE_ENV, build_flows

    WORKER_MODULE = "tests.sagent.worker"

    state_dir, stack = stack_fixtures(WORKER_MODULE, STATE_ENV)

    @pytest.fixture
    def flow() -> AgentSessionFlow:
        return build_flows()[0]

    @pytest.fixture
    def flows(flow: AgentSessionFlow) -> list[AgentSessionFlow]:
        return [flow]
