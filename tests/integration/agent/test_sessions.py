"""The session Flow end to end on an engine, with the Worker in a child process.

`TestScriptedSessions` runs the scenarios every adapter passes (`tests.integration.runner_conformance`)
on the scripted agent, in the scenarios' own script language (`conformance_script`); below are the
binding's own cases, in the scripted agent's. Each test states its invariant through the
`InvocationLog`: how many real model and tool calls ran, across every Worker process.
"""

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents import AgentInterrupt, AgentSessionClient, AgentSessionFlow, AgentSnapshot, ToolCallStatus
from dex_agents.domain.events import TextDeltaPayload, ToolCallFinishedPayload
from dex_agents.domain.interrupts import EXPIRED_REJECTION_MESSAGE
from dex_agents.testing import (
    AgentTestStack,
    session_is_idle,
    wait_for_agent_snapshot,
    wait_until,
)
from tests.integration.agent import conformance_script
from tests.integration.agent.conftest import WORKER_MODULE
from tests.integration.agent.scripted_agent import (
    DEADLINE_ENV,
    EVENT_CAPACITY_ENV,
    HEARTBEAT_ENV,
    STATE_ENV,
    build_flow,
    gate,
    invocations,
)
from tests.integration.runner_conformance import RunnerKit, SessionConformance, executed
from tests.integration.runner_conformance import idle as idle_turns
from tests.integration.stacks import agent_test_stack, session_on_a_worker, started_session

pytestmark = pytest.mark.integration


def turn(*tools: dict[str, object], **options: object) -> str:
    return json.dumps({"tools": list(tools), **options})


def tool(call_id: str, name: str, **args: object) -> dict[str, object]:
    return {"id": call_id, "name": name, "args": args}


async def idle(stack: AgentTestStack, flow: AgentSessionFlow, session_id: str) -> AgentSnapshot:
    return await wait_for_agent_snapshot(
        stack.sessions(flow), session_id, session_is_idle, description="the turn to end"
    )


async def pending_approval(sessions: AgentSessionClient, session_id: str) -> AgentInterrupt:
    """The session's first pending approval, once it has one."""
    return await wait_for_agent_snapshot(
        sessions, session_id, lambda s: next(iter(s.pending_interrupts), None), description="a pending approval"
    )


@contextlib.asynccontextmanager
async def fake_stack_with(
    tmp_path: Path,
    state_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    *,
    engine_data_dir: Path | None = None,
) -> AsyncIterator[tuple[AgentTestStack, AgentSessionFlow]]:
    """A dev server stack whose Flow (here and in the Worker children) is built under ``env``.

    With ``engine_data_dir`` the dev server is a child process on that data dir (`AgentTestStack.kill_engine`).
    """
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    flow = build_flow()
    async with agent_test_stack(
        tmp_path,
        [flow],
        WORKER_MODULE,
        worker_env={STATE_ENV: str(state_dir)},
        backend="devserver",  # these cases read the dev server's own records
        engine_data_dir=engine_data_dir,
    ) as stack:
        yield stack, flow


KIT = RunnerKit(
    STATE_ENV, ok="ok", failed="error", decode_results=conformance_script.decode_result, deltas_coalesced=True
)


class TestScriptedSessions(SessionConformance):
    kit = KIT

    def check_effects_after_kill(self) -> None:
        runs = [e for e in invocations().entries() if e["kind"] == "tool" and e["name"] == "idempotent_write"]
        # A Worker killed before the engine read any frame of the attempt (a listening Worker's frames may still be in
        # flight) gets the same attempt redelivered (DevServerConfig.redeliver_before_first_output); else a new attempt.
        assert [e["attempt"] for e in runs] in ([1, 1], [1, 2])


def answer(snapshot: AgentSnapshot) -> dict[str, str]:
    text = snapshot.messages[-1].text
    assert text is not None
    loaded: dict[str, str] = json.loads(text)
    return loaded


