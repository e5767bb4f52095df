"""Steered, withdrawn and cancelled messages at the awkward moments, on fake Dex through the public client.

Each case holds the session at an exact point (an approval that waits, a withdrawal
that read the queue and has not committed yet) and checks that no message is lost,
run although withdrawn, or stored twice. The runner is the lifecycle model's
(`tests.lifecycle.runner`): every message carries the plan of the turn it opens.
"""

import asyncio
from collections.abc import AsyncIterator

import pytest

from dex_agents import AgentSessionClient, AgentSnapshot, MessageRole
from dex_agents.domain.failure_note import TURN_FAILURE_NOTE_HEADER
from dex_agents.domain.snapshot import TurnStatus
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER
from dex_agents.testing import wait_for_agent_snapshot
from tests.lifecycle.runner import lifecycle_options
from tests.lifecycle.stack import (
    FLOW_TYPE,
    GatedCancelFlow,
    GatedReadRunner,
    GatedWithdrawFlow,
    InProcessStack,
    in_process_stack,
    lifecycle_flow,
)

pytestmark = pytest.mark.integration


@pytest.fixture
async def stack() -> AsyncIterator[InProcessStack]:
    async with in_process_stack(lifecycle_flow(flow_class=GatedWithdrawFlow)) as running:
        yield running


async def pending(sessions: AgentSessionClient, session_id: str, seen: set[str]) -> str:
    interrupt = await wait_for_agent_snapshot(
        sessions,
        session_id,
        lambda s: next((i for i in s.pending_interrupts if i.interrupt_id not in seen), None),
        description="a pending approval",
    )
    seen.add(interrupt.interrupt_id)
    return interrupt.interrupt_id


def user_texts(snapshot: AgentSnapshot, turn_id: str) -> list[str]:
    return [m.text or "" for m in snapshot.messages if m.turn_id == turn_id and m.role is MessageRole.USER]


@pytest.mark.parametrize("end", ["cancelled", "failed"])
async def test_a_steered_message_a_model_call_saw_is_stored_with_its_turn_when_the_turn_ends_early(
    stack: InProcessStack, end: str
) -> None:
    sessions, seen = stack.sessions, set[str]()
    await sessions.start_session("s")
    plan = "m1 a;a" if end == "cancelled" else "m1 a;a!"  # "!": the turn's last model call fails, every attempt
    first = await sessions.submit_user_message("s", plan)
    first_approval = await pending(sessions, "s", seen)
    assert await sessions.send_user_message("s", "m2", delivery="steer")
    assert await sessions.resolve_interrupt("s", first_approval, approved=True)
    second_approval = await pending(sessions, "s", seen)  # the model call that asked for it read m2
    if end == "cancelled":
        assert await sessions.cancel_turn("s", reason="wrong customer")
    else:
        assert await sessions.resolve_interrupt("s", second_approval, approved=True)

    result = await sessions.wait_for_turn("s", first, timeout=60)
    snapshot = await sessions.wait_until_idle("s", timeout=60)

    assert result.status is TurnStatus(end)
    texts = user_texts(snapshot, "turn-1")
    assert texts[:2] == [plan, "m2"]
    assert texts[-1].startswith(TURN_CANCELLED_NOTE_HEADER if end == "cancelled" else TURN_FAILURE_NOTE_HEADER)
    assert snapshot.state is not None
    assert snapshot.state.turn_count == 1, "the message joined the turn: it starts no turn of its own"


async def test_a_withdrawal_that_meets_a_turn_taking_the_message_answers_false_and_the_message_runs(
    stack: InProcessStack,
) -> None:
    sessions, seen = stack.sessions, set[str]()
    flow = stack.flow
    assert isinstance(flow, GatedWithdrawFlow)
    await sessions.start_session("s")
    await sessions.submit_user_message("s", "m1 a")
    interrupt = await pending(sessions, "s", seen)
    queued = await sessions.submit_user_message("s", "m2")
    flow.arm()
    withdrawal = asyncio.create_task(sessions.withdraw_user_message("s", queued.client_message_id))
    assert flow.reached is not None
    assert flow.release is not None
    await flow.reached.wait()  # the RPC read the queue: m2 waits there
    assert await sessions.resolve_interrupt("s", interrupt, approved=True)
    await wait_for_agent_snapshot(
        sessions, "s", lambda s: s.state is not None and s.state.turn_count == 2, description="m2's turn"
    )
    flow.release.set()

    assert await withdrawal is False
    result = await sessions.wait_for_turn("s", queued, timeout=60)
    assert result.status is TurnStatus.COMPLETED
    assert result.messages[0].text == "m2"


async def test_a_cancel_that_read_the_approvals_before_the_model_raised_one_leaves_that_one_pending() -> None:
    runner = GatedReadRunner()
    flow = GatedCancelFlow(runner, flow_type=FLOW_TYPE, options=lifecycle_options())
    async with in_process_stack(flow) as stack:
        sessions = stack.sessions
        await sessions.start_session("s")
        receipt = await sessions.submit_user_message("s", "m1 r;a")  # a read, then a call that needs approval
        await wait_for_agent_snapshot(
            sessions, "s", lambda s: any(r.tool_name == "read" for r in s.tool_calls), description="the read"
        )
        flow.arm()
        assert flow.reached is not None
        assert flow.release is not None
        cancelling = asyncio.create_task(sessions.cancel_turn("s", reason="stop"))
        await flow.reached.wait()  # the cancel read the pending approvals: none yet
        runner.release.set()  # the read ends; the next model call raises an approval and commits it
        interrupt = await pending(sessions, "s", set())
        flow.release.set()

        assert await cancelling is True
        snapshot = await sessions.get_agent_snapshot("s")
        assert [i.interrupt_id for i in snapshot.pending_interrupts] == [interrupt], "the approval stays answerable"
        assert await sessions.resolve_interrupt("s", interrupt, approved=True)
        result = await sessions.wait_for_turn("s", receipt, timeout=60)
        assert result.status is TurnStatus.CANCELLED
        assert (await sessions.wait_until_idle("s", timeout=60)).is_idle
