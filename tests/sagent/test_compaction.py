"""Long sagent sessions on the engine-free host: compaction through sagent's own Compactor, the summary, overflow."""

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from sagent.agent.agent import Agent
from sagent.compaction.summary import SummaryCompactor
from sagent.testing import MockModelCaps
from sagent.types.cost import TokenCost, TokenCount
from sagent.types.exceptions import ContextOverflowError as SagentContextOverflowError
from sagent.types.model import ModelRequest, ModelResponse, PromptTooLongError, RequestTooLargeError
from sagent.types.runtime import AssistantMessage, RuntimeEvent, ToolCall, ToolResult, UserMessage

from dex_agents import AgentMessage, AgentSessionOptions, CompactionPolicy, CompactionSummary, HistoryCompactor
from dex_agents.adapters.sagent import SagentRunner, _codec
from dex_agents.adapters.sagent.runner import (
    TOOL_STATE_LINE,
    SagentCompactionError,
    is_context_overflow,
    split_summary,
)
from dex_agents.application.next import GoTo
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.testing.memory import InMemorySessionHost
from tests.sagent.order_agent import COMPACTION, STATE_ENV, SYSTEM, TOOL_POLICIES, build_agent, invocations, notes_file
from tests.sagent.scripted_model import ScriptedModel, call, script


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(STATE_ENV, str(tmp_path))
    return tmp_path


class Session:
    """One sagent session on the engine-free host."""

    def __init__(self, policy: CompactionPolicy = COMPACTION, factory: Callable[[], Agent] = build_agent) -> None:
        options = AgentSessionOptions(tool_policies=TOOL_POLICIES, compaction=policy)
        self.host = InMemorySessionHost(SagentRunner(factory), options=options)
        self.waiting: tuple[GoTo, ...] = ()

    async def turn(self, text: str) -> AgentSnapshot:
        host = self.host
        if not host.executed:
            self.waiting = await host.drive(await host.start(text))
        else:
            await host.send_user_message(text)
            self.waiting = await host.drive(*self.waiting)
        snapshot = await host.get_agent_snapshot()
        assert snapshot.state is not None
        assert snapshot.state.last_turn_error is None, snapshot.state.last_turn_error
        return snapshot


def answer(snapshot: AgentSnapshot) -> str:
    text = snapshot.messages[-1].text
    assert text is not None
    return text


def stored(*entries: UserMessage | AssistantMessage | ToolResult) -> list[AgentMessage]:
    return [
        AgentMessage.stored(_codec.framework_message(entry), sequence=n, turn_id="turn-1")
        for n, entry in enumerate(entries, start=1)
    ]


# -- the compactor --------------------------------------------------------------------------------------------------


async def test_compact_runs_sagents_summary_compactor_over_the_previous_summary_and_the_messages() -> None:
    runner = SagentRunner(build_agent)
    assert isinstance(runner, HistoryCompactor)
    messages = stored(
        UserMessage(text=script([call("f1", "find_order", order_id="7")], name="one")),
        AssistantMessage(text="", tool_calls=(ToolCall(id="f1", name="find_order", args={"order_id": "7"}),)),
        ToolResult(call_id="f1", content="order 7 delivered"),
        AssistantMessage(text="Order 7 was delivered."),
    )

    result = await runner.compact(messages, "Another language model ...\n\nSummary:\nthe user is Ada")

    assert isinstance(result, CompactionSummary)
    assert result.text.startswith("Another language model was working on this task")  # sagent's continuation
    assert "Summary:\nsummary | the user is Ada | script one | result f1" in result.text
    assert (result.usage.model_calls, result.usage.input_tokens) == (1, 130)
    assert result.usage.cost_usd == pytest.approx(0.003)
    assert invocations().count("model", "@compact") == 1


class NoSummaryModel(MockModelCaps):
    """Answers every request without a ``<summary>``: sagent's compactor falls back."""

    model_id = "no-summary"

    async def buffer(self, request: ModelRequest) -> ModelResponse:
        return await self.stream(request)

    async def stream(
        self, request: ModelRequest, publish: Callable[[RuntimeEvent], None] | None = None
    ) -> ModelResponse:
        return ModelResponse(
            message=AssistantMessage(text="I would rather not."),
            tokens=TokenCount(request=1, response=1),
            spend=TokenCost(),
            stop_reason="model_finished",
        )


