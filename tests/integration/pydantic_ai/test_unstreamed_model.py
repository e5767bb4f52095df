"""A session on a model that cannot stream (a `FunctionModel` without ``stream_function``) completes its turns."""

from pathlib import Path

import pytest

from dex_agents.domain.events import TextDeltaPayload
from dex_agents.testing import session_is_idle, wait_for_agent_snapshot
from dex_agents.testing.stack import Backend
from tests.integration.pydantic_ai.unstreamed_agent import build_flows
from tests.integration.stacks import agent_test_stack

pytestmark = pytest.mark.integration


async def test_a_model_without_streaming_runs_a_tool_call_and_answers_with_its_text_as_live_events(
    tmp_path: Path, backend: Backend
) -> None:
    flow = build_flows()[0]
    async with agent_test_stack(
        tmp_path,
        [flow],
        "tests.integration.pydantic_ai.unstreamed_worker",
        backend=backend,
    ) as stack:
        await stack.start_worker()
        sessions = stack.sessions(flow)
        await sessions.start_session("s", "Where is order 7?")
        snapshot = await wait_for_agent_snapshot(sessions, "s", session_is_idle, description="the turn to end")
        texts: list[str] = []
        token = ""
        while True:
            message = await sessions.read_agent_event("s", token)
            token = message.resume_token
            if isinstance(message.event.payload, TextDeltaPayload):
                texts.append(message.event.payload.text)
            if message.event.type == "turn_completed":
                break
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None
    assert snapshot.messages[-1].text == "Order 7 is delivered."
    assert snapshot.usage.model_calls == 2
    assert texts == ["Looking it up.", "Order 7 is delivered."]
