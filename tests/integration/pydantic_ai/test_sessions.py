"""A real Pydantic AI agent as a durable session, with the Worker in a child process.

`TestPydanticAISessions` runs the scenarios every adapter passes (`tests.integration.runner_conformance`)
on Pydantic AI; below are its own: the tool table, rejected and expired approvals, a failed first
turn, toolset metadata, tool search, a wrapper agent.
"""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter, ToolReturnPart

from dex_agents import AgentSessionFlow, AgentSnapshot, MessageRole, ToolCallStatus
from dex_agents.domain.events import ToolCallDeferredPayload
from dex_agents.domain.interrupts import EXPIRED_REJECTION_MESSAGE
from dex_agents.testing import AgentTestStack
from tests.integration.pydantic_ai.conftest import WORKER_MODULE
from tests.integration.pydantic_ai.order_agent import DEADLINE_ENV, STATE_ENV, build_flows, invocations
from tests.integration.runner_conformance import (
    RunnerKit,
    SessionConformance,
    answer,
    approve_until_idle,
    call,
    executed,
    idle,
    script,
)
from tests.integration.stacks import agent_test_stack, started_session

pytestmark = pytest.mark.integration


def decode_returns(framework_item: str) -> Iterator[tuple[str, str, str]]:
    """The tool returns of one stored request: ``(call ID, outcome, text)``."""
    for part in ModelMessagesTypeAdapter.validate_json(framework_item)[0].parts:
        if isinstance(part, ToolReturnPart):
            yield part.tool_call_id, part.outcome, part.model_response_str(wrap_if_error=False)


def tool_returns(snapshot: AgentSnapshot) -> dict[str, str]:
    """Return what the model was last given for each tool, as ``{"name[outcome]": text}``."""
    last = next(m for m in reversed(snapshot.messages) if m.role is MessageRole.TOOL)
    request = ModelMessagesTypeAdapter.validate_json(last.framework_item)[0]
    return {
        f"{part.tool_name}[{part.outcome}]": part.model_response_str(wrap_if_error=False)
        for part in request.parts
        if isinstance(part, ToolReturnPart)
    }


KIT = RunnerKit(STATE_ENV, ok="success", failed="failed", decode_results=decode_returns, deltas_coalesced=True)


class TestPydanticAISessions(SessionConformance):
    kit = KIT

    def check_order_session(self, first: AgentSnapshot, second: AgentSnapshot) -> None:
        roles = [(m.role, m.tool_call_id) for m in first.messages]
        assert roles == [
            (MessageRole.USER, None),
            (MessageRole.USER, None),  # the opening request with the system prompt
            (MessageRole.ASSISTANT, "f1"),
            (MessageRole.TOOL, "f1"),
            (MessageRole.ASSISTANT, "r1"),
            (MessageRole.TOOL, "r1"),
            (MessageRole.ASSISTANT, "e1"),
            (MessageRole.TOOL, "e1"),
            (MessageRole.ASSISTANT, None),
        ]
        for message in second.messages:
            assert len(ModelMessagesTypeAdapter.validate_json(message.framework_item)) == 1


