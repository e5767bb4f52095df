"""``ResumeTurn``: back to the model once every tool call of the turn has its result."""

from dex_agents.application.next import GoTo, StepName, WaitAgain
from dex_agents.domain.session import AgentStatus
from dex_agents.domain.tools import ToolCallCompleted, ToolCallStatus
from dex_agents.testing import ScriptedRunner, deferred_tool_call, make_tool_call, tool_calls_requested
from dex_agents.testing.memory import InMemorySessionHost


async def running_tools(*tool_call_ids: str) -> InMemorySessionHost:
    calls = [deferred_tool_call(tool_call_id, "tool") for tool_call_id in tool_call_ids]
    session = InMemorySessionHost(ScriptedRunner([tool_calls_requested(*calls)]))
    await session.start("go")
    await session.run_model()
    return session


async def test_when_every_record_is_final_the_turn_goes_back_to_the_model() -> None:
    session = await running_tools("c1", "c2")
    session.tool_calls.put(session.tool_calls["c1"].succeed("a"))
    session.tool_calls.put(session.tool_calls["c2"].fail("b"))

    decision = await session.resume_turn(
        [
            ToolCallCompleted(tool_call_id="c1", turn_id="turn-1", status=ToolCallStatus.SUCCEEDED),
            ToolCallCompleted(tool_call_id="c2", turn_id="turn-1", status=ToolCallStatus.FAILED),
        ]
    )

    assert decision == GoTo(step=StepName.RUN_MODEL, window=session.state.current.model_window())
    assert session.state.current.status is AgentStatus.RUNNING_MODEL
    assert session.state.current.active_turn_id == "turn-1"


async def test_a_consumed_result_that_left_a_record_unfinished_waits_again_for_the_missing_results() -> None:
    session = await running_tools("c1", "c2", "c3")
    session.tool_calls.put(session.tool_calls["c1"].succeed("a"))
    # Two results arrived, but one of them does not match a finished record of this turn.
    delivered = [
        ToolCallCompleted(tool_call_id="c1", turn_id="turn-1", status=ToolCallStatus.SUCCEEDED),
        ToolCallCompleted(tool_call_id="c1", turn_id="turn-1", status=ToolCallStatus.SUCCEEDED),
        ToolCallCompleted(tool_call_id="c2", turn_id="turn-1", status=ToolCallStatus.SUCCEEDED),
    ]

    decision = await session.resume_turn(delivered)

    assert decision == WaitAgain(input=2)
    assert session.state.current.status is AgentStatus.RUNNING_TOOLS

    session.tool_calls.put(session.tool_calls["c2"].succeed("b"))
    session.tool_calls.put(session.tool_calls["c3"].succeed("c"))
    assert await session.resume_turn([]) == GoTo(step=StepName.RUN_MODEL, window=session.state.current.model_window())


async def test_records_of_another_turn_do_not_hold_the_turn_back() -> None:
    session = await running_tools("c1")
    session.tool_calls.put(session.tool_calls["c1"].succeed("a"))
    session.tool_calls.put(make_tool_call("old", turn_id="turn-0", deferral_order=9))

    assert await session.resume_turn([]) == GoTo(step=StepName.RUN_MODEL, window=session.state.current.model_window())
