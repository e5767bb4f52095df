"""Steering and cancelling a sagent session's turn on the engine-free host.

Where a steered message lands (and what the model sees), and what a cancel leaves for the next turn.
"""

import json
from pathlib import Path

import pytest
from sagent.types.runtime import AssistantMessage, ToolResult, UserMessage

from dex_agents import AgentSessionOptions, MessageRole, ToolCallStatus
from dex_agents.adapters.sagent import SagentRunner, _codec
from dex_agents.adapters.sagent.runner import NOT_APPROVED, RunState, tool_result
from dex_agents.application.next import GoTo, GoToMany, StepName
from dex_agents.domain.messages import MessageDelivery
from dex_agents.domain.snapshot import turn_result
from dex_agents.domain.tools import AgentToolCall, ToolEffect, ToolPolicy
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER, cancel_rejection_message
from dex_agents.testing.memory import InMemorySessionHost
from tests.integration.runner_conformance import assert_cancelled_at_its_approval
from tests.sagent.order_agent import STATE_ENV, TOOL_POLICIES, build_agent, invocations, notes_file
from tests.sagent.scripted_model import call, script

STEER = MessageDelivery.STEER


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(STATE_ENV, str(tmp_path))
    return tmp_path


def new_host() -> InMemorySessionHost:
    return InMemorySessionHost(SagentRunner(build_agent), options=AgentSessionOptions(tool_policies=TOOL_POLICIES))


def context_of(host: InMemorySessionHost) -> dict[str, object]:
    text = host.messages.all[-1].text
    assert text is not None
    loaded = json.loads(text)
    assert isinstance(loaded, dict)
    return loaded


def model_requests() -> int:
    return invocations().count("model")


# -- what the model reads for a stopped call ----------------------------------------------------------------------


def record(status: ToolCallStatus, message: str | None) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id="c1",
        turn_id="turn-1",
        tool_name="refund_order",
        arguments="{}",
        policy=ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
        deferral_order=0,
        status=status,
        rejection_message=message,
    )


def test_a_call_the_cancel_stopped_reads_as_the_cancels_error_and_a_plain_rejection_as_not_approved() -> None:
    stopped = cancel_rejection_message("wrong order")
    cancelled = tool_result(record(ToolCallStatus.CANCELLED, stopped))
    assert (cancelled.is_error, cancelled.content) == (True, stopped)
    rejected_by_cancel = tool_result(record(ToolCallStatus.REJECTED, stopped))
    assert (rejected_by_cancel.is_error, rejected_by_cancel.content) == (True, stopped)
    rejected = tool_result(record(ToolCallStatus.REJECTED, "too much"))
    assert (rejected.is_error, rejected.content) == (True, f"{NOT_APPROVED}: too much")
    bare = tool_result(record(ToolCallStatus.CANCELLED, None))
    assert bare.is_error
    assert bare.content.startswith("The tool call did not run: the user cancelled the turn")


def test_a_run_state_written_before_steering_existed_reads_with_no_steered_messages() -> None:
    state = RunState(entries=("e",), calls=("c",), waves=(), issued=("c",), tool_state={})
    loaded = json.loads(state.encode())
    del loaded["steered"]
    assert RunState.decode(json.dumps(loaded)).steered == ()
    steered = RunState(entries=(), calls=(), waves=(), issued=(), tool_state={}, steered=("u",))
    assert RunState.decode(steered.encode()) == steered


# -- steering -----------------------------------------------------------------------------------------------------


async def test_a_message_steered_during_a_tool_step_reaches_the_next_model_call_after_the_tool_result() -> None:
    host = new_host()
    await host.start(script([call("f1", "find_order", order_id="7")], "@context", name="steer"))
    fan_out = await host.run_model()
    assert fan_out == GoTo(step=StepName.CALL_TOOL, input="f1"), "one call: its tool Step resumes the turn"
    assert await host.send_user_message("Also: when was it delivered?", delivery=STEER)

    await host.drive(fan_out)

    seen = context_of(host)
    users = seen["users"]
    assert isinstance(users, list)
    assert users[-1] == "Also: when was it delivered?"
    assert model_requests() == 2, "taken by the model call after the tool Step, not a turn of its own"
    stored = host.messages.all
    assert [m.role for m in stored] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.USER,
        MessageRole.ASSISTANT,
    ], "stored where the model saw it: after the tool result"
    assert stored[3].text == "Also: when was it delivered?"
    assert isinstance(_codec.decode_entry(stored[3].framework_item), UserMessage)
    assert {m.turn_id for m in stored} == {"turn-1"}


