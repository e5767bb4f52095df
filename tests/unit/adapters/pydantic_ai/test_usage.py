"""A turn's usage and `UsageLimits` across its Steps, held to what a plain ``agent.run`` does.

Each case runs the same agent and script plainly and as a whole session on
the in-memory host (real use cases, the real runner), with and without live
runs.
"""

import dataclasses
import json
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext, UsageLimitExceeded
from pydantic_ai.usage import RunUsage, UsageLimits

from dex_agents import AgentUsage, ToolEffect, ToolPolicy
from dex_agents.adapters.pydantic_ai import PydanticAIRunner
from dex_agents.adapters.pydantic_ai._history import RunState
from dex_agents.adapters.pydantic_ai._usage import agent_usage, copy_usage
from dex_agents.application.next import StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.domain.events import UsageRecordedPayload
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.adapters.pydantic_ai.scripted_model import ScriptedModel, call, script

POLICIES = {name: ToolPolicy(ToolEffect.READ) for name in ("lookup", "delegate")}


def build_agent() -> Agent[None, str]:
    agent: Agent[None, str] = Agent(ScriptedModel().model())
    inner: Agent[None, str] = Agent(ScriptedModel().model())

    @agent.tool_plain
    def lookup(order: str) -> str:
        return f"order {order} delivered"

    @agent.tool
    async def delegate(ctx: RunContext[None], question: str) -> str:
        """Ask a sub-agent, sharing the run's usage."""
        sub = script([call("x", "echo", text=question)], "the sub-agent answers", name="sub")
        return (await inner.run(sub, usage=ctx.usage)).output

    @inner.tool_plain
    def echo(text: str) -> str:
        return text

    return agent


async def session_turn(
    prompt: str, *, usage_limits: UsageLimits | None = None, live_runs: bool = True
) -> InMemorySessionHost:
    runner = PydanticAIRunner(build_agent(), usage_limits=usage_limits, live_runs=live_runs)
    host = InMemorySessionHost(runner, options=AgentSessionOptions(tool_policies=POLICIES))
    await host.drive(await host.start(prompt))
    return host


async def over_the_limits(
    prompt: str, limits: UsageLimits, *, live_runs: bool
) -> tuple[UsageLimitExceeded, InMemorySessionHost]:
    """The error a plain run of ``prompt`` under ``limits`` raises, and the session that ran the turn under them."""
    with pytest.raises(UsageLimitExceeded) as plain:
        await build_agent().run(prompt, usage_limits=limits)
    return plain.value, await session_turn(prompt, usage_limits=limits, live_runs=live_runs)


def model_attempts(host: InMemorySessionHost) -> list[int]:
    return [attempt for step, _, attempt in host.executed if step is StepName.RUN_MODEL]


LIVE = pytest.mark.parametrize("live_runs", [True, False], ids=["live", "resumed"])

TWO_ROUNDS = script([call("l1", "lookup", order="7")], [call("l2", "lookup", order="8")], "done", name="rounds")


@LIVE
async def test_a_request_limit_counts_the_whole_turn_and_fails_it_at_once_with_pydantic_ais_error(
    live_runs: bool,
) -> None:
    plain, host = await over_the_limits(TWO_ROUNDS, UsageLimits(request_limit=2), live_runs=live_runs)

    state = host.state.current
    assert state.last_turn_error == f"pydantic_ai.exceptions.UsageLimitExceeded: {plain}"
    assert state.active_turn_id is None
    assert model_attempts(host) == [1, 1, 1]  # the third model Step fails the turn without another attempt
    assert host.usage.get().model_calls == 2
    note = host.messages.all[-1]
    assert note.text is not None
    assert note.text.startswith("[Dex] The previous turn failed after these tool calls ran:")


