"""Both Worker modes serve sessions: a pull Worker registers task streams, a listening one is called by Dex."""

from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow, WorkerMode
from dex_agents.testing import AgentTestStack, session_is_idle, wait_for_agent_snapshot
from tests.integration.agent.conftest import WORKER_MODULE
from tests.integration.agent.scripted_agent import STATE_ENV, build_flow, invocations
from tests.integration.agent.test_sessions import answer, tool, turn
from tests.integration.stacks import agent_test_stack

pytestmark = pytest.mark.integration


def mode_stack(tmp_path: Path, state_dir: Path, flow: AgentSessionFlow, mode: WorkerMode) -> AgentTestStack:
    return agent_test_stack(
        tmp_path,
        [flow],
        WORKER_MODULE,
        worker_env={STATE_ENV: str(state_dir)},
        backend="devserver",  # reads which Workers registered with the dev server
        worker_mode=mode,
    )


@pytest.mark.parametrize("mode", list(WorkerMode))
async def test_a_stack_serves_a_turn_with_the_worker_mode_it_names(
    tmp_path: Path, state_dir: Path, mode: WorkerMode
) -> None:
    flow = build_flow()
    async with mode_stack(tmp_path, state_dir, flow, mode) as stack:
        assert stack.worker_mode is mode
        await stack.start_worker()
        await stack.sessions(flow).start_session("s", turn(tool("c1", "read_tool")))
        snapshot = await wait_for_agent_snapshot(stack.sessions(flow), "s", session_is_idle, description="turn end")
        assert answer(snapshot) == {"c1": "succeeded: read_tool done with key s/turn-1/c1"}
        pulling = stack.devserver.pull_worker_ids(flow.get_flow_type())
        if mode is WorkerMode.PULL:
            assert pulling
            assert stack.listen_address == ""
        else:
            assert not pulling  # no task streams: the dev server called the Worker at its address
            assert stack.listen_address.startswith("127.0.0.1:")


async def test_a_listening_replacement_worker_takes_over_the_address_of_a_stopped_one(
    tmp_path: Path, state_dir: Path
) -> None:
    flow = build_flow()
    async with mode_stack(tmp_path, state_dir, flow, WorkerMode.LISTEN) as stack:
        first = await stack.start_worker()
        sessions = stack.sessions(flow)
        await sessions.start_session("s", turn(tool("c1", "read_tool")))
        await wait_for_agent_snapshot(sessions, "s", session_is_idle, description="turn 1 to end")
        await first.stop()
        await stack.start_worker()
        assert await sessions.send_user_message("s", turn(tool("c2", "read_tool")))
        snapshot = await wait_for_agent_snapshot(
            sessions,
            "s",
            lambda s: s if s.is_idle and s.state and s.state.turn_count == 2 else None,
            description="turn 2",
        )
    assert answer(snapshot) == {"c2": "succeeded: read_tool done with key s/turn-2/c2"}
    assert invocations().count("tool") == 2


def test_the_worker_mode_variable_must_name_a_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    from dex_agents.testing import default_worker_mode

    monkeypatch.setenv("DEX_AGENTS_WORKER_MODE", "push")
    with pytest.raises(ValueError, match="DEX_AGENTS_WORKER_MODE must be one of pull, listen, got 'push'"):
        default_worker_mode()
    monkeypatch.setenv("DEX_AGENTS_WORKER_MODE", "")
    assert default_worker_mode() is WorkerMode.LISTEN
    assert default_worker_mode(WorkerMode.PULL) is WorkerMode.PULL
