from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.testing import AgentTestStack
from dex_agents.testing.stack import Backend
from tests.integration.agent.scripted_agent import STATE_ENV, build_flow
from tests.integration.conftest import PROJECT_ROOT

WORKER_MODULE = "tests.integration.agent.worker"


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    monkeypatch.setenv(STATE_ENV, str(path))
    return path


@pytest.fixture
def flow() -> AgentSessionFlow:
    return build_flow()


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
