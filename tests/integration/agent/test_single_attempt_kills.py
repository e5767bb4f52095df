"""A single-attempt tool runs at most once when its Worker is SIGKILLed at any point of its Step.

Ground truth is the `InvocationLog` line the tool appends as its effect, read
across every Worker process. Each case runs on the dev server with its documented
redelivery rule (same attempt again only before any output) and with
``redeliver_after_output`` (the same attempt again even after output), and
never sees the write twice. The named points of a ``CallSingleAttemptTool``
Step: before its ``tool_call_started`` is confirmed, after it is confirmed,
inside the tool, right after the tool's effect with nothing awaited since (the
case issue 13 reported: it used to run twice and end ``succeeded``), and after
the tool returned.
"""

from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow, ToolCallStatus
from dex_agents.testing import AgentTestStack
from dex_agents.testing.devserver import DevServerConfig
from tests.integration.agent.conftest import WORKER_MODULE
from tests.integration.agent.scripted_agent import KILL_POINT_ENV, STATE_ENV, build_flow, gate, invocations
from tests.integration.agent.test_sessions import answer, idle, tool, turn
from tests.integration.stacks import agent_test_stack

pytestmark = pytest.mark.integration

UNKNOWN = ToolCallStatus.OUTCOME_UNKNOWN.value
SUCCEEDED = ToolCallStatus.SUCCEEDED.value

EXPECTED: dict[str, tuple[set[int], set[str]]] = {
    # point: (how often the write may have run, the statuses the call may end with)
    "before_confirmation": ({0, 1}, {UNKNOWN, SUCCEEDED}),  # 1 only if Dex never saw the start: then it ran once
    "after_confirmation": ({0}, {UNKNOWN}),
    "inside_tool": ({1}, {UNKNOWN}),
    "after_effect": ({1}, {UNKNOWN}),
    "after_tool": ({1}, {UNKNOWN, SUCCEEDED}),  # succeeded when the result left before the kill
}


def redelivery_stack(
    tmp_path: Path, flow: AgentSessionFlow, env: dict[str, str], *, redeliver_after_output: bool
) -> AgentTestStack:
    """A fake-Dex stack for kill tests, redelivering after output when ``redeliver_after_output`` says so."""
    return agent_test_stack(
        tmp_path,
        [flow],
        WORKER_MODULE,
        worker_env=env,
        backend="devserver",
        devserver_config=DevServerConfig(redeliver_after_output=redeliver_after_output),
    )


@pytest.mark.parametrize("redeliver_after_output", [False, True], ids=["documented-redelivery", "after-output-too"])
@pytest.mark.parametrize("point", list(EXPECTED))
async def test_a_non_idempotent_write_killed_at_any_point_of_its_step_never_runs_twice(
    tmp_path: Path, state_dir: Path, point: str, redeliver_after_output: bool
) -> None:
    env = {STATE_ENV: str(state_dir)}
    args: dict[str, object] = {}
    if point in ("before_confirmation", "after_confirmation"):
        env[KILL_POINT_ENV] = point
    elif point == "inside_tool":
        args = {"gate": "g"}
    else:
        args = {"die": point}
    flow = build_flow()
    async with redelivery_stack(tmp_path, flow, env, redeliver_after_output=redeliver_after_output) as stack:
        first = await stack.start_worker()
        await stack.sessions(flow).start_session("s", turn(tool("c1", "write", **args)))
        if point == "inside_tool":
            await gate("g").wait_until_reached()
            first.kill()
            await stack.start_worker()
            gate("g").release()
        else:
            await stack.start_worker()  # takes over whichever Worker dies at the point
        snapshot = await idle(stack, flow, "s")

    ran = invocations().count("tool", "write")
    status = answer(snapshot)["c1"].split(":", 1)[0]
    may_run, may_end = EXPECTED[point]
    assert ran <= 1
    assert ran in may_run
    assert status in may_end
    assert status != SUCCEEDED or ran == 1
    assert (state_dir / f"died-{point}").exists() or point == "inside_tool"
