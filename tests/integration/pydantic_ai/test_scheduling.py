"""Scheduling and usage in a session on an engine, held to a plain run of the same agent and script.

Sequential tools: the same order as a plain run, approvals and lost Workers
mid-chain. Usage: a sub-agent's model calls counted as in the plain run, and a
request limit over the whole turn failing it with Pydantic AI's error.

A session and a plain ``agent.run`` of the same agent and script are held to
the same rule: a ``sequential`` call starts after every call before it ended,
and the calls after it start once it ended.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import UsageLimitExceeded

from dex_agents import AgentSessionFlow, AgentSnapshot
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    session_is_idle,
    wait_for_agent_snapshot,
)
from tests.integration.pydantic_ai.scheduling_agent import AGENT, LIMITS, STATE_ENV, build_flows, gate, invocations
from tests.integration.stacks import flow_fixtures, session_on_a_worker, stack_fixtures, started_session
from tests.unit.adapters.pydantic_ai.scripted_model import call, script

pytestmark = pytest.mark.integration

WORKER_MODULE = "tests.integration.pydantic_ai.scheduling_worker"


state_dir, stack = stack_fixtures(WORKER_MODULE, STATE_ENV)

flows, flow = flow_fixtures(build_flows)


def runs(entries: Sequence[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Each call's (start, end) position in the log."""
    positions: dict[str, list[int]] = {}
    for index, entry in enumerate(entries):
        if entry["kind"] in ("start", "end"):
            positions.setdefault(entry["name"], []).append(index)
    return {name: (found[0], found[-1]) for name, found in positions.items()}


def assert_runs_alone(entries: Sequence[dict[str, Any]], order: Sequence[str], alone: str) -> None:
    """``alone`` started after every call before it in ``order`` ended, and the calls after it started after it."""
    spans = runs(entries)
    at = order.index(alone)
    for before in order[:at]:
        assert spans[before][1] < spans[alone][0], f"{alone} started before {before} ended"
    for after in order[at + 1 :]:
        assert spans[alone][1] < spans[after][0], f"{after} started before {alone} ended"


async def idle(stack: AgentTestStack, flow: AgentSessionFlow, session_id: str) -> AgentSnapshot:
    return await wait_for_agent_snapshot(
        stack.sessions(flow), session_id, session_is_idle, description="an idle session"
    )


async def executed(stack: AgentTestStack, session_id: str) -> list[str]:
    history = await stack.read_step_history(session_id)
    return [entry.step_type for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]


CHAIN = ["a", "b", "s", "c", "l"]
"""Two plain calls, a sequential one, a plain one, and one from the sequential toolset."""


def chain_script(*, hold: bool) -> str:
    holds = {"a": "ga", "b": "gb"} if hold else {}
    return script(
        [
            call("a", "work", label="a", hold=holds.get("a", "")),
            call("b", "work", label="b", hold=holds.get("b", "")),
            call("s", "serial", label="s"),
            call("c", "work", label="c"),
            call("l", "ledger", label="l"),
        ],
        "@summary",
        name="chain",
    )


async def test_sequential_calls_run_alone_in_model_order_as_in_a_plain_run(
    stack: AgentTestStack, flow: AgentSessionFlow, state_dir: Path
) -> None:
    plain = await AGENT.run(chain_script(hold=False))
    plain_log = invocations().entries()
    for name in ("s", "l"):
        assert_runs_alone(plain_log, CHAIN, name)
    (state_dir / "invocations.jsonl").unlink()

    await started_session(stack, flow, chain_script(hold=True))
    await gate("ga").wait_until_reached()
    await gate("gb").wait_until_reached()  # the two plain calls before the sequential one run side by side
    assert invocations().count("start", "s") == 0
    gate("ga").release()
    gate("gb").release()
    snapshot = await idle(stack, flow, "s")

    session_log = invocations().entries()
    for name in ("s", "l"):
        assert_runs_alone(session_log, CHAIN, name)
    assert snapshot.messages[-1].text == plain.output
    assert await executed(stack, "s") == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "CallTool",
        "ResumeTurn",
        "CallTool",
        "ResumeTurn",
        "CallTool",
        "ResumeTurn",
        "CallTool",
        "ResumeTurn",
        "RunModel",
    ]


async def test_a_sequential_call_waiting_for_approval_holds_the_calls_after_it_until_answered(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = stack.sessions(flow)
    await stack.start_worker()
    await sessions.start_session(
        "s",
        script(
            [
                call("a", "work", label="a"),
                call("s", "approve_serial", label="s"),
                call("c", "work", label="c"),
            ],
            "@summary",
        ),
    )
    interrupt = await wait_for_agent_snapshot(
        sessions, "s", lambda snap: next(iter(snap.pending_interrupts), None), description="the approval"
    )
    assert interrupt.tool_call_id == "s"
    assert invocations().count("end", "a") == 1  # asked only once the call before it ended
    assert invocations().count("start", "c") == 0
    assert await sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=False, rejection_message="not now")
    snapshot = await idle(stack, flow, "s")
    assert (
        snapshot.messages[-1].text
        == "work[success]=work a done; approve_serial[denied]=not now; work[success]=work c done"
    )
    assert [e["name"] for e in invocations().entries() if e["kind"] == "start"] == ["a", "c"]


async def test_a_worker_killed_mid_chain_repeats_only_the_running_sequential_call(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    worker, _ = await session_on_a_worker(
        stack, flow, script([call("s", "serial", label="s", hold="gs"), call("c", "work", label="c")], "@summary")
    )
    await gate("gs").wait_until_reached()
    worker.kill()
    await stack.start_worker()
    gate("gs").release()
    snapshot = await idle(stack, flow, "s")
    assert snapshot.messages[-1].text == "serial[success]=serial s done; work[success]=work c done"
    starts = [e["name"] for e in invocations().entries() if e["kind"] == "start"]
    assert starts == ["s", "s", "c"]
    assert_runs_alone(invocations().entries()[1:], ["s", "c"], "s")


async def test_a_sub_agents_usage_counts_and_a_request_limit_holds_for_the_whole_turn_as_in_a_plain_run(
    stack: AgentTestStack, flows: list[AgentSessionFlow]
) -> None:
    delegated = script([call("d", "delegate", question="where is order 7?")], "@summary", name="delegate")
    rounds = script([call("w1", "work", label="1")], [call("w2", "work", label="2")], "done", name="rounds")
    plain = await AGENT.run(delegated)
    with pytest.raises(UsageLimitExceeded) as limited:
        await AGENT.run(rounds, usage_limits=LIMITS)
    flow, limited_flow = flows
    await stack.start_worker()
    await stack.sessions(flow).start_session("u", delegated)
    await stack.sessions(limited_flow).start_session("l", rounds)

    snapshot = await idle(stack, flow, "u")
    assert snapshot.messages[-1].text == plain.output
    assert (snapshot.usage.model_calls, snapshot.usage.tool_calls) == (plain.usage.requests, plain.usage.tool_calls)
    assert snapshot.usage.model_calls == 4  # the agent's two and the sub-agent's two

    failed = await idle(stack, limited_flow, "l")
    assert failed.state is not None
    assert failed.state.last_turn_error == f"pydantic_ai.exceptions.UsageLimitExceeded: {limited.value}"
    assert failed.usage.model_calls == 2
    steps = await executed(stack, "l")
    assert steps.count("RunModel") == 3  # the third model Step fails the turn, without another attempt
    assert "RecordTurnFailure" not in steps
