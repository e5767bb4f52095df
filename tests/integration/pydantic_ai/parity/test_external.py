"""Parity of results from outside: an ``ExternalToolset`` tool or a tool raising ``CallDeferred``.

A plain run ends with ``DeferredToolRequests`` and is resumed with
``DeferredToolResults(calls={id: value})`` (or ``ModelRetry`` for an error); a
session waits for ``submit_tool_result`` with the same answer. The model must
see the same either way.
"""

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pydantic_ai import Agent, ApprovalRequired, CallDeferred, DeferredToolRequests, ExternalToolset, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolReturnPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import ToolDefinition

from tests.integration.pydantic_ai.parity.harness import (
    Case,
    ExternalError,
    ParityStack,
    Scenario,
    ScenarioSet,
    check_parity,
)
from tests.integration.pydantic_ai.parity.probe import Probe, calls, text, turn_step

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

SCENARIOS = ScenarioSet()

SPLIT = (
    "stored history: a plain run stores the returns of the calls that ran in a request of their own, "
    "before the request with the deferred results; a session stores one request (the model sees the same)"
)


ONE_DEFERRAL_EVENT_PER_STEP = {
    "events": "events: a tool asking approval itself and a tool raising CallDeferred are each found in their own "
    "tool Step, so each shows a DeferredToolRequestsEvent of its own where a plain run shows one with both"
}


def _seen(messages: list[ModelMessage]) -> str:
    parts = messages[-1].parts
    return repr([(part.outcome, part.content) for part in parts if isinstance(part, ToolReturnPart)])


def _inventory_agent(probe: Probe, *asked: tuple[str, str, dict[str, Any]]) -> Agent[None, Any]:
    """An agent whose model asks for the external ``inventory`` calls ``asked``, then answers what it was given."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            return calls(*asked)
        return text(_seen(messages))

    schema = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
    return Agent(
        probe.model(respond),
        output_type=[str, DeferredToolRequests],
        toolsets=[ExternalToolset([ToolDefinition(name="inventory", parameters_json_schema=schema)])],
        capabilities=probe.capabilities,
    )


@SCENARIOS.scenario()
def an_external_tools_result_reaches_the_model_as_its_value(probe: Probe) -> Scenario:
    agent = _inventory_agent(probe, ("c1", "inventory", {"sku": "A-7"}), ("c2", "inventory", {"sku": "B-2"}))

    def answer(call: object) -> object:
        return {"stock": 3, "sku": "A-7"} if getattr(call, "tool_call_id", None) == "c1" else [1, True, None]

    return Scenario(agent=agent, turns=["how many A-7 and B-2?"], external=answer)


@SCENARIOS.scenario()
def an_external_tools_error_reaches_the_model_as_retry_feedback(probe: Probe) -> Scenario:
    agent = _inventory_agent(probe, ("c1", "inventory", {"sku": "A-7"}))
    return Scenario(
        agent=agent, turns=["how many A-7?"], external=lambda _call: ExternalError("the warehouse is closed")
    )


def _deferring(probe: Probe, *, beside: bool) -> Scenario:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            first = ("c1", "start_job", {"name": "report"})
            return calls(first, ("c2", "now", {})) if beside else calls(first)
        return text(_seen(messages))

    agent = Agent(probe.model(respond), output_type=[str, DeferredToolRequests], capabilities=probe.capabilities)

    @agent.tool_plain
    def start_job(name: str) -> str:
        probe.invoked("start_job", name=name)
        raise CallDeferred

    @agent.tool_plain
    def now() -> str:
        probe.invoked("now")
        return "noon"

    return Scenario(agent=agent, turns=["run the report"], external=lambda _call: 42)


@SCENARIOS.scenario()
def a_tool_raising_call_deferred_waits_for_its_result(probe: Probe) -> Scenario:
    return _deferring(probe, beside=False)


@SCENARIOS.scenario(xfail=SPLIT)
def a_call_deferred_beside_a_call_that_ran(probe: Probe) -> Scenario:
    return _deferring(probe, beside=True)


def _hitl(probe: Probe, *, approve: bool | str, beside: bool = True) -> Scenario:
    """The durable suites' ``hitl_agent``: a tool asking approval itself (beside a tool raising ``CallDeferred``)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if turn_step(messages) == 0:
            first = ("c1", "delete_file", {"path": ".env"})
            return calls(first, ("c2", "create_file", {"path": "test.txt"})) if beside else calls(first)
        return text(_seen(messages))

    agent = Agent(
        probe.model(respond),
        name="hitl_agent",
        output_type=[str, DeferredToolRequests],
        instructions="Just call tools without asking for confirmation.",
        capabilities=probe.capabilities,
    )

    @agent.tool
    async def create_file(ctx: RunContext[None], path: str) -> None:
        probe.invoked("create_file", path=path)
        raise CallDeferred

    @agent.tool
    async def delete_file(ctx: RunContext[None], path: str) -> bool:
        probe.invoked("delete_file", path=path, approved=ctx.tool_call_approved)
        if not ctx.tool_call_approved:
            raise ApprovalRequired
        return True

    return Scenario(
        agent=agent,
        turns=["Delete the file `.env` and create `test.txt`"],
        decide=lambda _call: approve,
        external=lambda _call: "Success",
    )


@SCENARIOS.scenario(xfail=ONE_DEFERRAL_EVENT_PER_STEP)
def a_tool_asking_approval_itself_beside_a_deferred_call(probe: Probe) -> Scenario:
    return _hitl(probe, approve=True)


@SCENARIOS.scenario(xfail=ONE_DEFERRAL_EVENT_PER_STEP)
def a_tool_asking_approval_itself_denied(probe: Probe) -> Scenario:
    return _hitl(probe, approve="Not that file.")


@SCENARIOS.scenario()
def a_tool_asking_approval_itself_denied_without_a_message(probe: Probe) -> Scenario:
    return _hitl(probe, approve=False, beside=False)


@SCENARIOS.scenario()
def a_tool_asking_approval_itself_runs_again_once_approved(probe: Probe) -> Scenario:
    return _hitl(probe, approve=True, beside=False)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack() -> AsyncIterator[ParityStack]:
    async with ParityStack(SCENARIOS) as served:
        yield served


@pytest.mark.parametrize("case", SCENARIOS.params())
async def test_a_session_behaves_like_a_plain_run(stack: ParityStack, case: Case) -> None:
    await check_parity(stack, case)
