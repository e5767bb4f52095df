"""The Pydantic AI side of long sessions: the summary in the model's view, old tool results, overflow, summarising."""

from collections.abc import Sequence

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.usage import RequestUsage

from dex_agents import AgentMessage, CompactionSummary, ContextOverflowError, HistoryCompactor, HistorySummary
from dex_agents.adapters.pydantic_ai import PydanticAIRunner, pydantic_ai_session_flow
from dex_agents.adapters.pydantic_ai._compaction import (
    SUMMARY_HEADER,
    default_compaction_policy,
    is_context_overflow,
    model_context_window,
)
from dex_agents.adapters.pydantic_ai._history import framework_message, user_message
from dex_agents.application.compaction import CHARS_PER_TOKEN, MAX_CONTEXT_BYTES, CompactionPolicy
from dex_agents.domain.usage import AgentUsage
from dex_agents.testing import make_turn_context

SEEN: list[list[ModelMessage]] = []


def answering(text: str = "ok") -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        SEEN.append(list(messages))
        return ModelResponse(parts=[TextPart(text)], usage=RequestUsage(input_tokens=11, output_tokens=7))

    return FunctionModel(respond)


def stored(messages: Sequence[ModelMessage], *, first: int = 1, turn: int = 1) -> list[AgentMessage]:
    return [
        AgentMessage.stored(framework_message(m), sequence=first + i, turn_id=f"turn-{turn}")
        for i, m in enumerate(messages)
    ]


def tool_round(call_id: str, output: str) -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart(f"question {call_id}")]),
        ModelResponse(parts=[ToolCallPart("fetch", {"id": call_id}, tool_call_id=call_id)]),
        ModelRequest(parts=[ToolReturnPart("fetch", output, tool_call_id=call_id)]),
        ModelResponse(parts=[TextPart(f"answer {call_id}")]),
    ]


def opening(turn: int, sequence: int) -> AgentMessage:
    return AgentMessage.stored(user_message("go on"), sequence=sequence, turn_id=f"turn-{turn}")


def first_turn() -> AgentMessage:
    return opening(1, 1)


def parts_of(messages: Sequence[ModelMessage], kind: type) -> list:  # type: ignore[type-arg]
    return [part for message in messages for part in message.parts if isinstance(part, kind)]


async def test_the_summary_opens_the_models_history_and_the_agents_history_processors_still_run() -> None:
    processed: list[list[ModelMessage]] = []

    def keep(messages: list[ModelMessage]) -> list[ModelMessage]:
        processed.append(list(messages))
        return messages

    SEEN.clear()
    agent = Agent(answering(), capabilities=[ProcessHistory(keep)])
    earlier = stored([ModelResponse(parts=[TextPart("kept verbatim")])], first=41)
    turn = make_turn_context(
        messages=[*earlier, opening(2, 42)],
        turn_id="turn-2",
        summary=HistorySummary(number=1, through_sequence=40, text="The user wants order 7 refunded."),
    )
    await PydanticAIRunner(agent).run_model_step(turn)
    first_prompt = parts_of(SEEN[-1][:1], UserPromptPart)[0]
    assert first_prompt.content == f"{SUMMARY_HEADER}\nThe user wants order 7 refunded."
    assert "kept verbatim" in [p.content for p in parts_of(SEEN[-1], TextPart)]
    assert processed
    assert parts_of(processed[-1][:1], UserPromptPart)[0].content.startswith(SUMMARY_HEADER)


async def test_old_tool_results_beyond_the_budget_are_shortened_in_the_models_view_only() -> None:
    SEEN.clear()
    big = "x" * 100_000
    history = stored([*tool_round("a", big), *tool_round("b", big), *tool_round("c", big)])
    before = [m.framework_item for m in history]
    turn = make_turn_context(messages=[*history, opening(2, 13)], turn_id="turn-2")
    await PydanticAIRunner(Agent(answering()), tool_result_budget_chars=150_000).run_model_step(turn)
    returns = parts_of(SEEN[-1], ToolReturnPart)
    assert [len(r.content) > 90_000 for r in returns] == [False, False, True]  # the newest stays whole
    assert "this earlier tool result was 100,000 characters; only its first 1,000 are shown" in returns[0].content
    assert returns[0].content.startswith("x" * 1000)
    assert [m.framework_item for m in history] == before  # stored history is unchanged
    SEEN.clear()
    await PydanticAIRunner(Agent(answering()), tool_result_budget_chars=None).run_model_step(turn)
    assert all(len(r.content) == 100_000 for r in parts_of(SEEN[-1], ToolReturnPart))


def test_a_negative_tool_result_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="tool_result_budget_chars"):
        PydanticAIRunner(Agent(answering()), tool_result_budget_chars=-1)


