"""``dex_agents.testing`` runner doubles: what an adapter author unit-tests a runner with."""

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

import dex_agents.testing
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.runner import AgentTurnContext, DeferredToolExecution, ToolExecutionResult
from dex_agents.domain import events as ev
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.events import AgentEventType
from dex_agents.domain.messages import MessageRole
from dex_agents.domain.tools import ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.domain.turns import AgentTurnOutcome, ToolCallsRequested, TurnCompleted
from dex_agents.domain.usage import AgentUsage
from dex_agents.testing import (
    RecordingEventSink,
    RecordingHeartbeat,
    ScriptedRunner,
    ScriptExhaustedError,
    assistant_message,
    deferred_tool_call,
    make_tool_call,
    make_tool_execution,
    make_turn_context,
    tool_calls_requested,
    user_message,
)

DONE = TurnCompleted(new_messages=[assistant_message("done")])


# -- ScriptedRunner: model calls ---------------------------------------------------------


async def test_the_scripted_runner_plays_model_replies_in_order_and_records_each_turn() -> None:
    asked = tool_calls_requested(deferred_tool_call("c1", "search"))
    runner = ScriptedRunner([asked, DONE])
    first, second = make_turn_context(), make_turn_context(framework_run_state="run-state")

    assert await runner.run_model_step(first) is asked
    assert await runner.run_model_step(second) is DONE
    assert runner.model_turns == (first, second)
    assert runner.remaining_model_replies == 0


async def test_a_model_call_beyond_the_script_raises_script_exhausted() -> None:
    runner = ScriptedRunner([DONE])
    await runner.run_model_step(make_turn_context())
    with pytest.raises(ScriptExhaustedError, match="model call 2 was not scripted"):
        await runner.run_model_step(make_turn_context())
    assert issubclass(ScriptExhaustedError, AssertionError)


async def test_a_scripted_model_exception_is_raised() -> None:
    runner = ScriptedRunner([TimeoutError("slow model")])
    with pytest.raises(TimeoutError, match="slow model"):
        await runner.run_model_step(make_turn_context())


async def test_a_scripted_model_function_sees_the_turn_sync_or_async() -> None:
    def sync_reply(turn: AgentTurnContext) -> AgentTurnOutcome:
        turn.events.write_text_delta(f"hi from {turn.turn_id}")
        return DONE

    async def async_reply(turn: AgentTurnContext) -> AgentTurnOutcome:
        await turn.heartbeat()
        return TurnCompleted(new_messages=[assistant_message(str(turn.is_resuming))])

    runner = ScriptedRunner([sync_reply])
    runner.script_model(async_reply)
    sink, heartbeat = RecordingEventSink(), RecordingHeartbeat()

    assert await runner.run_model_step(make_turn_context(turn_id="turn-4", sink=sink)) is DONE
    resumed = await runner.run_model_step(make_turn_context(framework_run_state="s", heartbeat=heartbeat))

    assert sink.events[0].payload == ev.text_delta("hi from turn-4")
    assert isinstance(resumed, TurnCompleted)
    assert resumed.new_messages[0].text == "True"
    assert heartbeat.count == 1


def test_the_scripted_runner_builds_user_messages_and_records_their_text() -> None:
    runner = ScriptedRunner()
    message = runner.build_user_message("Refund order 7")
    assert (message.role, message.text) == (MessageRole.USER, "Refund order 7")
    assert message.framework_item == '{"role": "user", "text": "Refund order 7"}'
    assert runner.user_message_texts == ("Refund order 7",)


def test_the_scripted_runner_takes_another_user_message_builder() -> None:
    runner = ScriptedRunner(build_user_message=assistant_message)
    assert runner.build_user_message("x").role is MessageRole.ASSISTANT


# -- ScriptedRunner: tool calls ---------------------------------------------------------