async def test_turn_runs_each_tool_in_its_own_step_and_resumes_the_model(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await started_session(stack, flow, turn(tool("c1", "read_tool"), tool("c2", "idempotent_write")))
    snapshot = await idle(stack, flow, "s")
    assert answer(snapshot) == {
        "c1": "succeeded: read_tool done with key s/turn-1/c1",
        "c2": "succeeded: idempotent_write done with key s/turn-1/c2",
    }
    assert [m.sequence for m in snapshot.messages] == [1, 2]
    assert snapshot.tool_calls == ()
    assert snapshot.usage.model_calls == 2
    steps = await executed(stack, "s")
    assert steps[:2] == ["StartAgentSession", "RunModel"]
    assert sorted(steps[2:4]) == ["CallTool", "CallTool"]
    assert steps[4:] == ["ResumeTurn", "RunModel"]
    assert invocations().count("model") == 2
    assert invocations().count("tool") == 2


async def test_approval_given_after_the_worker_was_replaced_runs_the_tool_once(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    worker, sessions = await session_on_a_worker(stack, flow, turn(tool("c1", "approved_write")))
    interrupt = await pending_approval(sessions, "s")
    assert interrupt.tool_name == "approved_write"
    worker.kill()
    await stack.start_worker()
    assert await sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=True)
    snapshot = await idle(stack, flow, "s")
    assert answer(snapshot)["c1"].startswith("succeeded")
    assert snapshot.pending_interrupts == ()
    assert invocations().count("tool", "approved_write") == 1
    steps = await executed(stack, "s")
    assert steps.count("AwaitToolApproval") == 1
    assert not await sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=True)


async def test_rejected_approval_tells_the_model_and_runs_nothing(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("c1", "approved_write")))
    interrupt = await pending_approval(sessions, "s")
    assert await sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=False, rejection_message="no way")
    snapshot = await idle(stack, flow, "s")
    assert answer(snapshot) == {"c1": "rejected: no way"}
    assert invocations().count("tool") == 0


