"""A reconcilable single-attempt tool whose Worker is SIGKILLed is settled by its reconcile probe.

The probe of ``reconciled_write`` looks for the call's effect (its
`InvocationLog` line with the idempotency key) the way a real probe looks in
an outbox. Each case runs under the dev server's documented redelivery rule and with
``redeliver_after_output``: the write never runs twice, and the model is told
what the probe found.
"""

from pathlib import Path

import pytest

from dex_agents import NOT_APPLIED_TOOL_RESULT, OUTCOME_UNKNOWN_TOOL_RESULT, ToolCallStatus
from tests.integration.agent.scripted_agent import KILL_POINT_ENV, STATE_ENV, build_flow, invocations
from tests.integration.agent.test_sessions import answer, idle, tool, turn
from tests.integration.agent.test_single_attempt_kills import redelivery_stack

pytestmark = pytest.mark.integration

REDELIVERY = pytest.mark.parametrize(
    "redeliver_after_output", [False, True], ids=["documented-redelivery", "after-output-too"]
)


async def _run(
    tmp_path: Path, state_dir: Path, *, redeliver_after_output: bool, kill_point: str | None = None, **args: object
) -> str:
    env = {STATE_ENV: str(state_dir)}
    if kill_point is not None:
        env[KILL_POINT_ENV] = kill_point
    flow = build_flow()
    async with redelivery_stack(tmp_path, flow, env, redeliver_after_output=redeliver_after_output) as stack:
        await stack.start_worker()
        await stack.sessions(flow).start_session("s", turn(tool("c1", "reconciled_write", **args)))
        await stack.start_worker()  # takes over from the Worker that dies
        snapshot = await idle(stack, flow, "s")
    return answer(snapshot)["c1"]


@REDELIVERY
async def test_a_write_killed_right_after_its_effect_is_reconciled_succeeded_with_the_output_the_probe_found(
    tmp_path: Path, state_dir: Path, redeliver_after_output: bool
) -> None:
    told = await _run(tmp_path, state_dir, redeliver_after_output=redeliver_after_output, die="after_effect")

    assert invocations().count("tool", "reconciled_write") == 1
    assert invocations().count("probe", "reconciled_write") >= 1
    assert told.startswith(f"{ToolCallStatus.SUCCEEDED.value}: reconciled_write done with key s/turn-1/c1")


@REDELIVERY
async def test_a_write_killed_before_it_ran_is_reconciled_not_applied_and_the_model_is_told_so(
    tmp_path: Path, state_dir: Path, redeliver_after_output: bool
) -> None:
    told = await _run(
        tmp_path, state_dir, redeliver_after_output=redeliver_after_output, kill_point="after_confirmation"
    )

    assert invocations().count("tool", "reconciled_write") == 0
    assert told == f"{ToolCallStatus.NOT_APPLIED.value}: {NOT_APPLIED_TOOL_RESULT}"


@REDELIVERY
async def test_a_write_whose_probe_fails_every_attempt_stays_outcome_unknown(
    tmp_path: Path, state_dir: Path, redeliver_after_output: bool
) -> None:
    told = await _run(
        tmp_path, state_dir, redeliver_after_output=redeliver_after_output, die="after_effect", probe="fails"
    )

    assert invocations().count("tool", "reconciled_write") == 1
    assert invocations().count("probe", "reconciled_write") == 3
    assert told == f"{ToolCallStatus.OUTCOME_UNKNOWN.value}: {OUTCOME_UNKNOWN_TOOL_RESULT}"