def agent_with_own_compactor() -> Agent:
    return Agent(model=ScriptedModel(), system=SYSTEM, compactor=SummaryCompactor(model=NoSummaryModel()))


async def test_the_agents_own_compactor_is_used_and_its_fallback_fails_the_compaction() -> None:
    runner = SagentRunner(agent_with_own_compactor)
    with pytest.raises(SagentCompactionError, match="no summary"):
        await runner.compact(stored(UserMessage(text="hello"), AssistantMessage(text="hi")), None)
    assert invocations().count("model", "@compact") == 0, "the agent's compactor has its own model"


def test_the_summarys_tool_state_line_is_split_off_and_a_cut_one_carries_nothing() -> None:
    assert split_summary(f'{TOOL_STATE_LINE}{{"bash_cwd": "/a"}}\n\nSummary: x') == ("Summary: x", {"bash_cwd": "/a"})
    assert split_summary(f'{TOOL_STATE_LINE}{{"bash_cw\n\nSummary: x') == ("Summary: x", None)
    assert split_summary("Summary: x") == ("Summary: x", None)


def test_sagents_overflow_errors_and_its_models_own_classification_are_context_overflow() -> None:
    class Overflowing(ScriptedModel):
        def is_context_overflow(self, error: Exception) -> bool:
            return "context_length_exceeded" in str(error)

    plain = ScriptedModel()
    assert is_context_overflow(PromptTooLongError(), plain)
    assert is_context_overflow(RequestTooLargeError("32 MB"), plain)
    assert is_context_overflow(SagentContextOverflowError("exhausted"), plain)
    assert not is_context_overflow(RuntimeError("context_length_exceeded"), plain)
    assert is_context_overflow(RuntimeError("context_length_exceeded"), Overflowing())
    assert not is_context_overflow(RuntimeError("rate limited"), Overflowing())


# -- sessions -------------------------------------------------------------------------------------------------------


async def test_a_long_session_compacts_and_the_summary_opens_the_models_request() -> None:
    session = Session()
    await session.turn(script([call("f1", "find_order", order_id="7")], "Order 7 was delivered.", name="one"))
    for n in range(2, 6):
        await session.turn(script(f"answer {n} " + "x" * 400, name=f"turn{n}"))
    snapshot = await session.turn(script("@context", name="last"))

    state = snapshot.state
    assert state is not None
    assert state.summary_count >= 1
    assert invocations().count("model", "@compact") == state.summary_count
    seen = json.loads(answer(snapshot))
    first = seen["users"][0]
    assert first.startswith("Another language model was working on this task")
    assert "script one" in first, "the first turn lives on in the summary"
    assert seen["system"] == SYSTEM
    # Nothing stored was lost: every message is still there, the first turn's included.
    assert state.message_count == len(session.host.messages.all)
    kept = _codec.decode_entry(session.host.messages.all[2].framework_item)
    assert isinstance(kept, ToolResult)
    assert (kept.call_id, kept.content) == ("f1", "order 7 delivered")


async def test_a_provider_overflow_compacts_and_the_retried_model_call_succeeds() -> None:
    session = Session(CompactionPolicy(keep_recent_messages=1))
    await session.turn(script([call("f1", "find_order", order_id="7")], "Order 7 was delivered.", name="one"))

    snapshot = await session.turn(script({"overflow": True, "text": "@context"}, name="two"))

    state = snapshot.state
    assert state is not None
    assert state.summary_count == 1
    assert invocations().count("model", "@compact") == 1
    assert invocations().count("model", "two") == 2, "the refused call, then its retry after the compaction"
    seen = json.loads(answer(snapshot))
    assert "Summary:\n" in seen["users"][0]


async def test_the_tool_state_outlives_a_compaction_of_the_turn_that_read_the_file(state_dir: Path) -> None:
    target = notes_file(state_dir)
    session = Session()
    await session.turn(script([call("r1", "Read", file_path=str(target))], "read it", name="read"))
    for n in range(2, 6):
        await session.turn(script(f"answer {n} " + "x" * 400, name=f"turn{n}"))
    before = (await session.host.get_agent_snapshot()).state
    assert before is not None
    assert before.summary_count >= 1

    snapshot = await session.turn(script([call("w1", "Write", file_path=str(target), content="bye\n")], name="w"))

    assert answer(snapshot).startswith("Write[ok]="), answer(snapshot)
    assert target.read_text() == "bye\n"
