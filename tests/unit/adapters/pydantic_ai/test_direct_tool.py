"""The tool Step's direct path gives what the whole agent run gives, and is taken only when nothing else could differ.

Every case runs the same call twice: through the direct path (``direct_tool_calls=True``, the default) and
through an agent run (``direct_tool_calls=False``), and compares the Step's result or error, and what a
context-taking tool saw.
"""

from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import (
    Agent,
    RunContext,
    Tool,
    ToolReturn,
)
from pydantic_ai.agent import WrapperAgent
from pydantic_ai.capabilities import Hooks
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from dex_agents import ToolCallStatus, ToolExecutionError
from dex_agents.adapters.pydantic_ai import PydanticAIRunner, deferred_tool_idempotency_key
from dex_agents.adapters.pydantic_ai._direct_tool import DirectToolCache
from dex_agents.application.runner import ToolApprovalRequestedError, ToolResultDeferredError
from dex_agents.testing import make_tool_call, make_tool_execution
from tests.unit.adapters.pydantic_ai.tool_agents import Deps, add_outcome_tools, never_called


class Receipt(BaseModel):
    order_id: int
    amount: float


SEEN: list[dict[str, object]] = []


def build_agent() -> Agent[Deps, str]:
    agent = Agent(FunctionModel(never_called, model_name="never"), deps_type=Deps)

    @agent.tool
    def whoami(ctx: RunContext[Deps], order_id: int) -> str:
        SEEN.append(
            {
                "deps": ctx.deps,
                "conversation_id": ctx.conversation_id,
                "key": deferred_tool_idempotency_key(ctx),
                "tool_call_id": ctx.tool_call_id,
                "tool_name": ctx.tool_name,
                "retry": ctx.retry,
                "max_retries": ctx.max_retries,
                "approved": ctx.tool_call_approved,
                "prompt": ctx.prompt,
                "messages": [message.parts for message in ctx.messages],
                "model": ctx.model.model_name,
                "requests": ctx.usage.requests,
                "partial_output": ctx.partial_output,
                "run_id_set": bool(ctx.run_id),
            }
        )
        return f"order {order_id}"

    @agent.tool_plain
    def returns_model() -> Receipt:
        return Receipt(order_id=7, amount=12.5)

    @agent.tool_plain
    def returns_tool_return() -> ToolReturn:
        return ToolReturn(return_value="refunded", metadata={"ticket": 9})

    @agent.tool_plain
    def returns_none() -> None:
        return None

    @agent.tool_plain
    async def typed(order_id: int, note: str = "") -> str:
        return f"{order_id}:{note}"

    add_outcome_tools(agent)
    return agent


AGENT = build_agent()


async def run_both(tool_name: str, arguments: str = "{}") -> tuple[object, object]:
    """Return (direct, full): each the Step's output text or the exception it raised."""
    outcomes: list[object] = []
    for direct in (True, False):
        runner = PydanticAIRunner(AGENT, deps_factory=Deps, direct_tool_calls=direct)
        execution = make_tool_execution(tool_name, arguments, tool_call_id="call-1", flow_id="session-9")
        try:
            outcomes.append((await runner.execute_deferred_tool_call(execution)).output)
        except Exception as error:  # noqa: BLE001 - the error is what is compared
            outcomes.append(error)
    return outcomes[0], outcomes[1]


def same_error(direct: object, full: object) -> None:
    assert isinstance(direct, Exception), direct
    assert type(direct) is type(full)
    assert str(direct) == str(full)


def test_a_plain_function_tool_of_a_plain_agent_takes_the_direct_path() -> None:
    assert DirectToolCache(AGENT, None).direct_tool("typed", approved=False) is not None


@pytest.mark.parametrize(
    ("tool_name", "arguments"),
    [
        ("typed", '{"order_id": 7, "note": "rush"}'),
        ("typed", '{"order_id": "7"}'),
        ("returns_structure", "{}"),
        ("returns_model", "{}"),
        ("returns_tool_return", "{}"),
        ("returns_none", "{}"),
    ],
)
async def test_a_successful_call_returns_the_same_text_both_ways(tool_name: str, arguments: str) -> None:
    direct, full = await run_both(tool_name, arguments)

    assert isinstance(direct, str)
    assert direct == full


@pytest.mark.parametrize(
    ("tool_name", "arguments", "error_type"),
    [
        ("retry_me", "{}", ToolExecutionError),
        ("retry_without_budget", "{}", ToolExecutionError),
        ("fail_me", "{}", ToolExecutionError),
        ("ask_approval", "{}", ToolApprovalRequestedError),
        ("defer_me", "{}", ToolResultDeferredError),
        ("crash", "{}", ValueError),
        ("typed", '{"order_id": "seven"}', ToolExecutionError),
        ("typed", '{"note": "no order"}', ToolExecutionError),
        ("typed", "{not json", ToolExecutionError),
        ("typed", "", ToolExecutionError),
        ("no_such_tool", "{}", ToolExecutionError),
    ],
)
async def test_a_failing_call_raises_the_same_error_both_ways(
    tool_name: str, arguments: str, error_type: type[Exception]
) -> None:
    direct, full = await run_both(tool_name, arguments)

    assert isinstance(direct, error_type)
    same_error(direct, full)