async def test_tool_replies_are_found_by_call_id_before_tool_name() -> None:
    runner = ScriptedRunner(tool_replies={"search": "by name", "c2": "by id"})
    first = await runner.execute_deferred_tool_call(make_tool_execution("search", tool_call_id="c1"))
    second = await runner.execute_deferred_tool_call(make_tool_execution("search", tool_call_id="c2"))
    assert (first, second) == (ToolExecutionResult("by name"), ToolExecutionResult("by id"))
    assert runner.executed_tool_call_ids == ("c1", "c2")


async def test_a_list_of_tool_replies_is_consumed_in_order_and_its_last_reply_repeats() -> None:
    runner = ScriptedRunner(tool_replies={"flaky": [ConnectionError("down"), ToolExecutionResult("up")]})
    execution = make_tool_execution("flaky")
    with pytest.raises(ConnectionError):
        await runner.execute_deferred_tool_call(execution)
    assert await runner.execute_deferred_tool_call(execution) == ToolExecutionResult("up")
    assert await runner.execute_deferred_tool_call(execution) == ToolExecutionResult("up")


async def test_a_single_tool_reply_answers_every_call() -> None:
    runner = ScriptedRunner(tool_replies={"refund": ToolExecutionError("no such order")})
    for _ in range(2):
        with pytest.raises(ToolExecutionError, match="no such order"):
            await runner.execute_deferred_tool_call(make_tool_execution("refund"))


async def test_a_tool_reply_function_sees_the_execution_sync_or_async() -> None:
    async def slow(call: DeferredToolExecution) -> str:
        await call.heartbeat()
        return call.idempotency_key

    runner = ScriptedRunner(tool_replies={"sync": lambda call: call.tool_call.arguments, "async": slow})
    sync_result = await runner.execute_deferred_tool_call(make_tool_execution("sync", '{"a": 1}'))
    async_result = await runner.execute_deferred_tool_call(make_tool_execution("async", flow_id="s9"))
    assert sync_result == ToolExecutionResult('{"a": 1}')
    assert async_result == ToolExecutionResult("s9/turn-1/call-1")


async def test_an_unscripted_tool_call_raises_script_exhausted() -> None:
    runner = ScriptedRunner(tool_replies={"search": "x"})
    with pytest.raises(ScriptExhaustedError, match="'refund' was not scripted"):
        await runner.execute_deferred_tool_call(make_tool_execution("refund"))
    runner.script_tool("refund", "now scripted")
    assert await runner.execute_deferred_tool_call(make_tool_execution("refund")) == ToolExecutionResult("now scripted")


async def test_concurrent_tool_calls_are_all_recorded() -> None:
    started: list[str] = []
    all_started, release = asyncio.Event(), asyncio.Event()

    async def gated(call: DeferredToolExecution) -> str:
        started.append(call.tool_call.tool_call_id)
        if len(started) == 5:
            all_started.set()
        await release.wait()
        return call.tool_call.tool_call_id

    runner = ScriptedRunner(tool_replies={"tool": gated})
    tasks = [
        asyncio.ensure_future(runner.execute_deferred_tool_call(make_tool_execution(tool_call_id=f"c{n}")))
        for n in range(5)
    ]
    async with asyncio.timeout(5):
        await all_started.wait()
    assert len(runner.tool_executions) == 5, "all five run at once"
    release.set()
    results = await asyncio.gather(*tasks)
    assert [r.output for r in results] == [f"c{n}" for n in range(5)]


# -- builders ---------------------------------------------------------------------------


def test_a_default_turn_context_is_the_first_model_call_of_turn_one() -> None:
    turn = make_turn_context()
    assert (turn.flow_id, turn.turn_id, turn.attempt) == ("session-1", "turn-1", 1)
    (message,) = turn.messages
    assert (message.sequence, message.role, message.text, message.turn_id) == (1, MessageRole.USER, "Hello", "turn-1")
    assert not turn.is_resuming
    assert dict(turn.tool_calls) == {}
    assert turn.resolve_tool_policy("anything") == ToolPolicy(ToolEffect.UNCLASSIFIED)
    assert turn.resolve_tool_policy("anything", ToolEffect.READ) == ToolPolicy(ToolEffect.READ)