async def test_every_row_of_the_tool_table_is_recorded_as_the_spec_says(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await stack.start_worker()
    # External results (external_lookup, defer_me) wait for submit_tool_result: test_external_results.py;
    # a tool asking approval itself (ApprovalRequired) waits for it: the parity suite's hitl scenarios.
    rows = ["whoami", "retry_me", "fail_me", "sub_agent", "crash"]
    await stack.sessions(flow).start_session("s", script([call(f"c{i}", name) for i, name in enumerate(rows)]))
    snapshot = await idle(stack, flow, "s")
    outcomes = tool_returns(snapshot)
    assert outcomes["whoami[success]"] == "session s, conversation s"
    # Pydantic AI's own answers, as in a plain run: a retry prompt, and the tool's failure message.
    assert outcomes["retry_me[retried]"] == "give me an order ID"
    assert outcomes["fail_me[failed]"] == "the order is locked"
    assert "Tool 'no_such_tool' exceeded max retries" in outcomes["sub_agent[failed]"]
    assert "disk full" in outcomes["crash[failed]"]
    # A failure the model sees runs once; a Step failure of a read is retried to three attempts.
    counts = {name: invocations().count("tool", name) for name in rows}
    assert counts == {
        "whoami": 1,
        "retry_me": 1,
        "fail_me": 1,
        "sub_agent": 3,
        "crash": 3,
    }
    assert (await executed(stack, "s")).count("RecordToolFailure") == 2
    # The one message answering all the calls keeps each call's outcome after the turn.
    answers = next(m for m in reversed(snapshot.messages) if m.role is MessageRole.TOOL)
    assert [o.tool_call_id for o in answers.tool_outcomes] == [f"c{i}" for i in range(len(rows))]
    assert {o.tool_name: (o.status.value, o.attempts) for o in answers.tool_outcomes} == {
        "whoami": ("succeeded", 1),
        "retry_me": ("failed", 1),
        "fail_me": ("failed", 1),
        "sub_agent": ("failed", 3),
        "crash": ("failed", 3),
    }
    # deps_factory runs before every model Step (2) and every tool Step attempt (3 single runs, 2 x 3 retries).
    assert invocations().count("deps", "s") == 2 + 3 + 6


async def test_a_rejected_approval_tells_the_model_and_runs_nothing(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await started_session(stack, flow, script([call("r1", "refund_order", order_id="7")]))
    snapshot = await approve_until_idle(stack, flow, "s", rejection="not today")
    assert answer(snapshot) == "refund_order[denied]=not today"
    assert invocations().count("tool") == 0
    assert snapshot.pending_interrupts == ()
    (outcome,) = [o for m in snapshot.messages for o in m.tool_outcomes]
    assert (outcome.status, outcome.rejection_message, outcome.attempts) == (ToolCallStatus.REJECTED, "not today", 0)


async def test_an_approval_nobody_answers_expires_and_the_model_sees_an_expiry_denial(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEADLINE_ENV, "1")
    flows = build_flows()
    async with agent_test_stack(
        tmp_path,
        flows,
        WORKER_MODULE,
        worker_env={STATE_ENV: str(state_dir), DEADLINE_ENV: "1"},
        backend="devserver",
    ) as stack:
        await stack.start_worker()
        await stack.sessions(flows[0]).start_session("s", script([call("r1", "refund_order", order_id="7")]))
        snapshot = await idle(stack, flows[0], "s")
        assert answer(snapshot) == f"refund_order[denied]={EXPIRED_REJECTION_MESSAGE}"
        assert invocations().count("tool") == 0
        (outcome,) = [o for m in snapshot.messages for o in m.tool_outcomes]
        assert outcome.status is ToolCallStatus.EXPIRED


async def test_a_failed_first_turn_is_replayed_with_its_note_and_the_system_prompt(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await stack.start_worker()
    sessions = stack.sessions(flow)
    first = script([call("w1", "idempotent_write")], {"fail": "the model is down"}, name="one")
    await sessions.start_session("s", first)
    failed = await idle(stack, flow, "s")
    assert failed.state is not None
    assert failed.state.last_turn_error is not None
    assert "the model is down" in failed.state.last_turn_error
    note = answer(failed)
    assert note.startswith("[Dex] The previous turn failed after these tool calls ran:\n- idempotent_write {}")
    assert invocations().count("model", "one", step=1) == 3
    second = script("@context", name="two")
    await sessions.send_user_message("s", second)
    snapshot = await idle(stack, flow, "s", turns=2)
    seen = json.loads(answer(snapshot))
    assert seen["system"] == ["You help customers with their orders."]
    assert seen["users"] == [first, note, second]
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is None
    assert invocations().count("tool", "idempotent_write") == 1


async def test_tool_metadata_hints_decide_the_effect_of_prefixed_toolset_tools(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await started_session(
        stack,
        flow,
        script(
            [
                call("l1", "orders_lookup", order_id="7"),
                call("u1", "orders_set_status", order_id="7", status="shipped"),
                call("n1", "orders_send", text="hi"),
            ]
        ),
    )
    snapshot = await approve_until_idle(stack, flow, "s")
    assert answer(snapshot) == (
        "orders_lookup[success]=order 7 delivered; orders_set_status[success]=order 7 -> shipped; "
        "orders_send[success]=sent"
    )
    effects = await deferred_effects(stack, flow, "s")
    assert effects == {
        "orders_lookup": ("read", False),
        "orders_set_status": ("idempotent_write", False),
        "orders_send": ("unclassified", True),
    }
    steps = await executed(stack, "s")
    assert steps.count("CallTool") == 2
    assert steps.count("AwaitToolApproval") == 1
    assert steps.count("CallSingleAttemptTool") == 1


async def deferred_effects(
    stack: AgentTestStack, flow: AgentSessionFlow, session_id: str
) -> dict[str, tuple[object, object]]:
    sessions = stack.sessions(flow)
    effects: dict[str, tuple[object, object]] = {}
    token = ""
    while True:
        message = await sessions.read_agent_event(session_id, token)
        token = message.resume_token
        event = message.event
        if isinstance(event.payload, ToolCallDeferredPayload):
            effects[event.payload.tool_name] = (event.payload.effect.value, event.payload.requires_approval)
        if event.type == "turn_completed":
            return effects


async def test_tool_search_is_a_read_and_the_tool_it_reveals_runs_in_its_own_step(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await started_session(
        stack,
        flow,
        script([call("s1", "search_tools", queries=["refund"])], [call("h1", "hidden_refund", order_id="7")]),
    )
    snapshot = await idle(stack, flow, "s")
    assert answer(snapshot) == "hidden_refund[success]=hidden refund of 7"
    assert invocations().count("tool", "hidden_refund") == 1
    assert (await executed(stack, "s")).count("CallTool") == 2
    assert await deferred_effects(stack, flow, "s") == {
        "search_tools": ("read", False),
        "hidden_refund": ("idempotent_write", False),
    }


async def test_a_wrapper_agent_runs_every_step_through_its_own_run(
    stack: AgentTestStack, flows: list[AgentSessionFlow]
) -> None:
    wrapped = flows[1]
    await stack.start_worker()
    await stack.sessions(wrapped).start_session("w", script([call("f1", "find_order", order_id="7")]))
    snapshot = await idle(stack, wrapped, "w")
    assert answer(snapshot) == "find_order[success]=order 7 delivered"
    assert invocations().count("wrapper_run") == 3
    assert invocations().count("tool", "find_order", key="w/turn-1/f1") == 1
