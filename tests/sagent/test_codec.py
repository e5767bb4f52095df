"""The history codec: every sagent entry round-trips exactly, with the display projection of Pydantic AI's."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sagent.types.runtime import (
    AgentSendMessage,
    AssistantMessage,
    BytesMessage,
    ToolCall,
    ToolResult,
    ToolResultKind,
    UserMessage,
)

from dex_agents import MessageRole
from dex_agents.adapters.sagent import _codec
from dex_agents.adapters.sagent.runner import SagentRunner
from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.messages import AgentMessage
from tests.sagent.order_agent import build_agent

PNG = BytesMessage(b"\x89PNG\r\n\x00\xff", "image/png")

ENTRIES: list[_codec.HistoryEntry] = [
    UserMessage(text="Refund order 7 ✓", attachments=(PNG,), hidden=True),
    AgentSendMessage(source="helper", text="done", attachments=(PNG,)),
    AssistantMessage(
        text="Let me look.",
        thinking_blocks=(
            {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
            {"type": "redacted", "data": "x"},
        ),
        thought_signature="text-signature",
        tool_calls=(
            ToolCall(id="toolu_01", name="find_order", args={"order_id": "7", "deep": {"a": [1, 2.5, None]}}),
            ToolCall(id="call_2", name="Bash", args={"command": "ls"}, thought_signature="call-signature"),
        ),
        parent_id=4,
    ),
    ToolResult(call_id="toolu_01", content="order 7 delivered"),
    ToolResult(
        call_id="call_2",
        content="boom",
        kind=ToolResultKind.CANCELLED,
        is_error=True,
        attachments=(PNG,),
        diff="-a\n+b",
        diff_file_path="/x",
        hint="try again",
        summary="ran ls",
    ),
]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: type(e).__name__)
def test_every_entry_round_trips_to_an_equal_dataclass(entry: _codec.HistoryEntry) -> None:
    decoded = _codec.decode_entry(_codec.encode_entry(entry))
    assert decoded == entry
    assert type(decoded) is type(entry)


texts = st.text(max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts, lambda inner: st.lists(inner, max_size=3), max_leaves=8
)


@given(
    text=texts,
    thinking=st.lists(st.dictionaries(texts, texts, max_size=3), max_size=2),
    signature=texts,
    calls=st.lists(st.tuples(texts, st.dictionaries(texts, json_values, max_size=3), texts), max_size=3),
)
def test_assistant_messages_round_trip_for_any_text_thinking_signatures_and_arguments(
    text: str, thinking: list[dict[str, str]], signature: str, calls: list[tuple[str, dict[str, object], str]]
) -> None:
    message = AssistantMessage(
        text=text,
        thinking_blocks=tuple(thinking),
        thought_signature=signature,
        tool_calls=tuple(
            ToolCall(id=f"c{i}", name=name, args=args, thought_signature=sig)
            for i, (name, args, sig) in enumerate(calls)
        ),
    )
    assert _codec.decode_entry(_codec.encode_entry(message)) == message


def test_the_display_fields_follow_the_pydantic_ai_projection() -> None:
    user, _, assistant, result, _ = ENTRIES
    assert _codec.framework_message(user).role is MessageRole.USER
    assert _codec.framework_message(user).text == "Refund order 7 ✓"
    shown = _codec.framework_message(assistant)
    assert (shown.role, shown.text, shown.tool_call_id, shown.tool_name) == (
        MessageRole.ASSISTANT,
        "Let me look.",
        None,
        None,
    )
    assert shown.tool_call_ids == ("toolu_01", "call_2")
    one = _codec.framework_message(AssistantMessage(tool_calls=(ToolCall(id="a", name="find_order", args={}),)))
    assert (one.text, one.tool_call_id, one.tool_name) == (None, "a", "find_order")
    answered = _codec.framework_message(result, tool_names={"toolu_01": "find_order"})
    assert (answered.role, answered.tool_call_id, answered.tool_name) == (MessageRole.TOOL, "toolu_01", "find_order")


def test_the_tool_state_rides_in_the_item_and_the_newest_one_wins() -> None:
    def stored(sequence: int, item: str) -> AgentMessage:
        return AgentMessage(sequence=sequence, turn_id="turn-1", role=MessageRole.ASSISTANT, framework_item=item)

    reply = AssistantMessage(text="ok")
    messages = [
        stored(1, _codec.encode_entry(reply, tool_state={"bash_cwd": "/a"})),
        stored(2, _codec.encode_entry(reply, tool_state={"bash_cwd": "/b"})),
        stored(3, _codec.encode_entry(reply)),
    ]
    assert _codec.latest_tool_state(messages) == {"bash_cwd": "/b"}
    assert _codec.decode_entry(messages[0].framework_item) == reply
    assert _codec.latest_tool_state(messages[2:]) is None


@pytest.mark.parametrize(
    "item",
    ["not json", "[]", json.dumps({"type": "user", "text": "x"}), json.dumps({"sagent": 1, "type": "what"})],
)
def test_an_item_that_is_not_a_sagent_entry_is_a_contract_error(item: str) -> None:
    with pytest.raises(RunnerContractError):
        _codec.decode_entry(item)


def test_build_user_message_stores_a_user_message_holding_the_text() -> None:
    message = SagentRunner(build_agent).build_user_message("hello")
    assert (message.role, message.text) == (MessageRole.USER, "hello")
    decoded = _codec.decode_entry(message.framework_item)
    assert isinstance(decoded, UserMessage)
    assert decoded.text == "hello"