def test_a_resuming_turn_context_carries_the_run_state_and_final_records() -> None:
    record = make_tool_call("c1", "search", output="3 tickets")
    turn = make_turn_context(
        user_text="Find tickets",
        framework_run_state="state",
        tool_calls=[record],
        options=AgentSessionOptions(tool_policies={"search": ToolPolicy(ToolEffect.READ)}),
    )
    assert turn.is_resuming
    assert turn.recorded_tool_call("c1") is record
    assert turn.recorded_tool_call("c1").status is ToolCallStatus.SUCCEEDED
    assert turn.messages[0].text == "Find tickets"
    assert turn.resolve_tool_policy("search", ToolEffect.UNCLASSIFIED) == ToolPolicy(ToolEffect.READ)
    with pytest.raises(KeyError):
        turn.recorded_tool_call("missing")


def test_a_turn_context_writes_events_with_its_envelope() -> None:
    sink = RecordingEventSink()
    turn = make_turn_context(sink=sink, turn_id="turn-2", attempt=3, step_execution_id="RunModel-4")
    turn.events.write_reasoning_delta("hmm")
    (event,) = sink.events
    assert (event.type, event.turn_id, event.step_execution_id, event.attempt) == (
        AgentEventType.REASONING_DELTA,
        "turn-2",
        "RunModel-4",
        3,
    )
    assert sink.of_type(AgentEventType.TEXT_DELTA) == ()
    sink.clear()
    assert sink.events == ()


@pytest.mark.parametrize(
    ("policy", "status"),
    [
        (ToolPolicy(ToolEffect.READ), ToolCallStatus.PENDING),
        (ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE), ToolCallStatus.APPROVED),
        (ToolPolicy(ToolEffect.READ, requires_approval=True), ToolCallStatus.APPROVED),
    ],
)
def test_a_tool_execution_carries_a_runnable_record_and_the_idempotency_key(
    policy: ToolPolicy, status: ToolCallStatus
) -> None:
    execution = make_tool_execution("refund", '{"order": 7}', tool_call_id="c7", policy=policy, attempt=2)
    assert execution.tool_call.status is status
    assert (execution.tool_call.tool_name, execution.tool_call.arguments) == ("refund", '{"order": 7}')
    assert execution.idempotency_key == "session-1/turn-1/c7"
    assert (execution.attempt, execution.turn_id) == (2, "turn-1")


def test_the_outcome_builders_fill_in_sensible_defaults() -> None:
    call = deferred_tool_call("c1", "search")
    assert (call.arguments, call.policy) == ("{}", ToolPolicy(ToolEffect.READ))
    requested = tool_calls_requested(call)
    assert isinstance(requested, ToolCallsRequested)
    assert (requested.framework_run_state, requested.usage) == ("run-state", AgentUsage(model_calls=1))
    assert user_message("x").role is MessageRole.USER


def test_make_tool_call_is_a_pending_read_unless_told_otherwise() -> None:
    assert make_tool_call().status is ToolCallStatus.PENDING
    assert make_tool_call(output="x").status is ToolCallStatus.SUCCEEDED
    assert make_tool_call().policy == ToolPolicy(ToolEffect.READ)


def test_the_testing_package_exports_the_runner_doubles() -> None:
    for name in ("ScriptedRunner", "RecordingEventSink", "make_turn_context", "make_tool_execution"):
        assert name in dex_agents.testing.__all__


def test_the_runner_doubles_import_without_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pytest", None)  # any "import pytest" now fails
    path = Path(dex_agents.testing.__file__).parent / "runner_doubles.py"
    spec = importlib.util.spec_from_file_location("_runner_doubles_without_pytest", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.ScriptedRunner.__name__ == "ScriptedRunner"
