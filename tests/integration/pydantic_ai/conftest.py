from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.testing import AgentTestStack
from dex_agents.testing.stack import Backend
from tests.integration.conftest import PROJECT_ROOT
from tests.integration.pydantic_ai.order_agent import STATE_ENV, build_flows

WORKER_MODULE = "tests.integration.pydantic_ai.worker"


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    monkeypatch.setenv(STATE_ENV, str(path))
    return path


@pytest.fixture
def flows() -> list[AgentSessionFlow]:
    return build_flows()


@pytest.fixture
def flow(flows: list[AgentSessionFlow]) -> AgentSessionFlow:
    return flows[0]


@pytest.fixture
async def stack(
    tmp_path: Path, state_dir: Path, flows: list[AgentSessionFlow], backend: Backend
) -> AsyncIterator[AgentTestStack]:
    async with AgentTestStack(
        tmp_path / "stack",
        flows,
        WORKER_MODULE,
        worker_cwd=PROJECT_ROOT,
        worker_env={STATE_ENV: str(state_dir)},
        backend=backend,
    ) as stack:
        yield stack
