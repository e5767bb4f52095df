"""The history cache (parsed stored messages by session and sequence) and the run state's encoded messages.

Loads equal the uncached parse and hand out new objects; a second load of the
same stored messages parses nothing; another session, another text at a
sequence, a compacted window and a restarted Worker never read a wrong entry;
the cache stays within its character budget. A run state encodes to the same
text with and without its cache, and only settled messages come from it.
"""

import json

import attrs
import pytest
from pydantic import ValidationError
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
from pydantic_ai.usage import RequestUsage, RunUsage

from dex_agents import RunnerContractError
from dex_agents.adapters.pydantic_ai import PydanticAIRunner, _history
from dex_agents.adapters.pydantic_ai._history import EncodedMessages, HistoryCache, RunState, parse_messages, replay
from dex_agents.adapters.pydantic_ai._usage import dump_run_usage
from dex_agents.domain.messages import AgentMessage, FrameworkMessage, MessageRole
from tests.unit.adapters.pydantic_ai.scripted_model import ScriptedModel, call, order_agent, script
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


ROLES = [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL, MessageRole.ASSISTANT]


def stored(items: list[str], *, first: int = 1, turn_id: str = "turn-1") -> list[AgentMessage]:
    return [
        AgentMessage.stored(FrameworkMessage(role=role, framework_item=text), sequence=first + offset, turn_id=turn_id)
        for offset, (role, text) in enumerate(zip(ROLES, items, strict=False))
    ]


def copied(message: AgentMessage) -> AgentMessage:
    """The same stored message as another decode gives it: an equal text in a new string object."""
    text = "".join(list(message.framework_item))
    assert text is not message.framework_item
    return attrs.evolve(message, framework_item=text)


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch: pytest.MonkeyPatch) -> HistoryCache:
    cache = HistoryCache(_history.HISTORY_CACHE_CHARACTERS)
    monkeypatch.setattr(_history, "HISTORY_CACHE", cache)
    return cache


@pytest.mark.parametrize(
    "items",
    [ITEMS, [item(*MESSAGES[:2]), "[]", " [ ] ", ITEMS[3]], []],
    ids=["one-per-item", "multi-and-empty-items", "none"],
)
def test_cold_and_warm_loads_equal_the_uncached_parse(items: list[str], empty_cache: HistoryCache) -> None:
    messages = stored(items)
    expected = parse_messages(items)
    assert empty_cache.load("s-1", messages) == expected
    assert empty_cache.load("s-1", messages) == expected
    assert len(empty_cache) == len(items)


def test_a_second_load_of_the_same_stored_messages_is_a_hit_even_from_another_decode(
    empty_cache: HistoryCache,
) -> None:
    messages = stored(ITEMS)
    first = empty_cache.parsed("s-1", messages)
    again = empty_cache.parsed("s-1", [copied(message) for message in messages])
    assert all(a is b for a, b in zip(first, again, strict=True))  # the cached parse, not a new one


def test_only_the_new_messages_of_a_grown_window_are_parsed(empty_cache: HistoryCache) -> None:
    messages = stored(ITEMS)
    earlier = empty_cache.parsed("s-1", messages[:2])
    grown = empty_cache.parsed("s-1", messages)
    assert grown[0] is earlier[0]
    assert grown[1] is earlier[1]
    assert list(grown[2]) == parse_messages([ITEMS[2]])
    assert len(empty_cache) == 4


def test_two_sessions_with_the_same_sequences_never_mix(empty_cache: HistoryCache) -> None:
    one = stored(ITEMS[:2])
    other = stored(ITEMS[2:])  # the same sequences 1 and 2, other texts
    assert empty_cache.load("s-1", one) == parse_messages(ITEMS[:2])
    assert empty_cache.load("s-2", other) == parse_messages(ITEMS[2:])
    assert empty_cache.load("s-1", one) == parse_messages(ITEMS[:2])
    assert sorted(empty_cache.keys()) == [("s-1", 1), ("s-1", 2), ("s-2", 1), ("s-2", 2)]


def test_another_text_at_a_cached_sequence_is_parsed_again_and_replaces_the_entry(empty_cache: HistoryCache) -> None:
    # A session started again under the same ID stores other messages at the same sequences.
    assert empty_cache.load("s-1", stored(ITEMS[:2])) == parse_messages(ITEMS[:2])
    restarted = stored([ITEMS[3], ITEMS[2]])
    assert empty_cache.load("s-1", restarted) == parse_messages([ITEMS[3], ITEMS[2]])
    assert len(empty_cache) == 2
    assert empty_cache.characters == len(ITEMS[3]) + len(ITEMS[2])