async def test_two_tool_steps_of_one_response_run_at_the_same_time(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await started_session(stack, flow, turn(tool("c1", "read_tool", gate="a"), tool("c2", "read_tool", gate="b")))
    await gate("a").wait_until_reached()
    await gate("b").wait_until_reached()
    gate("a").release()
    gate("b").release()
    snapshot = await idle(stack, flow, "s")
    assert set(answer(snapshot)) == {"c1", "c2"}


async def test_a_large_run_state_reaches_the_resumed_model_step_and_no_tool_step_fetches_it(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    if stack.devserver is None:
        pytest.skip("counts the dev server's LoadBlobs answers")
    await stack.start_worker()
    tools = [tool(f"c{n}", "read_tool") for n in range(1, 5)]
    # 4 KiB that hardly deflate: over the 1 KiB blob threshold even stored deflated, so a Step that loads the
    # run state fetches it by LoadBlobs.
    await stack.sessions(flow).start_session("s", turn(*tools, run_state_noise=4096))
    snapshot = await idle(stack, flow, "s")

    assert set(answer(snapshot)) == {"c1", "c2", "c3", "c4"}
    (resumed,) = [entry for entry in invocations().entries() if entry["kind"] == "run_state"]
    assert resumed["bytes"] > 4096
    # Only the resumed RunModel loads the run state (an AttributeMap instance); as a plain Attribute it went
    # to every tool Step and ResumeTurn of the batch too, each fetching the new blob.
    assert stack.devserver.blob_loads("s") == 1
    assert stack.devserver.attribute("s", "FRAMEWORK_RUN_STATE") is None


async def test_a_run_state_that_deflates_under_the_blob_threshold_reaches_the_resumed_model_step_inline(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    if stack.devserver is None:
        pytest.skip("counts the dev server's LoadBlobs answers")
    await stack.start_worker()
    # 6,000 bytes of JSON that deflate to a few dozen, as a turn's messages mostly do.
    await stack.sessions(flow).start_session("s", turn(tool("c1", "read_tool"), run_state_pad=6000))
    snapshot = await idle(stack, flow, "s")

    assert set(answer(snapshot)) == {"c1"}
    (resumed,) = [entry for entry in invocations().entries() if entry["kind"] == "run_state"]
    assert resumed["bytes"] > 6000
    assert stack.devserver.blob_loads("s") == 0


async def test_model_failing_three_times_after_tools_ran_records_the_turn_failure_note(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("c1", "idempotent_write"), fail_model="after_tools"))
    snapshot = await idle(stack, flow, "s")
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is not None
    assert "the model failed after the tools" in snapshot.state.last_turn_error
    note = snapshot.messages[-1].text
    assert note == (
        "[Dex] The previous turn failed after these tool calls ran:\n"
        "- idempotent_write {} -> succeeded: idempotent_write done with key s/turn-1/c1\n"
        "Do not repeat these tool calls unless the user asks again."
    )
    assert snapshot.tool_calls == ()
    assert invocations().count("model") == 4
    assert invocations().count("tool") == 1
    steps = await executed(stack, "s")
    assert steps[-1] == "RecordTurnFailure"
    history = await stack.read_step_history("s")
    failed = [e for e in history if e.event_type == "step_execute_failed" and e.step_type == "RunModel"]
    assert [e.final_attempt for e in failed] == [3]
    # A later turn that completes clears the error.
    await sessions.send_user_message("s", turn())
    later = await idle_turns(stack, flow, "s", turns=2)
    assert later.state is not None
    assert later.state.last_turn_error is None


async def test_model_failing_without_tools_appends_no_note(stack: AgentTestStack, flow: AgentSessionFlow) -> None:
    await started_session(stack, flow, turn(fail_model="always"))
    snapshot = await idle(stack, flow, "s")
    assert [m.sequence for m in snapshot.messages] == [1]
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is not None
    assert invocations().count("model") == 3


async def test_tool_errors_are_shown_to_the_model_and_crashing_reads_fail_after_three_attempts(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await started_session(
        stack, flow, turn(tool("c1", "read_tool", error="not found"), tool("c2", "read_tool", crash=True))
    )
    snapshot = await idle(stack, flow, "s")
    outcomes = answer(snapshot)
    assert outcomes["c1"] == "failed: The tool call failed: not found"
    assert outcomes["c2"].startswith("failed: The tool call failed:")
    assert "read_tool crashed" in outcomes["c2"]
    assert invocations().count("tool", id="c1") == 1
    assert invocations().count("tool", id="c2") == 3
    assert "RecordToolFailure" in await executed(stack, "s")


async def test_blank_messages_are_refused_and_a_session_without_a_first_message_waits(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, "   ")
    assert not await sessions.send_user_message("s", "  ")
    assert await sessions.send_user_message("s", turn())
    snapshot = await idle(stack, flow, "s")
    assert [m.sequence for m in snapshot.messages] == [1, 2]


async def test_snapshot_and_pages_of_a_stopped_session_stay_readable(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn())
    await idle(stack, flow, "s")
    await sessions.stop_session("s", "done")
    snapshot = await sessions.get_agent_snapshot("s")
    assert [m.sequence for m in snapshot.messages] == [1, 2]
    page = await sessions.list_agent_messages("s", after_sequence=1, limit=500)
    assert [m.sequence for m in page.messages] == [2]
    assert page.next_after_sequence is None


async def test_live_events_carry_the_envelope_and_every_tool_call_finishes_once(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, turn(tool("c1", "read_tool"), tool("c2", "approved_write")))
    interrupt = await pending_approval(sessions, "s")
    await sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=False)
    await idle(stack, flow, "s")
    events = []
    token = ""
    while True:
        message = await sessions.read_agent_event("s", token)
        events.append(message.event)
        token = message.resume_token
        if message.event.type == "turn_completed":
            break
    types = [e.type.value for e in events]
    assert types[0] == "turn_started"
    assert types.count("tool_call_finished") == 2
    assert "interrupt_raised" in types
    assert "interrupt_resolved" in types
    assert all(e.turn_id == "turn-1" for e in events)
    assert all(e.attempt >= 1 and e.step_execution_id for e in events)
    finished = {
        e.payload.tool_call_id: e.payload.status for e in events if isinstance(e.payload, ToolCallFinishedPayload)
    }
    assert finished == {"c1": ToolCallStatus.SUCCEEDED, "c2": ToolCallStatus.REJECTED}


async def test_an_approval_nobody_answers_expires_at_its_deadline_and_is_recorded_expired(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, {DEADLINE_ENV: "1"}) as (stack, flow):
        sessions = await started_session(stack, flow, turn(tool("c1", "approved_write")))
        interrupt = await pending_approval(sessions, "s")
        assert interrupt.deadline is not None
        snapshot = await idle(stack, flow, "s")
        assert answer(snapshot) == {"c1": f"expired: {EXPIRED_REJECTION_MESSAGE}"}
        assert snapshot.pending_interrupts == ()
        assert not await sessions.resolve_interrupt("s", interrupt.interrupt_id, approved=True)
        assert invocations().count("tool") == 0


async def test_events_written_from_another_thread_arrive_and_writes_after_the_step_returned_are_dropped(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    sessions = await started_session(stack, flow, json.dumps({"tools": [], "thread_events": True}))
    await idle(stack, flow, "s")
    await wait_until("the late write", lambda: invocations().count("late_write") == 1)
    await sessions.send_user_message("s", turn())  # a later turn's events follow any late one
    await idle_turns(stack, flow, "s", turns=2)
    texts = []
    token = ""
    completed = 0
    while completed < 2:
        message = await sessions.read_agent_event("s", token)
        token = message.resume_token
        if isinstance(message.event.payload, TextDeltaPayload):
            texts.append(message.event.payload.text)
        completed += message.event.type == "turn_completed"
    assert any("from a thread" in text for text in texts)  # joined with the Step's own delta when coalesced
    assert not any("too late" in text for text in texts)


async def test_a_tool_step_heartbeats_in_the_background_while_the_tool_runs(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, {HEARTBEAT_ENV: "0.05"}) as (stack, flow):
        await started_session(stack, flow, turn(tool("c1", "read_tool", gate="g")))
        await gate("g").wait_until_reached()
        # tool_call_started is one frame (a CallTool awaits no heartbeat); more can only come from the background beat.
        await wait_until("background heartbeats", lambda: stack.devserver.progress_frames("s", "CallTool-1") >= 5)
        gate("g").release()
        await idle(stack, flow, "s")


async def test_a_value_error_in_a_tool_is_recorded_under_its_own_name_not_as_an_invalid_step_result(
    stack: AgentTestStack, flow: AgentSessionFlow
) -> None:
    await started_session(stack, flow, turn(tool("c1", "read_tool", value_error="disk full")))
    snapshot = await idle(stack, flow, "s")
    outcome = answer(snapshot)["c1"]
    assert outcome.startswith("failed: The tool call failed:")
    assert "builtins.ValueError: disk full" in outcome
    assert "invalid result" not in outcome
    assert invocations().count("tool", id="c1") == 3


async def test_the_event_stream_keeps_within_its_capacity_by_dropping_the_oldest_events(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_stack_with(tmp_path, state_dir, monkeypatch, {EVENT_CAPACITY_ENV: "2048"}) as (stack, flow):
        assert flow.events_stream.stream_capacity_bytes == 2048
        sessions = await started_session(stack, flow, turn(*(tool(f"c{n}", "read_tool") for n in range(12))))
        await sessions.wait_for_turn("s", "turn-1", timeout=60)
        token = ""
        while (message := await sessions.read_agent_event("s", token)).event.type != "turn_committed":
            token = message.resume_token
        retained = await stack.client.list_stream_messages("s", flow.events_stream, 1000)
        assert retained.messages[0].value.type == "turn_committed"  # newest first
        # The turn wrote over 40 events of about 150 bytes: 2 KiB keeps only the newest few.
        assert len(retained.messages) < 20
        oldest = await sessions.read_agent_event("s")
        assert oldest.event.type != "turn_started"  # the turn's first events were trimmed
