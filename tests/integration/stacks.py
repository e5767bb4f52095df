"""The one way an engine-backed test builds its `AgentTestStack`, as a call and as fixtures.

`agent_test_stack` is the stack a case opens itself (its own flow, env or dev
server config); `stack_fixtures` makes the ``state_dir`` and ``stack`` fixtures a
suite's conftest declares: the stack serves the ``flows`` fixture (each suite says
which flows) on the ``backend`` fixture, its Worker children run from the project
root with ``state_env`` naming the case's state directory. `flow_fixtures` makes
``flows`` and ``flow`` (the first) for a suite whose stack serves all its flows.
`started_session` is how most cases begin: a Worker, then session ``s``
(`session_on_a_worker` when the case kills that Worker).
`shop_fixture` makes the ``shop`` fixture of the suites that run the demo shop.
"""

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

import pytest

from dex_agents import AgentSessionClient, AgentSessionFlow, WorkerMode
from dex_agents.cli.shop import CHUNK_DELAY_ENV
from dex_agents.cli.shop import STATE_ENV as SHOP_STATE_ENV
from dex_agents.testing import AgentTestStack, WorkerProcess
from dex_agents.testing.devserver import DevServerConfig
from dex_agents.testing.stack import Backend
from tests.integration.conftest import PROJECT_ROOT


def agent_test_stack(  # noqa: PLR0913 - AgentTestStack's own options, passed through
    tmp_path: Path,
    flows: Sequence[AgentSessionFlow],
    worker_module: str,
    *,
    worker_env: Mapping[str, str] | None = None,
    backend: Backend | None = None,
    devserver_config: DevServerConfig | None = None,
    worker_mode: WorkerMode | None = None,
    engine_data_dir: Path | None = None,
) -> AgentTestStack:
    """A stack under ``tmp_path/stack`` whose Worker children run ``worker_module`` from the project root."""
    return AgentTestStack(
        tmp_path / "stack",
        flows,
        worker_module,
        worker_cwd=PROJECT_ROOT,
        worker_env=worker_env,
        backend=backend,
        devserver_config=devserver_config,
        worker_mode=worker_mode,
        engine_data_dir=engine_data_dir,
    )


def stack_fixtures(worker_module: str, state_env: str) -> tuple[object, object]:
    """The ``state_dir`` and ``stack`` fixtures of a suite whose Workers run ``worker_module``.

    Assign them in the conftest (or a module) under those names:
    ``state_dir, stack = stack_fixtures(WORKER_MODULE, STATE_ENV)``. ``stack`` needs
    a ``flows`` fixture; ``state_env`` is set, in the test process and in every
    Worker child, to a fresh directory of the case.
    """

    @pytest.fixture
    def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        path = tmp_path / "state"
        path.mkdir()
        monkeypatch.setenv(state_env, str(path))
        return path

    @pytest.fixture
    async def stack(
        tmp_path: Path, state_dir: Path, flows: list[AgentSessionFlow], backend: Backend
    ) -> AsyncIterator[AgentTestStack]:
        async with agent_test_stack(
            tmp_path, flows, worker_module, worker_env={state_env: str(state_dir)}, backend=backend
        ) as running:
            yield running

    return state_dir, stack


def flow_fixtures(build_flows: Callable[[], list[AgentSessionFlow]]) -> tuple[object, object]:
    """The ``flows`` fixture (a fresh ``build_flows()``) and ``flow``, its first: ``flows, flow = flow_fixtures(…)``."""

    @pytest.fixture
    def flows() -> list[AgentSessionFlow]:
        return build_flows()

    @pytest.fixture
    def flow(flows: list[AgentSessionFlow]) -> AgentSessionFlow:
        return flows[0]

    return flows, flow


async def started_session(
    stack: AgentTestStack, flow: AgentSessionFlow, initial_message: str | None = None, *, session_id: str = "s"
) -> AgentSessionClient:
    """Start a Worker, then session ``session_id`` of ``flow`` on ``initial_message``; return ``flow``'s client."""
    _, sessions = await session_on_a_worker(stack, flow, initial_message, session_id=session_id)
    return sessions


async def session_on_a_worker(
    stack: AgentTestStack, flow: AgentSessionFlow, initial_message: str | None = None, *, session_id: str = "s"
) -> tuple[WorkerProcess, AgentSessionClient]:
    """`started_session` for a case that kills its Worker: return the Worker too."""
    worker = await stack.start_worker()
    sessions = stack.sessions(flow)
    await sessions.start_session(session_id, initial_message)
    return worker, sessions


def shop_fixture(chunk_delay: str, *, autouse: bool = False) -> object:
    """The ``shop`` fixture: the demo shop's files under the case's folder, its words streamed ``chunk_delay`` s apart.

    Assign it in the conftest: ``shop = shop_fixture("0.02", autouse=True)``.
    """

    @pytest.fixture(autouse=autouse)
    def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        path = tmp_path / "shop"
        path.mkdir()
        monkeypatch.setenv(SHOP_STATE_ENV, str(path))
        monkeypatch.setenv(CHUNK_DELAY_ENV, chunk_delay)
        return path

    return shop
