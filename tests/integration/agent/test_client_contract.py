"""What the public client answers at its edges, on the embedded dev server: waits that time out, a start of an
ID that exists, the idempotent start and an ID that a Flow of another type holds, a session no Worker serves,
event payloads read as the spec's JSON objects, and a runner that returns what its contract forbids.
"""

import json
import math
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import dex
import pytest

from dex_agents import (
    AgentEventType,
    AgentSessionClient,
    AgentSessionFlow,
    DexAgentsError,
    NoWorkerError,
    SessionAlreadyExistsError,
    TurnStatus,
)
from dex_agents.testing import wait_for_agent_snapshot
from dex_agents.ui import vercel_ai_app
from tests.integration.console.support import asgi_request
from tests.lifecycle.runner import LifecycleRunner, lifecycle_options
from tests.lifecycle.stack import FLOW_TYPE, InProcessStack, in_process_stack, lifecycle_flow

pytestmark = pytest.mark.integration

JSON_BODY = {"content-type": "application/json"}


@pytest.fixture
async def stack() -> AsyncIterator[InProcessStack]:
    async with in_process_stack(lifecycle_flow()) as running:
        yield running


async def test_waits_that_run_out_raise_timeout_error_whatever_is_left_of_the_timeout(stack: InProcessStack) -> None:
    sessions = stack.sessions
    await sessions.start_session("s")
    receipt = await sessions.submit_user_message("s", "m1 a")  # waits for an approval that never comes
    await wait_for_agent_snapshot(sessions, "s", lambda s: bool(s.pending_interrupts), description="the approval")

    started = time.monotonic()
    with pytest.raises(TimeoutError, match="timed out"):
        await sessions.wait_for_turn("s", receipt, timeout=1.5)  # the last long poll has under 2 s left
    with pytest.raises(TimeoutError, match="timed out"):
        await sessions.wait_until_idle("s", timeout=timedelta(seconds=0.3))
    with pytest.raises(TimeoutError):
        await sessions.wait_until_idle("s", timeout=0)
    assert time.monotonic() - started < 4, "each wait ends at its deadline"
    for bad in (-1, math.nan, timedelta(seconds=-1)):
        with pytest.raises(ValueError, match="timeout"):
            await sessions.wait_until_idle("s", timeout=bad)
    with pytest.raises(TypeError, match="timeout"):
        await sessions.wait_until_idle("s", timeout="5")  # type: ignore[arg-type]
    token = await sessions.latest_resume_token("s")
    with pytest.raises(dex.LongPollTimeoutError):
        await sessions.read_agent_event("s", token, long_poll=timedelta(seconds=0.2))  # rounded up to 1 s
    with pytest.raises(ValueError, match="long_poll"):
        await sessions.read_agent_event("s", "", long_poll=timedelta(0))


async def test_starting_an_id_that_exists_raises_session_already_exists_and_ensure_session_is_idempotent(
    stack: InProcessStack,
) -> None:
    sessions = stack.sessions
    first = await sessions.ensure_session("conversation-1", "m1")
    assert first.created
    assert first.running

    with pytest.raises(SessionAlreadyExistsError, match="conversation-1") as raised:
        await sessions.start_session("conversation-1", "m2")
    assert isinstance(raised.value, DexAgentsError)
    assert isinstance(raised.value, dex.FlowAlreadyStartedError)
    again = await sessions.ensure_session("conversation-1", "m2")
    assert (again.created, again.running, again.run_id) == (False, True, first.run_id)

    snapshot = await sessions.wait_until_idle("conversation-1", timeout=30)
    assert [m.text for m in snapshot.messages] == ["m1", "done m1"], "the second initial message was not sent"
    await sessions.stop_session("conversation-1")
    ended = await sessions.ensure_session("conversation-1")
    assert (ended.created, ended.running) == (False, False)


async def test_an_id_that_a_flow_of_another_type_holds_is_refused_by_ensure_session_and_the_chat_backend() -> None:
    other_flow = AgentSessionFlow(LifecycleRunner(), flow_type="OtherAgent", options=lifecycle_options())
    async with in_process_stack(lifecycle_flow(), other_flows=[other_flow]) as stack:
        await stack.sessions.start_session("taken")
        await _refused_by_another_type(stack, AgentSessionClient(stack.client, other_flow))


