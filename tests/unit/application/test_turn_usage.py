"""A tool Step's own usage, counted once into the session's; a turn the runner fails at once (`TurnFailedError`)."""

from dex_agents.application.next import GoTo, StepName
from dex_agents.application.runner import ToolExecutionResult, TurnFailedError
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.events import AgentEventType, UsageRecordedPayload
from dex_agents.domain.tools import ToolCallCompleted, ToolCallStatus
from dex_agents.domain.usage import AgentUsage
from dex_agents.testing import ScriptedRunner, ToolReply, deferred_tool_call, tool_calls_requested
from dex_agents.testing.memory import InMemorySessionHost

LIMIT = "UsageLimitExceeded: The next request would exceed the request_limit of 1"
SUB_AGENT = AgentUsage(model_calls=2, input_tokens=30, output_tokens=5, tool_calls=1)


async def running(*replies: ToolReply) -> InMemorySessionHost:
    runner = ScriptedRunner(
        [tool_calls_requested(deferred_tool_call("c1", "ask"), deferred_tool_call("c2", "look"))],
        tool_replies={"c1": replies[0], "c2": replies[1]},
    )
    host = InMemorySessionHost(runner)
    await host.start("go")
    await host.run_model()
    return host


async def test_the_usage_a_tool_step_reports_stays_on_its_record_whether_it_succeeds_or_fails() -> None:
    host = await running(
        ToolExecutionResult("answer", usage=SUB_AGENT), ToolExecutionError("locked", usage=AgentUsage(model_calls=1))
    )
    await host.call_tool("c1")
    await host.call_tool("c2")
    assert host.tool_calls["c1"].usage == SUB_AGENT
    assert host.tool_calls["c2"].usage == AgentUsage(model_calls=1)


async def test_a_tool_step_that_used_nothing_keeps_no_usage() -> None:
    host = await running(ToolExecutionResult("answer", usage=AgentUsage()), "plain")
    await host.call_tool("c1")
    await host.call_tool("c2")
    assert host.tool_calls["c1"].usage is None
    assert host.tool_calls["c2"].usage is None


async def test_resume_turn_adds_each_delivered_calls_usage_to_the_sessions_once() -> None:
    host = await running(ToolExecutionResult("answer", usage=SUB_AGENT), ToolExecutionResult("x", usage=SUB_AGENT))
    before = host.usage.get()
    await host.call_tool("c1")
    host.sink.clear()
    first = ToolCallCompleted(tool_call_id="c1", turn_id="turn-1", status=ToolCallStatus.SUCCEEDED)
    stale = ToolCallCompleted(tool_call_id="c2", turn_id="turn-0", status=ToolCallStatus.SUCCEEDED)
    await host.resume_turn([first, stale])
    assert host.usage.get() == before + SUB_AGENT
    (recorded,) = host.sink.payloads(UsageRecordedPayload)
    assert (recorded.recorded, recorded.session) == (SUB_AGENT, before + SUB_AGENT)

    await host.call_tool("c2")
    second = ToolCallCompleted(tool_call_id="c2", turn_id="turn-1", status=ToolCallStatus.SUCCEEDED)
    await host.resume_turn([second])
    assert host.usage.get() == before + SUB_AGENT + SUB_AGENT


async def test_tool_calls_own_counts_join_the_sessions_usage_with_no_event_until_the_next_model_call() -> None:
    counted = AgentUsage(tool_calls=1)
    host = await running(ToolExecutionResult("answer", usage=counted), ToolExecutionResult("x", usage=counted))
    before = host.usage.get()
    await host.call_tool("c1")
    await host.call_tool("c2")
    host.sink.clear()

    await host.resume_turn(host.results.take(2))

    assert host.usage.get() == before + counted + counted
    assert host.sink.payloads(UsageRecordedPayload) == [], "a tool's own count is no model usage"


async def test_a_turn_failed_error_fails_the_turn_at_once_and_counts_what_the_call_used() -> None:
    runner = ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "look")),
            TurnFailedError(LIMIT, usage=SUB_AGENT),
        ],
        tool_replies={"look": "seen"},
    )
    host = InMemorySessionHost(runner)
    waiting = await host.drive(await host.start("go"))

    assert waiting == (GoTo(step=StepName.AWAIT_USER_MESSAGE),)
    assert [attempt for step, _, attempt in host.executed if step is StepName.RUN_MODEL] == [1, 1]
    assert StepName.RECORD_TURN_FAILURE not in [step for step, _, _ in host.executed]
    state = host.state.current
    assert state.last_turn_error == LIMIT
    assert state.active_turn_id is None
    assert host.usage.get() == AgentUsage(model_calls=1) + SUB_AGENT
    assert host.tool_calls.all() == ()
    note = host.messages.all[-1].text
    assert note is not None
    assert note.startswith("[Dex] The previous turn failed after these tool calls ran:")
    assert AgentEventType.TURN_FAILED in host.sink.types