@pytest.mark.parametrize(
    "error",
    [
        ModelContextWindowExceededError("gpt", "too long"),
        ModelHTTPError(400, "gpt", {"error": {"code": "context_length_exceeded"}}),
        ModelHTTPError(400, "claude", {"error": {"message": "prompt is too long: 250000 tokens > 200000 maximum"}}),
    ],
)
async def test_a_provider_refusing_the_context_is_reported_as_a_context_overflow(error: Exception) -> None:
    def refuse(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise error

    assert is_context_overflow(error)
    with pytest.raises(ContextOverflowError):
        await PydanticAIRunner(Agent(FunctionModel(refuse))).run_model_step(make_turn_context(messages=[first_turn()]))


async def test_other_model_errors_are_not_overflows() -> None:
    assert not is_context_overflow(ModelHTTPError(400, "gpt", {"error": "bad tool schema"}))
    assert not is_context_overflow(ModelHTTPError(500, "gpt", "context length"))
    assert not is_context_overflow(RuntimeError("context length"))


async def test_the_default_compactor_asks_the_agents_own_model_without_tools_and_records_usage() -> None:
    requests: list[tuple[list[ModelMessage], AgentInfo]] = []

    def summarise(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append((list(messages), info))
        return ModelResponse(
            parts=[TextPart("  Refund of order 7 done.  ")], usage=RequestUsage(input_tokens=50, output_tokens=9)
        )

    agent = Agent(FunctionModel(summarise))

    @agent.tool_plain
    def fetch(id: str) -> str:
        return "never run"

    runner = PydanticAIRunner(agent)
    assert isinstance(runner, HistoryCompactor)
    result = await runner.compact(stored(tool_round("a", "order 7: refunded")), "Earlier: the user is Ada.")
    assert isinstance(result, CompactionSummary)
    assert result.text == "Refund of order 7 done."
    assert result.usage == AgentUsage(model_calls=1, input_tokens=50, output_tokens=9)
    ((sent, info),) = requests
    assert not info.function_tools
    prompt = parts_of(sent, UserPromptPart)[-1].content
    assert "Earlier: the user is Ada." in prompt
    assert "Tool fetch returned: order 7: refunded" in prompt
    assert "Assistant called fetch" in prompt
    assert parts_of(sent, SystemPromptPart)


async def test_a_custom_compactor_replaces_the_default() -> None:
    class Fixed:
        async def compact(self, messages: Sequence[AgentMessage], previous_summary: str | None) -> str:
            return f"{len(messages)} messages after {previous_summary}"

    runner = PydanticAIRunner(Agent(answering()), compactor=Fixed())
    assert await runner.compact(stored(tool_round("a", "x")), "s1") == "4 messages after s1"


def test_the_default_budget_is_three_quarters_of_the_context_window_pydantic_ai_knows() -> None:
    agent = Agent(TestModel(profile=ModelProfile(context_window=128_000)))
    flow = pydantic_ai_session_flow(agent, flow_type="Agent")
    assert flow.options.compaction == CompactionPolicy(context_budget_tokens=96_000)
    assert flow.options.compaction.budget_bytes == 96_000 * CHARS_PER_TOKEN


def test_the_runners_model_sets_the_default_budget_before_the_agents() -> None:
    agent = Agent(TestModel(profile=ModelProfile(context_window=128_000)))
    model = TestModel(profile=ModelProfile(context_window=32_000))
    flow = pydantic_ai_session_flow(agent, flow_type="Agent", model=model)
    assert flow.options.compaction.context_budget_tokens == 24_000


@pytest.mark.parametrize(
    "model",
    [TestModel(), "test", "no-such-provider:model", None],
    ids=["model-without-a-window", "name-without-a-window", "unknown-name", "no-model"],
)
def test_without_a_known_context_window_the_default_budget_is_the_cores(model: TestModel | str | None) -> None:
    assert model_context_window(model) is None
    assert default_compaction_policy(model) == CompactionPolicy()
    assert default_compaction_policy(model).budget_bytes == MAX_CONTEXT_BYTES


def test_a_window_larger_than_the_engines_limit_keeps_the_cores_cap() -> None:
    policy = default_compaction_policy(TestModel(profile=ModelProfile(context_window=2_000_000)))
    assert policy.context_budget_tokens == 1_500_000
    assert policy.budget_bytes == MAX_CONTEXT_BYTES


def test_an_agents_own_policy_is_kept_whatever_the_window() -> None:
    agent = Agent(TestModel(profile=ModelProfile(context_window=128_000)))
    policy = CompactionPolicy(context_budget_chars=50_000)
    flow = pydantic_ai_session_flow(agent, flow_type="Agent", compaction=policy)
    assert flow.options.compaction is policy
