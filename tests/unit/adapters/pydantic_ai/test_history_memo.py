"""The parse memo: `load_messages` equals the unmemoized parse, hands out new objects, and stays bounded."""

import pytest
from pydantic import ValidationError
from pydantic_ai import Agent
from pydantic_ai.capabilities import ReinjectSystemPrompt
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from dex_agents import RunnerContractError
from dex_agents.adapters.pydantic_ai import PydanticAIRunner, _history
from dex_agents.adapters.pydantic_ai._history import MessageMemo, load_messages, parse_messages
from tests.unit.adapters.pydantic_ai.scripted_model import ScriptedModel, call, script
from tests.unit.adapters.pydantic_ai.support import SessionDriver

MESSAGES: list[ModelMessage] = [
    ModelRequest(parts=[SystemPromptPart("Be brief."), UserPromptPart("hi")], metadata={"k": {"n": 1}}),
    ModelResponse(
        parts=[TextPart("Checking"), ToolCallPart("find_order", {"order_id": "7"}, tool_call_id="c1")],
        usage=RequestUsage(input_tokens=10, output_tokens=2),
        provider_details={"finish": ["stop"]},
    ),
    ModelRequest(parts=[ToolReturnPart("find_order", "delivered", tool_call_id="c1")]),
    ModelResponse(parts=[TextPart("Delivered.")]),
]


def item(*messages: ModelMessage) -> str:
    return ModelMessagesTypeAdapter.dump_json(list(messages)).decode()


ITEMS = [item(message) for message in MESSAGES]


@pytest.fixture(autouse=True)
def empty_memo(monkeypatch: pytest.MonkeyPatch) -> MessageMemo:
    memo = MessageMemo(_history.MESSAGE_MEMO_MAX_ITEMS)
    monkeypatch.setattr(_history, "MESSAGE_MEMO", memo)
    return memo


@pytest.mark.parametrize(
    "items",
    [
        ITEMS,
        [ITEMS[1], ITEMS[0], ITEMS[1], ITEMS[1]],
        [item(*MESSAGES[:2]), "[]", " [ ] ", ITEMS[3]],
        [],
    ],
    ids=["one-per-item", "repeated-items", "multi-and-empty-items", "none"],
)
def test_cold_and_warm_loads_equal_the_unmemoized_parse(items: list[str], empty_memo: MessageMemo) -> None:
    expected = parse_messages(items)
    assert load_messages(items) == expected
    assert load_messages(items) == expected
    assert len(empty_memo) == len(set(items))


def test_every_load_hands_out_new_message_objects_and_parts_lists() -> None:
    first = load_messages(ITEMS)
    second = load_messages(ITEMS)
    for a, b in zip(first, second, strict=True):
        assert a == b
        assert a is not b
        assert a.parts is not b.parts
        assert a.metadata is None or a.metadata is not b.metadata
    assert isinstance(first[1], ModelResponse)
    assert isinstance(second[1], ModelResponse)
    assert first[1].usage is not second[1].usage


def test_changing_a_loaded_message_does_not_change_the_next_load() -> None:
    request, response, tool_return, _ = load_messages(ITEMS)
    assert isinstance(request, ModelRequest)
    assert isinstance(response, ModelResponse)
    assert isinstance(tool_return, ModelRequest)
    # What Pydantic AI does to history messages during a run: assign fields, replace parts, fill metadata.
    request.run_id = "another-run"
    request.instructions = "changed"
    request.parts = [*request.parts, UserPromptPart("extra")]
    assert request.metadata is not None
    request.metadata["k"]["n"] = 2
    request.metadata["added"] = True
    assert isinstance(tool_return.parts, list)
    tool_return.parts.append(UserPromptPart("appended"))
    response.usage.input_tokens += 5
    assert response.provider_details is not None
    response.provider_details["finish"].append("again")
    assert load_messages(ITEMS) == parse_messages(ITEMS)


def test_the_memo_is_bounded_and_drops_the_least_recently_loaded_text() -> None:
    memo = MessageMemo(2)
    memo.load([ITEMS[0]])
    memo.load([ITEMS[1]])
    memo.load([ITEMS[0]])  # ITEMS[1] is now the least recently loaded
    memo.load([ITEMS[2]])
    assert [text for text, _ in memo.items()] == [ITEMS[0], ITEMS[2]]
    assert memo.load(ITEMS) == parse_messages(ITEMS)
    assert len(memo) == 2
    assert [text for text, _ in memo.items()] == ITEMS[2:]


def test_a_memo_of_size_zero_keeps_nothing_and_still_loads() -> None:
    memo = MessageMemo(0)
    assert memo.load(ITEMS) == parse_messages(ITEMS)
    assert len(memo) == 0


def test_a_bad_item_fails_as_before_and_is_not_memoized(empty_memo: MessageMemo) -> None:
    with pytest.raises(RunnerContractError):
        load_messages([ITEMS[0], '{"kind": "request"}'])
    with pytest.raises(ValidationError):
        load_messages([ITEMS[0], '[{"kind": "nonsense"}]'])
    assert len(empty_memo) == 0


def order_agent(model: ScriptedModel, **kwargs: object) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model.model(), **kwargs)  # type: ignore[call-overload]

    @agent.tool_plain
    def find_order(order_id: str) -> str:
        return "delivered"

    return agent


TURNS = [
    script([call("c1", "find_order", order_id="7")], "Delivered.", name="one"),
    script({"fail": "model down"}, name="two"),
    script([call("c2", "find_order", order_id="8"), call("c3", "find_order", order_id="9")], "@context", name="three"),
    script("@context", name="four"),
]


async def drive(memo: MessageMemo, monkeypatch: pytest.MonkeyPatch, **agent_kwargs: object) -> list[object]:
    monkeypatch.setattr(_history, "MESSAGE_MEMO", memo)
    session = SessionDriver(PydanticAIRunner(order_agent(ScriptedModel(), **agent_kwargs)))
    for text in TURNS:
        await session.turn(text)
    return [(m.role, m.text, m.tool_call_id, m.tool_name) for m in session.messages]


@pytest.mark.parametrize(
    "agent_kwargs",
    [
        {"system_prompt": "Be brief.", "instructions": "Use tools."},
        {"system_prompt": "Be brief.", "capabilities": [ReinjectSystemPrompt(replace_existing=True)]},
    ],
    ids=["reinjected-system-prompt", "agents-own-reinject"],
)
async def test_sessions_run_the_same_with_and_without_the_memo_and_runs_leave_it_unchanged(
    agent_kwargs: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    without = await drive(MessageMemo(0), monkeypatch, **agent_kwargs)
    memo = MessageMemo(1000)
    with_memo = await drive(memo, monkeypatch, **agent_kwargs)
    assert with_memo == without
    assert len(memo) > 0
    # Pydantic AI ran over copies: every memoized text still holds what a fresh parse gives.
    for text, messages in memo.items():
        assert list(messages) == parse_messages([text])
