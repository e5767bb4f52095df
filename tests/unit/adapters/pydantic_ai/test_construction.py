"""Building the runner and the Flow: what agents are refused, options, WrapperAgent, the public API."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, DeferredToolRequests, RunContext
from pydantic_ai.agent import AbstractAgent, WrapperAgent
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering, Instrumentation
from pydantic_ai.durable_exec import BaseDurabilityCapability, DurabilityEngineSpec, DurableOperationBackend
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

import dex_agents.adapters.pydantic_ai as adapter
from dex_agents import AgentMessage, AgentSessionFlow, ToolCallsRequested, ToolEffect, ToolPolicy, TurnCompleted
from dex_agents.adapters.pydantic_ai import (
    IDEMPOTENCY_KEY_METADATA_KEY,
    PydanticAIRunner,
    deferred_tool_idempotency_key,
    pydantic_ai_session_flow,
)
from dex_agents.testing import make_tool_execution, make_turn_context
from tests.unit.adapters.pydantic_ai.scripted_model import ScriptedModel, call, script
from tests.unit.adapters.pydantic_ai.support import SessionDriver


class Answer(BaseModel):
    text: str


def test_the_public_api_is_pinned() -> None:
    assert sorted(adapter.__all__) == [
        "IDEMPOTENCY_KEY_METADATA_KEY",
        "PydanticAIRunner",
        "ReconcileCall",
        "deferred_tool_idempotency_key",
        "pydantic_ai_session_flow",
        "reconcile_probe",
        "run_messages",
    ]


def validated_agent(output_type: Any) -> Agent[None, Any]:
    agent: Agent[None, Any] = Agent("test", output_type=output_type)

    @agent.output_validator
    def check(output: Any) -> Any:
        return output

    return agent


def test_output_validators_without_deferred_tool_requests_are_accepted() -> None:
    PydanticAIRunner(validated_agent(Answer))


def test_a_wrapper_agent_around_output_validators_is_run_as_a_copy_that_adds_deferred_tool_requests() -> None:
    inner = validated_agent(str)
    agent = WrapperAgent(WrapperAgent(inner))
    runner = PydanticAIRunner(agent)
    run_agent = runner._run_agent
    assert isinstance(run_agent, WrapperAgent)
    assert run_agent is not agent
    assert run_agent.output_type == [str, DeferredToolRequests]
    assert inner.output_type is str
    assert isinstance(agent.wrapped, WrapperAgent)
    assert agent.wrapped.wrapped is inner


def test_output_validators_with_deferred_tool_requests_are_accepted() -> None:
    PydanticAIRunner(validated_agent([Answer, DeferredToolRequests]))


class FakeDurability(BaseDurabilityCapability[Any]):
    """A durability capability that skips binding (no engine backend is needed to be refused)."""

    engine_spec: ClassVar[DurabilityEngineSpec] = DurabilityEngineSpec(
        engine_name="Fake", durable_unit_noun="unit", durable_container_noun="box"
    )

    def for_agent(self, agent: AbstractAgent[Any, Any]) -> "FakeDurability":
        return self

    @property
    def in_durable_context(self) -> bool:
        return False

    def get_durable_operation_backend(self) -> DurableOperationBackend[Any]:
        raise NotImplementedError


def test_an_agent_with_a_durability_capability_is_refused_with_a_clear_message() -> None:
    agent = Agent("test", name="orders", capabilities=[FakeDurability()])
    with pytest.raises(ValueError, match=r"uses Pydantic AI durable execution \(FakeDurability\); do not combine"):
        pydantic_ai_session_flow(agent, flow_type="Orders")


@dataclass
class WrapsEverything(AbstractCapability[Any]):
    def get_ordering(self) -> CapabilityOrdering:
        return CapabilityOrdering(position="outermost", wraps=(AbstractCapability,))


def test_a_capability_that_also_wraps_everything_from_outermost_is_refused() -> None:
    with pytest.raises(ValueError, match="capability ordering conflicts with the model Step capability"):
        PydanticAIRunner(Agent("test", capabilities=[WrapsEverything()]))


def test_an_agent_with_another_outermost_capability_is_accepted() -> None:
    PydanticAIRunner(Agent("test", capabilities=[Instrumentation()]))


def test_the_flow_builder_maps_every_option() -> None:
    policies = {"find_order": ToolPolicy(ToolEffect.READ)}
    flow = pydantic_ai_session_flow(
        Agent("test"),
        flow_type="OrderAgent",
        tool_policies=policies,
        default_tool_effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        interrupt_deadline=timedelta(minutes=5),
        event_stream_capacity_bytes=1024,
    )
    assert isinstance(flow, AgentSessionFlow)
    assert flow.get_flow_type() == "OrderAgent"
    assert isinstance(flow.runner, PydanticAIRunner)
    assert dict(flow.options.tool_policies) == policies
    assert flow.options.default_tool_effect is ToolEffect.NON_IDEMPOTENT_WRITE
    assert flow.options.interrupt_deadline == timedelta(minutes=5)
    assert flow.options.event_stream_capacity_bytes == 1024


def test_the_flow_builder_defaults_match_the_core() -> None:
    flow = pydantic_ai_session_flow(Agent("test"), flow_type="OrderAgent")
    assert flow.options.tool_policies == {}
    assert flow.options.default_tool_effect is ToolEffect.UNCLASSIFIED
    assert flow.options.interrupt_deadline is None
    assert flow.options.event_stream_capacity_bytes == 10 * 1024 * 1024


class LoggingAgent(WrapperAgent[None, str]):
    """A wrapper that records the keyword arguments of every run."""

    runs: ClassVar[list[list[str]]] = []

    async def run(self, *args: Any, **kwargs: Any) -> Any:
        self.runs.append(sorted(k for k, v in kwargs.items() if v is not None))
        return await super().run(*args, **kwargs)


async def test_a_wrapper_agent_runs_model_steps_and_tool_steps_through_its_own_run() -> None:
    model = ScriptedModel()
    inner: Agent[None, str] = Agent(model.model())

    @inner.tool
    def find_order(ctx: RunContext[None], order_id: str) -> str:
        return f"delivered key={deferred_tool_idempotency_key(ctx)}"

    LoggingAgent.runs.clear()
    turn = await SessionDriver(PydanticAIRunner(LoggingAgent(inner))).turn(
        script([call("c1", "find_order", order_id="7")])
    )
    assert turn.completed.new_messages[-1].text == "find_order[success]=delivered key=session-1/turn-1/c1"
    assert len(LoggingAgent.runs) == 3
    assert "capabilities" in LoggingAgent.runs[0]
    assert "metadata" in LoggingAgent.runs[1]
    assert all("conversation_id" in run for run in LoggingAgent.runs)


async def test_the_model_argument_replaces_the_agents_model_in_every_step() -> None:
    model = ScriptedModel()
    agent: Agent[None, str] = Agent()

    @agent.tool_plain
    def find_order(order_id: str) -> str:
        return "delivered"

    runner = PydanticAIRunner(agent, model=model.model())
    turn = await SessionDriver(runner).turn(script([call("c1", "find_order", order_id="7")]))
    assert turn.completed.new_messages[-1].text == "find_order[success]=delivered"


async def test_deps_factory_runs_with_the_session_id_before_every_model_and_tool_step() -> None:
    built: list[str] = []

    def deps_factory(session_id: str) -> str:
        built.append(session_id)
        return f"deps of {session_id}"

    model = ScriptedModel()
    agent: Agent[str, str] = Agent(model.model(), deps_type=str)

    @agent.instructions
    def instructions(ctx: RunContext[str]) -> str:
        return f"Serve {ctx.deps}."

    @agent.tool
    def whose(ctx: RunContext[str]) -> str:
        return ctx.deps

    turn = await SessionDriver(PydanticAIRunner(agent, deps_factory=deps_factory), session_id="s-1").turn(
        script([call("c1", "whose")], "@context")
    )
    assert built == ["s-1", "s-1", "s-1"]
    assert turn.record("c1").output == "deps of s-1"
    assert '"instructions": "Serve deps of s-1."' in (turn.completed.new_messages[-1].text or "")


def test_the_idempotency_key_is_none_outside_a_tool_step() -> None:
    context = RunContext[None](deps=None, model=TestModel(), usage=RunUsage(), metadata={"other": 1})
    assert deferred_tool_idempotency_key(context) is None
    keyed = RunContext[None](
        deps=None, model=TestModel(), usage=RunUsage(), metadata={IDEMPOTENCY_KEY_METADATA_KEY: "s/t/c"}
    )
    assert deferred_tool_idempotency_key(keyed) == "s/t/c"


async def test_a_runner_is_stateless_between_calls_so_a_step_can_run_again() -> None:
    model = ScriptedModel()
    agent: Agent[None, str] = Agent(model.model())

    @agent.tool_plain
    def find_order(order_id: str) -> str:
        return "delivered"

    runner = PydanticAIRunner(agent)
    user = AgentMessage.stored(
        runner.build_user_message(script([call("c1", "find_order", order_id="7")])), sequence=1, turn_id="turn-1"
    )
    first = await runner.run_model_step(make_turn_context(messages=[user]))
    again = await runner.run_model_step(make_turn_context(messages=[user], attempt=2))
    assert isinstance(first, ToolCallsRequested)
    assert isinstance(again, ToolCallsRequested)
    assert first.tool_calls == again.tool_calls
    execution = make_tool_execution("find_order", '{"order_id": "7"}')
    assert (await runner.execute_deferred_tool_call(execution)).output == "delivered"
    assert (await runner.execute_deferred_tool_call(execution)).output == "delivered"
    assert not isinstance(first, TurnCompleted)