@LIVE
async def test_a_sub_agent_sharing_ctx_usage_is_counted_in_the_session_as_in_the_plain_run(live_runs: bool) -> None:
    prompt = script([call("d1", "delegate", question="where is order 7?")], "done", name="delegate")
    plain = await build_agent().run(prompt)

    host = await session_turn(prompt, live_runs=live_runs)

    assert host.state.current.last_turn_error is None
    used, expected = host.usage.get(), agent_usage(plain.usage)
    # Token counts are the test model's estimates of what each request held: not compared here.
    assert (used.model_calls, used.tool_calls) == (expected.model_calls, expected.tool_calls)
    assert used.model_calls == 4  # two of the agent's, two of the sub-agent's
    recorded = [p.recorded for p in host.sink.payloads(UsageRecordedPayload)]
    assert sum((r.model_calls for r in recorded), 0) == 4


@LIVE
async def test_a_request_limit_counts_the_sub_agents_requests_too(live_runs: bool) -> None:
    prompt = script([call("d1", "delegate", question="q")], "done", name="delegate")
    plain, host = await over_the_limits(prompt, UsageLimits(request_limit=3), live_runs=live_runs)

    assert host.state.current.last_turn_error == f"pydantic_ai.exceptions.UsageLimitExceeded: {plain}"
    assert host.usage.get().model_calls == 3


@LIVE
async def test_a_tool_call_limit_fails_the_turn_before_any_of_its_calls_runs(live_runs: bool) -> None:
    prompt = script([call("l1", "lookup", order="7"), call("l2", "lookup", order="8")], "done", name="many")
    plain, host = await over_the_limits(prompt, UsageLimits(tool_calls_limit=1), live_runs=live_runs)

    assert host.state.current.last_turn_error == f"pydantic_ai.exceptions.UsageLimitExceeded: {plain}"
    assert not any(step is StepName.CALL_TOOL for step, _, _ in host.executed)
    assert host.tool_calls.all() == ()


@LIVE
async def test_a_token_limit_passed_by_a_response_fails_the_turn_and_its_usage_is_still_counted(
    live_runs: bool,
) -> None:
    plain, host = await over_the_limits(TWO_ROUNDS, UsageLimits(output_tokens_limit=3), live_runs=live_runs)

    error = host.state.current.last_turn_error
    assert error is not None
    # The count in the message is the test model's estimate, which differs between a streamed and a whole response.
    assert error.startswith("pydantic_ai.exceptions.UsageLimitExceeded: Exceeded the output_tokens_limit of 3 (")
    assert str(plain).startswith("Exceeded the output_tokens_limit of 3 (")
    assert model_attempts(host) == [1]
    assert host.usage.get().model_calls == 1
    assert host.usage.get().output_tokens > 3


@LIVE
async def test_usage_within_the_limits_matches_the_plain_run(live_runs: bool) -> None:
    limits = UsageLimits(request_limit=3, tool_calls_limit=2)
    plain = await build_agent().run(TWO_ROUNDS, usage_limits=limits)

    host = await session_turn(TWO_ROUNDS, usage_limits=limits, live_runs=live_runs)

    assert host.state.current.last_turn_error is None
    used, expected = host.usage.get(), agent_usage(plain.usage)
    assert (used.model_calls, used.tool_calls) == (expected.model_calls, expected.tool_calls) == (3, 2)


def test_a_run_state_keeps_the_turns_usage_and_one_written_without_it_still_reads() -> None:
    usage = RunUsage(requests=2, tool_calls=1, input_tokens=10)
    state = RunState(messages=[], tool_call_ids=["c1"], usage=usage)
    assert RunState.decode(state.encode()).usage == usage
    older: dict[str, Any] = {"tool_call_ids": ["c1"], "messages": "[]"}
    assert RunState.decode(json.dumps(older)).usage is None
    assert agent_usage(RunUsage()) == AgentUsage()


def test_a_copied_usage_has_the_same_fields_and_details_of_its_own() -> None:
    usage = RunUsage(requests=2, tool_calls=3, input_tokens=40, output_tokens=7, details={"thoughts": 5})
    usage.cost = None

    copied = copy_usage(usage)

    assert copied == dataclasses.replace(usage, details=dict(usage.details))
    assert copied.details is not usage.details
    copied.details["thoughts"] += 1
    copied.requests += 1
    assert (usage.details, usage.requests) == ({"thoughts": 5}, 2)
