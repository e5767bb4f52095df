"""Tool Steps: one tool call runs once through the agent, and what the tool does becomes a result or an error."""

from typing import Any

import pytest
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    DeferredToolRequests,
    RunContext,
    Tool,
    ToolDefinition,
    UnexpectedModelBehavior,
)
from pydantic_ai.capabilities import Hooks
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import ApprovalRequiredToolset, ExternalToolset, FunctionToolset

from dex_agents import ToolCallStatus, ToolEffect, ToolExecutionError, ToolPolicy
from dex_agents.adapters.pydantic_ai import PydanticAIRunner, deferred_tool_idempotency_key
from dex_agents.application.runner import ToolApprovalRequestedError, ToolResultDeferredError
from dex_agents.testing import make_tool_call, make_tool_execution
from tests.unit.adapters.pydantic_ai.tool_agents import Deps, add_outcome_tools, never_called

HOOKS: list[str] = []


def build_agent() -> Agent[Deps, str]:
    hooks = Hooks[Deps]()

    @hooks.on.before_tool_execute
    async def before_execute(ctx: RunContext[Deps], *, call: Any, tool_def: ToolDefinition, args: Any) -> Any:
        HOOKS.append(f"before_tool_execute {call.tool_name}")
        return args

    approval_toolset: ApprovalRequiredToolset[Deps] = ApprovalRequiredToolset(FunctionToolset())

    @approval_toolset.wrapped.tool  # type: ignore[attr-defined, untyped-decorator]
    def guarded(ctx: RunContext[Deps], x: int) -> str:
        return f"guarded approved={ctx.tool_call_approved}"

    external = ExternalToolset([ToolDefinition(name="external_lookup", parameters_json_schema={"type": "object"})])
    prefixed: FunctionToolset[Deps] = FunctionToolset()

    @prefixed.tool_plain
    def lookup(order_id: str) -> str:
        return f"order {order_id} delivered"

    def hidden_refund(order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    agent = Agent(
        FunctionModel(never_called),
        deps_type=Deps,
        capabilities=[hooks],
        toolsets=[approval_toolset, external, prefixed.prefixed("orders")],
        tools=[Tool(hidden_refund, defer_loading=True)],
    )

    @agent.tool
    def whoami(ctx: RunContext[Deps], order_id: int) -> str:
        return (
            f"order={order_id} deps={ctx.deps.session_id} conversation={ctx.conversation_id} "
            f"key={deferred_tool_idempotency_key(ctx)} approved={ctx.tool_call_approved} "
            f"messages={len(ctx.messages)} prompt={ctx.prompt!r} requests={ctx.usage.requests}"
        )

    @agent.tool(requires_approval=True)
    def needs_approval(ctx: RunContext[Deps]) -> str:
        return f"ran approved={ctx.tool_call_approved}"

    @agent.tool
    def asks_first(ctx: RunContext[Deps], path: str) -> str:
        if not ctx.tool_call_approved:
            raise ApprovalRequired
        return f"deleted {path}"

    @agent.tool_plain
    async def sub_agent() -> str:
        inner: Agent[None, int] = Agent(FunctionModel(lambda m, i: ModelResponse(parts=[])), output_type=int)
        result = await inner.run("count", model_settings=None)
        return str(result.output)

    add_outcome_tools(agent)
    return agent


AGENT = build_agent()


def runner() -> PydanticAIRunner[Deps]:
    return PydanticAIRunner(AGENT, deps_factory=Deps)


async def run_tool(
    tool_name: str, arguments: str = "{}", *, policy: ToolPolicy | None = None, tool_call_id: str = "call-1"
) -> str:
    execution = make_tool_execution(
        tool_name, arguments, tool_call_id=tool_call_id, flow_id="session-9", turn_id="turn-3", policy=policy
    )
    return (await runner().execute_deferred_tool_call(execution)).output


APPROVAL = ToolPolicy(ToolEffect.READ, requires_approval=True)


async def test_a_returned_value_is_the_result_text() -> None:
    assert await run_tool("returns_structure") == '{"count":2}'


async def test_the_tool_sees_deps_session_conversation_and_idempotency_key_and_a_history_of_only_its_call() -> None:
    output = await run_tool("whoami", '{"order_id": 7}', tool_call_id="c7")
    assert output == (
        "order=7 deps=session-9 conversation=session-9 key=session-9/turn-3/c7 approved=False "
        "messages=1 prompt=None requests=0"
    )


async def test_an_approved_call_runs_with_tool_call_approved() -> None:
    output = await run_tool("whoami", '{"order_id": 7}', policy=APPROVAL)
    assert "approved=True" in output


async def test_a_requires_approval_tool_runs_once_approved() -> None:
    assert await run_tool("needs_approval", policy=APPROVAL) == "ran approved=True"


async def test_an_approval_required_toolset_runs_once_approved() -> None:
    assert await run_tool("guarded", '{"x": 1}', policy=APPROVAL) == "guarded approved=True"


async def test_the_agents_tool_hooks_run_in_the_tool_step() -> None:
    HOOKS.clear()
    await run_tool("whoami", '{"order_id": 1}')
    assert HOOKS == ["before_tool_execute whoami"]


async def test_a_prefixed_toolset_tool_runs_by_the_name_the_model_calls() -> None:
    assert await run_tool("orders_lookup", '{"order_id": "7"}') == "order 7 delivered"


async def test_a_tool_only_tool_search_reveals_runs_in_its_own_step() -> None:
    assert await run_tool("hidden_refund", '{"order_id": "7"}') == "refunded 7"


async def test_the_search_tools_step_returns_the_discovered_tools_as_json() -> None:
    output = await run_tool("search_tools", '{"queries": ["refund"]}')
    assert output == '{"discovered_tools":[{"name":"hidden_refund"}]}'


@pytest.mark.parametrize(
    ("tool_name", "arguments", "message"),
    [
        ("retry_me", "{}", "please give an order ID"),
        ("retry_without_budget", "{}", "no budget left"),
        ("fail_me", "{}", "the order is locked"),
    ],
    ids=["model-retry", "out-of-retries", "tool-failed"],
)
async def test_failures_the_model_should_see_raise_tool_execution_error(
    tool_name: str, arguments: str, message: str
) -> None:
    with pytest.raises(ToolExecutionError) as raised:
        await run_tool(tool_name, arguments)
    assert raised.value.message == message


async def test_an_external_tool_defers_its_result_to_outside_the_session() -> None:
    with pytest.raises(ToolResultDeferredError):
        await run_tool("external_lookup")


async def test_an_approved_external_tool_defers_its_result_and_nothing_runs() -> None:
    with pytest.raises(ToolResultDeferredError):
        await run_tool("external_lookup", policy=APPROVAL)


async def test_a_tool_raising_approval_required_asks_for_approval_not_a_failure() -> None:
    with pytest.raises(ToolApprovalRequestedError):
        await run_tool("asks_first", '{"path": ".env"}')


async def test_a_tool_that_asked_for_approval_runs_once_approved_and_sees_it() -> None:
    assert await run_tool("asks_first", '{"path": ".env"}', policy=APPROVAL) == "deleted .env"


async def test_a_tool_asking_again_after_approval_asks_again_and_the_session_decides() -> None:
    with pytest.raises(ToolApprovalRequestedError):
        await run_tool("ask_approval", policy=APPROVAL)


async def test_invalid_arguments_fail_with_the_validation_errors() -> None:
    with pytest.raises(ToolExecutionError) as raised:
        await run_tool("whoami", '{"order_id": "seven"}')
    assert "int_parsing" in raised.value.message


async def test_an_unknown_tool_fails_with_pydantic_ais_answer() -> None:
    with pytest.raises(ToolExecutionError) as raised:
        await run_tool("no_such_tool")
    assert "Unknown tool name: 'no_such_tool'" in raised.value.message


async def test_call_deferred_defers_the_result_to_outside_the_session() -> None:
    with pytest.raises(ToolResultDeferredError):
        await run_tool("defer_me")


async def test_a_sub_agents_model_error_escaping_the_tool_is_a_step_failure() -> None:
    with pytest.raises(UnexpectedModelBehavior):
        await run_tool("sub_agent")


async def test_any_other_exception_is_a_step_failure() -> None:
    with pytest.raises(ValueError, match="disk full"):
        await run_tool("crash")


async def test_an_agent_already_listing_deferred_tool_requests_runs_its_tool_steps_unchanged() -> None:
    agent = Agent(FunctionModel(never_called), output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def ping() -> str:
        return "pong"

    execution = make_tool_execution("ping", tool_call=make_tool_call("c", "ping", status=ToolCallStatus.PENDING))
    assert (await PydanticAIRunner(agent).execute_deferred_tool_call(execution)).output == "pong"


async def test_an_async_deps_factory_is_awaited() -> None:
    async def make_deps(session_id: str) -> Deps:
        return Deps(session_id=f"async {session_id}")

    execution = make_tool_execution("whoami", '{"order_id": 1}', flow_id="s")
    output = (await PydanticAIRunner(AGENT, deps_factory=make_deps).execute_deferred_tool_call(execution)).output
    assert "deps=async s" in output