async def test_a_message_steered_between_waves_waits_for_the_model_call_after_the_last_wave(state_dir: Path) -> None:
    target = notes_file(state_dir)
    host = new_host()
    await host.start(
        script(
            [
                call("r1", "Read", file_path=str(target)),
                call("w1", "Write", file_path=str(target), content="bye world\n"),
                call("f1", "find_order", order_id="7"),
            ],
            "@context",
            name="waves",
        )
    )
    first_wave = await host.run_model()
    assert isinstance(first_wave, GoToMany)
    assert await host.send_user_message("keep the old text somewhere", delivery=STEER)

    await host.drive(first_wave)

    assert target.read_text() == "bye world\n", "the second wave ran"
    assert model_requests() == 2
    stored = host.messages.all
    kinds = [type(_codec.decode_entry(m.framework_item)).__name__ for m in stored]
    assert kinds == [
        "UserMessage",
        "AssistantMessage",
        "ToolResult",
        "ToolResult",
        "ToolResult",
        "UserMessage",
        "AssistantMessage",
    ], "after every result of the response, never between a call and its result"
    assert stored[5].text == "keep the old text somewhere"
    results = [_codec.decode_entry(m.framework_item) for m in stored[2:5]]
    assert [r.call_id for r in results if isinstance(r, ToolResult)] == ["r1", "w1", "f1"], "in call order"
    assert isinstance(_codec.decode_entry(stored[1].framework_item), AssistantMessage)
    users = context_of(host)["users"]
    assert isinstance(users, list)
    assert users[-1] == "keep the old text somewhere", "the model call after the last wave saw it"


async def test_a_steered_message_stays_in_the_history_of_later_turns() -> None:
    host = new_host()
    await host.start(script([call("f1", "find_order", order_id="7")], "first answer", name="one"))
    fan_out = await host.run_model()
    assert fan_out == GoTo(step=StepName.CALL_TOOL, input="f1"), "one call: its tool Step resumes the turn"
    await host.send_user_message("steered text", delivery=STEER)
    waiting = await host.drive(fan_out)
    await host.send_user_message(script("@context", name="two"))
    await host.drive(*waiting)
    users = context_of(host)["users"]
    assert isinstance(users, list)
    assert "steered text" in users


# -- cancel -------------------------------------------------------------------------------------------------------


async def test_a_cancel_at_an_approval_ends_the_turn_without_a_model_call_and_the_next_turn_works() -> None:
    host = new_host()
    waiting = await host.drive(await host.start(script([call("r1", "refund_order", order_id="7")], name="one")))
    snapshot = await host.get_agent_snapshot()
    assert len(snapshot.pending_interrupts) == 1
    assert await host.cancel_turn("wrong order")

    waiting = await host.drive(*waiting)

    assert model_requests() == 1, "no model call after the cancel"
    assert invocations().count("tool") == 0
    first = turn_result(await host.get_agent_snapshot(), "turn-1")
    assert first is not None
    assert_cancelled_at_its_approval(first, "wrong order")
    note = host.messages.all[-1]
    assert isinstance(_codec.decode_entry(note.framework_item), UserMessage), "the runner built the note"

    await host.send_user_message(script("@context", name="two"))
    await host.drive(*waiting)

    second = await host.get_agent_snapshot()
    assert second.state is not None
    assert (second.state.turn_count, second.state.active_turn_id, second.state.last_turn_cancelled) == (2, None, False)
    users = context_of(host)["users"]
    assert isinstance(users, list)
    (merged,) = users  # sagent merges the adjacent user messages: the cancelled turn's, its note, this turn's
    assert TURN_CANCELLED_NOTE_HEADER in merged
    assert invocations().count("model", "two", step=0) == 1, "the new turn's script answered, not the cancelled one"
    assert invocations().count("tool") == 0