async def test_the_tool_sees_the_same_context_both_ways() -> None:
    SEEN.clear()

    direct, full = await run_both("whoami", '{"order_id": 3}')

    assert direct == full == "order 3"
    assert len(SEEN) == 2
    assert SEEN[0]["deps"] == Deps("session-9")
    assert SEEN[0]["key"] is not None
    assert SEEN[0] == SEEN[1]


def plain_agent(**kwargs: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(never_called), **kwargs)

    @agent.tool_plain
    def lookup(order_id: int) -> str:
        return f"order {order_id}"

    return agent


def test_an_agent_with_a_capability_takes_the_full_run() -> None:
    hooks = Hooks[None]()

    @hooks.on.before_tool_execute
    async def before(ctx: RunContext[None], *, call: Any, tool_def: Any, args: Any) -> Any:
        return args

    assert DirectToolCache(plain_agent(capabilities=[hooks]), None).direct_tool("lookup", approved=False) is None


def test_an_agent_with_another_toolset_or_an_event_hook_takes_the_full_run() -> None:
    toolset: FunctionToolset[None] = FunctionToolset()
    with_toolset = plain_agent(toolsets=[toolset])
    with_hook = plain_agent()

    @with_hook.on_event
    async def on_any(ctx: RunContext[None], event: Any) -> None:
        return None

    assert DirectToolCache(with_toolset, None).direct_tool("lookup", approved=False) is None
    assert DirectToolCache(with_hook, None).direct_tool("lookup", approved=False) is None


def test_an_instrumented_agent_takes_the_full_run() -> None:
    agent = plain_agent()
    agent.instrument = True
    everything = plain_agent()
    cache = DirectToolCache(everything, None)
    Agent.instrument_all(True)
    try:
        all_instrumented = cache.direct_tool("lookup", approved=False)
    finally:
        Agent.instrument_all(False)

    assert DirectToolCache(agent, None).direct_tool("lookup", approved=False) is None
    assert all_instrumented is None
    assert cache.direct_tool("lookup", approved=False) is not None


def test_a_wrapped_or_subclassed_agent_takes_the_full_run() -> None:
    class MyAgent(Agent[None, str]):
        pass

    subclassed = MyAgent(FunctionModel(never_called), tools=[Tool(lambda: "x", name="lookup")])

    assert DirectToolCache(WrapperAgent(plain_agent()), None).direct_tool("lookup", approved=False) is None
    assert DirectToolCache(subclassed, None).direct_tool("lookup", approved=False) is None


def test_an_agent_under_override_takes_the_full_run() -> None:
    agent = plain_agent()
    cache = DirectToolCache(agent, None)

    with agent.override(deps=None, model=FunctionModel(never_called)):
        assert cache.direct_tool("lookup", approved=False) is None
    assert cache.direct_tool("lookup", approved=False) is not None


def test_a_tool_with_approval_prepare_deferred_loading_or_a_timeout_takes_the_full_run() -> None:
    async def prepare(ctx: RunContext[None], tool_def: Any) -> Any:
        return tool_def

    def lookup(order_id: int) -> str:
        return str(order_id)

    agent: Agent[None, str] = Agent(
        FunctionModel(never_called),
        tools=[
            Tool(lookup, name="approval", requires_approval=True),
            Tool(lookup, name="prepared", prepare=prepare),
            Tool(lookup, name="deferred", defer_loading=True),
            Tool(lookup, name="timed", timeout=5),
            Tool(lookup, name="plain"),
        ],
    )
    cache = DirectToolCache(agent, None)

    for name in ("approval", "prepared", "deferred", "timed"):
        assert cache.direct_tool(name, approved=False) is None, name
    assert cache.direct_tool("plain", approved=False) is not None
    assert cache.direct_tool("plain", approved=True) is None


def test_an_agent_without_a_model_takes_the_full_run() -> None:
    agent: Agent[None, str] = Agent(None, tools=[Tool(lambda: "x", name="lookup")])

    assert DirectToolCache(agent, None).direct_tool("lookup", approved=False) is None


async def test_an_approved_call_still_runs_through_the_agent_and_sees_the_approval() -> None:
    agent = plain_agent()
    record = make_tool_call("call-1", "lookup", arguments='{"order_id": 4}', status=ToolCallStatus.APPROVED)
    execution = make_tool_execution("lookup", tool_call=record)

    output = (await PydanticAIRunner(agent).execute_deferred_tool_call(execution)).output

    assert output == "order 4"
