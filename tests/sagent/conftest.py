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
    from collections.abc import AsyncIterator
    from pathlib import Path

    import pytest

    from dex_agents import AgentSessionFlow
    from dex_agents.testing import AgentTestStack
    from dex_agents.testing.stack import Backend
    from tests.integration.conftest import PROJECT_ROOT
    from tests.sagent.order_agent import STATE_ENV, build_flows

    WORKER_MODULE = "tests.sagent.worker"

    @pytest.fixture
    def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        path = tmp_path / "state"
        path.mkdir()
        monkeypatch.setenv(STATE_ENV, str(path))
        return path

    @pytest.fixture
    def flow() -> AgentSessionFlow:
        return build_flows()[0]

    @pytest.fixture
    async def stack(
        tmp_path: Path, state_dir: Path, flow: AgentSessionFlow, backend: Backend
    ) -> AsyncIterator[AgentTestStack]:
        async with AgentTestStack(
            tmp_path / "stack",
            [flow],
            WORKER_MODULE,
            worker_cwd=PROJECT_ROOT,
            worker_env={STATE_ENV: str(state_dir)},
            backend=backend,
        ) as stack:
            yield stack