def test_a_compacted_window_replays_as_a_fresh_parse_of_the_messages_it_holds(empty_cache: HistoryCache) -> None:
    turn_one = stored(ITEMS, turn_id="turn-1")
    turn_two = stored(ITEMS, first=5, turn_id="turn-2")
    assert replay([*turn_one, *turn_two], "s-1") == parse_messages([*ITEMS, *ITEMS])
    # After a compaction the window starts inside the first turn: the same cached entries, fewer of them.
    window = [*turn_one[2:], *turn_two]
    assert replay(window, "s-1") == parse_messages([*ITEMS[2:], *ITEMS])
    assert len(empty_cache) == 8


def test_a_restarted_worker_parses_again_and_loads_the_same_messages(empty_cache: HistoryCache) -> None:
    messages = stored(ITEMS)
    before = empty_cache.load("s-1", messages)
    empty_cache.clear()
    assert len(empty_cache) == 0
    assert empty_cache.characters == 0
    after = empty_cache.load("s-1", [copied(message) for message in messages])
    assert after == before
    assert len(empty_cache) == 4


def test_every_load_hands_out_new_message_objects_and_parts_lists(empty_cache: HistoryCache) -> None:
    first = empty_cache.load("s-1", stored(ITEMS))
    second = empty_cache.load("s-1", stored(ITEMS))
    for a, b in zip(first, second, strict=True):
        assert a == b
        assert a is not b
        assert a.parts is not b.parts
        assert a.metadata is None or a.metadata is not b.metadata
    assert isinstance(first[1], ModelResponse)
    assert isinstance(second[1], ModelResponse)
    assert first[1].usage is not second[1].usage


def test_changing_a_loaded_message_does_not_change_the_next_load(empty_cache: HistoryCache) -> None:
    request, response, tool_return, _ = empty_cache.load("s-1", stored(ITEMS))
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
    assert empty_cache.load("s-1", stored(ITEMS)) == parse_messages(ITEMS)


def test_the_cache_stays_within_its_characters_and_drops_the_least_recently_used() -> None:
    sizes = [len(text) for text in ITEMS]
    cache = HistoryCache(sizes[0] + sizes[1] + sizes[2])
    messages = stored(ITEMS)
    cache.load("s-1", messages[:2])
    cache.load("s-1", messages[2:3])
    cache.load("s-1", messages[:1])  # sequence 2 is now the least recently used
    cache.load("s-1", messages[3:])
    assert cache.characters <= cache.max_characters
    assert ("s-1", 2) not in set(cache.keys())
    assert cache.keys()[-1] == ("s-1", 4)
    assert cache.load("s-1", messages) == parse_messages(ITEMS)
    assert cache.characters <= cache.max_characters


def test_a_text_longer_than_the_budget_is_loaded_but_not_kept() -> None:
    cache = HistoryCache(min(len(text) for text in ITEMS) - 1)
    assert cache.load("s-1", stored(ITEMS)) == parse_messages(ITEMS)
    assert len(cache) == 0
    assert cache.characters == 0


def test_a_bad_item_fails_as_before_and_is_not_cached(empty_cache: HistoryCache) -> None:
    with pytest.raises(RunnerContractError):
        empty_cache.load("s-1", stored([ITEMS[0], '{"kind": "request"}']))
    with pytest.raises(ValidationError):
        empty_cache.load("s-1", stored([ITEMS[0], '[{"kind": "nonsense"}]']))
    assert len(empty_cache) == 0


TURNS = [
    script([call("c1", "find_order", order_id="7")], "Delivered.", name="one"),
    script({"fail": "model down"}, name="two"),
    script([call("c2", "find_order", order_id="8"), call("c3", "find_order", order_id="9")], "@context", name="three"),
    script("@context", name="four"),
]


