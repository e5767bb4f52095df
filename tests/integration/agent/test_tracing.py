"""Traces on the engine: a turn stays one trace when its Worker is SIGKILLed mid-turn and another finishes it.

Listening Workers only: what is checked (the stored trace context) does not depend on the Worker mode.
"""

import json
from pathlib import Path

import pytest

from dex_agents import AgentSessionFlow
from dex_agents.testing import session_is_idle, wait_for_agent_snapshot
from tests.integration.agent.conftest import WORKER_MODULE
from tests.integration.agent.scripted_agent import STATE_ENV, TRACE_FILE_ENV, build_flow, gate, invocations
from tests.integration.stacks import agent_test_stack

pytestmark = pytest.mark.integration


async def test_one_trace_per_turn_across_a_worker_lost_mid_tool_whose_lost_attempt_is_no_span(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spans_file = tmp_path / "spans.jsonl"
    monkeypatch.setenv(TRACE_FILE_ENV, str(spans_file))
    flow: AgentSessionFlow = build_flow()
    async with agent_test_stack(
        tmp_path,
        [flow],
        WORKER_MODULE,
        worker_env={STATE_ENV: str(state_dir), TRACE_FILE_ENV: str(spans_file)},
    ) as stack:
        first = await stack.start_worker()
        script = {"tools": [{"id": "c1", "name": "read_tool", "args": {"gate": "g"}}]}
        await stack.sessions(flow).start_session("s", json.dumps(script))
        await gate("g").wait_until_reached()
        first.kill()
        await stack.start_worker()
        gate("g").release()
        await wait_for_agent_snapshot(stack.sessions(flow), "s", session_is_idle, description="the turn to end")
    assert invocations().count("tool", "read_tool") == 2, "the read ran again on the second Worker"

    spans = [json.loads(line) for line in spans_file.read_text(encoding="utf-8").splitlines()]
    turn = [span for span in spans if span["attributes"].get("dex_agents.turn.id") == "turn-1"]
    assert len({span["trace_id"] for span in turn}) == 1, turn
    (root,) = [span for span in turn if span["parent_id"] is None]
    assert root["name"] == "StartAgentSession", "the Step that took the first message began the turn"
    assert {span["parent_id"] for span in turn if span is not root} == {root["span_id"]}
    assert len({span["pid"] for span in turn}) == 2, "spans of both Workers joined the turn's trace"
    (tool,) = [span for span in turn if span["name"] == "CallTool read_tool"]
    assert tool["attributes"]["dex_agents.tool.status"] == "succeeded"
    assert tool["pid"] != root["pid"], "only the attempt that finished is a span; the killed one never ended"
    names = sorted(span["name"] for span in turn)
    assert names == ["CallTool read_tool", "RunModel", "RunModel", "StartAgentSession"], names