async def _refused_by_another_type(stack: InProcessStack, other: AgentSessionClient) -> None:
    with pytest.raises(SessionAlreadyExistsError, match=f"belongs to a Flow of type {FLOW_TYPE!r}"):
        await other.ensure_session("taken")

    body = {"id": "taken", "messages": [{"role": "user", "id": "u1", "parts": [{"type": "text", "text": "hi"}]}]}
    answer = await asgi_request(
        vercel_ai_app(other), "POST", "/api/chat", headers=JSON_BODY, body=json.dumps(body).encode()
    )
    assert answer.status == 409, answer.text
    assert f"belongs to a Flow of type {FLOW_TYPE!r}" in json.loads(answer.body)["error"]
    snapshot = await stack.sessions.wait_until_idle("taken", timeout=30)
    assert not snapshot.messages, "the other agent's message never reached this session"


async def test_a_snapshot_of_a_session_no_worker_serves_says_so_in_one_line() -> None:
    flow = AgentSessionFlow(LifecycleRunner(), flow_type=FLOW_TYPE, options=lifecycle_options())
    async with in_process_stack(
        flow, serve=False, dispatch_wait=timedelta(seconds=1), no_worker_wait=timedelta(0)
    ) as stack:
        await stack.sessions.start_session("s")
        with pytest.raises(NoWorkerError) as raised:
            await stack.sessions.get_agent_snapshot("s")
    message = str(raised.value)
    assert "\n" not in message
    assert f"no Worker serves Flow type {FLOW_TYPE!r}" in message
    assert "start a Worker" in message
    assert isinstance(raised.value, dex.WorkerInvocationError)


async def test_a_read_made_while_no_worker_is_connected_waits_for_the_worker_that_starts_later() -> None:
    # The server gives up on the first try after 0.2 s (before the Worker starts): the client asks again.
    flow = AgentSessionFlow(LifecycleRunner(), flow_type=FLOW_TYPE, options=lifecycle_options())
    async with in_process_stack(
        flow, dispatch_wait=timedelta(seconds=0.2), worker_delay=timedelta(seconds=1.5)
    ) as stack:
        await stack.sessions.start_session("s")
        snapshot = await stack.sessions.get_agent_snapshot("s")
    assert snapshot.messages == ()


async def test_event_payloads_read_back_through_the_client_are_the_spec_json_objects(stack: InProcessStack) -> None:
    sessions = stack.sessions
    await sessions.start_session("s", "m1 r")
    await sessions.wait_until_idle("s", timeout=30)

    token, payloads = "", []
    while True:
        message = await sessions.read_agent_event("s", token)
        token = message.resume_token
        payloads.append((message.event.type, message.event.payload))
        if message.event.type is AgentEventType.TURN_COMMITTED:
            break
    finished = [p for kind, p in payloads if kind is AgentEventType.TOOL_CALL_FINISHED]
    assert [(p["tool_name"], p.get("status")) for p in finished] == [("read", "succeeded")]
    assert {"tool_call_id", "tool_name", "status"} <= set(finished[0].keys())
    for _kind, payload in payloads:
        assert json.loads(json.dumps(dict(payload.items()))) == payload.to_dict()


class BrokenRunner(LifecycleRunner):
    async def run_model_step(self, turn):  # type: ignore[no-untyped-def]
        return "hello"


async def test_a_runner_that_returns_no_outcome_fails_its_turn_with_an_error_naming_the_contract() -> None:
    flow = AgentSessionFlow(BrokenRunner(), flow_type=FLOW_TYPE, options=lifecycle_options())
    async with in_process_stack(flow) as stack:
        await stack.sessions.start_session("s")
        receipt = await stack.sessions.submit_user_message("s", "m1")
        result = await stack.sessions.wait_for_turn("s", receipt, timeout=30)
    assert result.status is TurnStatus.FAILED
    assert result.error is not None
    assert "AgentFrameworkRunner.run_model_step must return TurnCompleted or ToolCallsRequested, got str 'hello'" in (
        result.error
    )