async def drive(cache: HistoryCache, monkeypatch: pytest.MonkeyPatch, **agent_kwargs: object) -> list[object]:
    monkeypatch.setattr(_history, "HISTORY_CACHE", cache)
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
async def test_sessions_run_the_same_with_and_without_the_cache_and_runs_leave_it_unchanged(
    agent_kwargs: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    without = await drive(HistoryCache(0), monkeypatch, **agent_kwargs)
    cache = HistoryCache(1_000_000)
    with_cache = await drive(cache, monkeypatch, **agent_kwargs)
    assert with_cache == without
    assert len(cache) > 0
    # Pydantic AI ran over copies: every cached entry still holds what a fresh parse of its text gives.
    for text, messages in cache.items():
        assert list(messages) == parse_messages([text])


def plain_encode(state: RunState) -> str:
    """`RunState.encode` without its cache: one ``json.dumps`` of the whole state, the messages first."""
    messages = ModelMessagesTypeAdapter.dump_json(list(state.messages)).decode()
    body: dict[str, object] = {"messages": messages, "tool_call_ids": list(state.tool_call_ids)}
    if state.usage is not None:
        body["usage"] = dump_run_usage(state.usage)
    return json.dumps(body)


TURN: list[ModelMessage] = [
    ModelRequest(parts=[UserPromptPart('héllo "quoted" \\ \u2028 ✓ 😀')]),
    ModelResponse(parts=[ToolCallPart("find_order", {"order_id": "ü7"}, tool_call_id="c1")]),
    ModelRequest(parts=[ToolReturnPart("find_order", "line\n\tnext", tool_call_id="c1")]),
    ModelResponse(parts=[ToolCallPart("find_order", {"order_id": "8"}, tool_call_id="c2")]),
]


@pytest.fixture
def encoded(monkeypatch: pytest.MonkeyPatch) -> EncodedMessages:
    cache = EncodedMessages(_history.ENCODED_MESSAGES_CHARACTERS)
    monkeypatch.setattr(_history, "ENCODED_MESSAGES", cache)
    return cache


@pytest.mark.parametrize(
    "state",
    [
        RunState(messages=TURN, tool_call_ids=["c2"], usage=RunUsage(requests=2, input_tokens=7)),
        RunState(messages=TURN[:2], tool_call_ids=["c1"]),
        RunState(messages=[], tool_call_ids=[]),
    ],
    ids=["with-usage", "without-usage", "empty"],
)
def test_a_run_state_encodes_to_the_same_text_cold_and_warm(state: RunState, encoded: EncodedMessages) -> None:
    assert state.encode() == plain_encode(state)
    assert state.encode() == plain_encode(state)
    assert RunState.decode(state.encode()) == state


def test_a_run_state_with_its_keys_in_the_order_of_earlier_versions_decodes_the_same(encoded: EncodedMessages) -> None:
    state = RunState(messages=TURN, tool_call_ids=["c2"], usage=RunUsage(requests=2, input_tokens=7))
    earlier = json.dumps(dict(sorted(json.loads(state.encode()).items(), key=lambda item: item[0] != "tool_call_ids")))
    assert earlier.startswith('{"tool_call_ids"')

    assert RunState.decode(earlier) == state


def test_the_next_state_of_a_growing_turn_starts_with_the_last_one_up_to_its_last_request(
    encoded: EncodedMessages,
) -> None:
    first = RunState(messages=TURN[:2], tool_call_ids=["c1"]).encode()
    later = RunState(messages=TURN, tool_call_ids=["c2"]).encode()

    messages_so_far = first[: first.index(']", "tool_call_ids"')]
    assert later.startswith(messages_so_far)
    assert len(messages_so_far) > len(first) - 30


def test_a_growing_turn_reuses_what_it_wrote_of_messages_before_the_last_request(encoded: EncodedMessages) -> None:
    RunState(messages=TURN[:2], tool_call_ids=["c1"]).encode()
    assert len(encoded) == 0  # the opening request is the last request: written afresh next time
    later = RunState(messages=TURN, tool_call_ids=["c2"])
    assert later.encode() == plain_encode(later)
    assert len(encoded) == 2  # the opening request and the first response are settled now


def test_the_last_request_is_written_afresh_so_fields_pydantic_ai_fills_in_are_kept(encoded: EncodedMessages) -> None:
    state = RunState(messages=TURN, tool_call_ids=["c2"])
    state.encode()
    last_request = TURN[2]
    assert isinstance(last_request, ModelRequest)
    last_request.run_id = "filled-in-later"
    try:
        assert state.encode() == plain_encode(state)
        assert "filled-in-later" in state.encode()
    finally:
        last_request.run_id = None


def test_the_encoded_messages_stay_within_their_characters() -> None:
    cache = EncodedMessages(60)
    texts = cache.bodies(TURN)
    assert texts == EncodedMessages(0).bodies(TURN)
    assert len(cache) <= 1
    assert cache.bodies(TURN) == texts
