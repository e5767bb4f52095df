"""A model Step's text deltas reach the live event Stream coalesced by default, one by one with the option at 0."""

from pathlib import Path

import pytest

from dex_agents import AgentEventType, AgentSessionFlow
from dex_agents.domain.events import TextDeltaPayload
from dex_agents.testing import AgentTestStack
from tests.integration.agent.scripted_agent import COALESCE_ENV
from tests.integration.agent.test_sessions import fake_stack_with, idle, turn

pytestmark = pytest.mark.integration

PIECES, SIZE = 40, 10


async def streamed_deltas(stack: AgentTestStack, sessions_flow: AgentSessionFlow) -> list[tuple[str, str, int, str]]:
    sessions = stack.sessions(sessions_flow)
    await sessions.start_session("s", turn(stream=PIECES * SIZE, delta=SIZE))
    await idle(stack, sessions_flow, "s")
    found: list[tuple[str, str, int, str]] = []
    token = ""
    while True:
        message = await sessions.read_agent_event("s", token)
        token = message.resume_token
        event = message.event
        if isinstance(event.payload, TextDeltaPayload):
            assert event.turn_id is not None
            found.append((event.turn_id, event.step_execution_id, event.attempt, event.payload.text))
        if event.type is AgentEventType.TURN_COMPLETED:
            return found


@pytest.mark.parametrize("window", [None, "0"], ids=["default-window", "off"])
async def test_a_model_steps_deltas_keep_their_text_order_and_envelope_and_are_coalesced_unless_turned_off(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch, window: str | None
) -> None:
    env = {} if window is None else {COALESCE_ENV: window}
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, env) as (stack, flow):
        await stack.start_worker()
        deltas = await streamed_deltas(stack, flow)
        snapshot = await idle(stack, flow, "s")
    answer = snapshot.messages[-1].text
    assert answer is not None
    assert len(answer) == PIECES * SIZE
    assert "".join(text for *_, text in deltas) == "model call 1" + answer
    assert {(turn_id, execution, attempt) for turn_id, execution, attempt, _ in deltas} == {("turn-1", "RunModel-1", 1)}
    if window == "0":
        assert len(deltas) == PIECES + 1  # the marker, then every piece as its own event
    else:
        assert len(deltas) < PIECES // 2  # bounded by 2 KiB and 40 ms: a 400-character burst is a few events
