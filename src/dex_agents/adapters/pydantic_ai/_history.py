"""Pydantic AI messages as stored session messages, the turn replay and the run state.

Storage: every Pydantic AI `ModelMessage` is one session message whose
``framework_item`` is a JSON array holding that one message (`dump_message`;
the storage form and the Worker's caches of it are
`dex_agents.adapters.pydantic_ai._message_cache`'s). Display projection:

| Pydantic AI message                   | role          | display fields                          |
|---------------------------------------|---------------|-----------------------------------------|
| a user prompt or turn-failure note    | ``user``      | ``text``                                |
| ``ModelResponse``                     | ``assistant`` | ``text`` from its text parts; ``tool_*`` |
|                                       |               | when it holds exactly one tool call     |
| ``ModelRequest`` with tool returns    | ``tool``      | ``tool_*`` for exactly one tool return  |
| any other ``ModelRequest``            | ``user``      | none                                    |

Replay: each earlier turn is replayed as stored. A turn whose second stored
message is a ``ModelRequest`` holding a user prompt and no display text is the
turn's opening request as the run sent it (with the first turn's system
prompts, or with the ``instructions`` the model saw); it replays in place of
the turn's user message, which it already contains. An opening request holding
nothing but the prompt is not stored again.

Run state: the turn's messages so far plus the IDs of the calls the last model
response requested, and the turn's usage so far, as JSON text (see `RunState`).

History cache: `replay` and `turn_prompt` read through `HISTORY_CACHE`, so a
model Step parses only the stored messages that are new to this Worker;
`RunState.encode` writes through `ENCODED_MESSAGES`.
"""

import json
from collections.abc import Iterable, Sequence
from itertools import groupby

import attrs
from pydantic_ai import ModelMessagesTypeAdapter
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.usage import RunUsage

from dex_agents.adapters.pydantic_ai._message_cache import EncodedMessages as EncodedMessages
from dex_agents.adapters.pydantic_ai._message_cache import HistoryCache as HistoryCache
from dex_agents.adapters.pydantic_ai._message_cache import dump_message as dump_message
from dex_agents.adapters.pydantic_ai._message_cache import fresh_copy
from dex_agents.adapters.pydantic_ai._message_cache import load_messages as load_messages
from dex_agents.adapters.pydantic_ai._message_cache import parse_messages as parse_messages
from dex_agents.adapters.pydantic_ai._usage import dump_run_usage, load_run_usage
from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.messages import AgentMessage, FrameworkMessage, MessageRole

UserPrompt = str | Sequence[UserContent]
"""What a `UserPromptPart` holds."""


HISTORY_CACHE_CHARACTERS = 32 * 1024 * 1024
"""Characters of ``framework_item`` text a Worker process keeps parsed (memory: a few times that, full)."""

HISTORY_CACHE = HistoryCache(HISTORY_CACHE_CHARACTERS)
"""The per-process cache `replay` and `turn_prompt` read through."""


def user_message(prompt: str) -> FrameworkMessage:
    """Return the stored form of a user prompt (a turn's opening text or a turn-failure note)."""
    request = ModelRequest(parts=[UserPromptPart(prompt)])
    return FrameworkMessage(role=MessageRole.USER, framework_item=dump_message(request), text=prompt)


def framework_message(message: ModelMessage) -> FrameworkMessage:
    """Return the stored form of a message a run produced, with its display projection.

    The ``framework_item`` is `dump_message`'s text; a message a live run's run state already wrote takes it
    from `ENCODED_MESSAGES` (the same text).
    """
    item = ENCODED_MESSAGES.item(message) or dump_message(message)
    if isinstance(message, ModelResponse):
        calls = [part for part in message.parts if isinstance(part, ToolCallPart)]
        call = calls[0] if len(calls) == 1 else None
        return FrameworkMessage(
            role=MessageRole.ASSISTANT,
            framework_item=item,
            text=message.text,
            tool_call_id=None if call is None else call.tool_call_id,
            tool_name=None if call is None else call.tool_name,
            tool_call_ids=tuple(part.tool_call_id for part in calls),
        )
    returns = [part for part in message.parts if isinstance(part, ToolReturnPart)]
    if not returns:
        return FrameworkMessage(role=MessageRole.USER, framework_item=item)
    answer = returns[0] if len(returns) == 1 else None
    # A user message steered into the turn travels in the request that carries the tool results.
    steered = [
        part.content for part in message.parts if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    return FrameworkMessage(
        role=MessageRole.TOOL,
        framework_item=item,
        text="\n\n".join(steered) or None,
        tool_call_id=None if answer is None else answer.tool_call_id,
        tool_name=None if answer is None else answer.tool_name,
        tool_call_ids=tuple(part.tool_call_id for part in returns),
    )


def turn_prompt(message: AgentMessage, session_id: str) -> UserPrompt:
    """Return the user prompt of a turn's stored user message (of session ``session_id``).

    Raises:
        RunnerContractError: the message is not a Pydantic AI user prompt.
    """
    (parsed,) = HISTORY_CACHE.parsed(session_id, [message])
    for loaded in parsed:
        if isinstance(loaded, ModelRequest):
            for part in loaded.parts:
                if isinstance(part, UserPromptPart):
                    return part.content
    raise RunnerContractError(f"stored message {message.sequence!r} holds no Pydantic AI user prompt")


def is_bare_prompt(message: ModelMessage, prompt: UserPrompt) -> bool:
    """Whether ``message`` is a request holding nothing but ``prompt``: the stored user message says it all.

    A request that carried ``instructions`` is not bare: the model saw them, so the stored turn keeps it.
    """
    if not isinstance(message, ModelRequest) or len(message.parts) != 1 or message.instructions is not None:
        return False
    part = message.parts[0]
    return isinstance(part, UserPromptPart) and part.content == prompt


def replay(messages: Sequence[AgentMessage], session_id: str) -> list[ModelMessage]:
    """Return the Pydantic AI history of stored messages of session ``session_id`` (whole turns, in sequence order)."""
    parsed = HISTORY_CACHE.parsed(session_id, messages)
    kept: list[tuple[ModelMessage, ...]] = []
    index = 0
    for _turn_id, grouped in groupby(messages, key=lambda message: message.turn_id):
        size = len(list(grouped))
        turn = parsed[index : index + size]
        if size >= 2 and _is_stored_opening_request(messages[index + 1], turn[1]):
            turn = turn[1:]
        kept.extend(turn)
        index += size
    return [fresh_copy(message) for messages_of in kept for message in messages_of]


def _is_stored_opening_request(message: AgentMessage, parsed: Sequence[ModelMessage]) -> bool:
    if message.role is not MessageRole.USER or message.text is not None:
        return False
    return any(
        isinstance(loaded, ModelRequest) and any(isinstance(part, UserPromptPart) for part in loaded.parts)
        for loaded in parsed
    )


ENCODED_MESSAGES_CHARACTERS = 32 * 1024 * 1024
"""Characters a Worker process keeps by message object: each message's run-state text and its ``framework_item``
(so about 16 Mi characters of run-state text)."""

ENCODED_MESSAGES = EncodedMessages(ENCODED_MESSAGES_CHARACTERS)
"""The per-process cache `RunState.encode` writes through."""


def _message_tuple(messages: Iterable[ModelMessage]) -> tuple[ModelMessage, ...]:
    return tuple(messages)


def _id_tuple(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(ids)


@attrs.frozen(kw_only=True)
class RunState:
    """What a model Step hands the next one: the turn's messages and the calls to answer."""

    messages: tuple[ModelMessage, ...] = attrs.field(converter=_message_tuple)
    """Every Pydantic AI message of the turn so far, its opening request first."""
    tool_call_ids: tuple[str, ...] = attrs.field(converter=_id_tuple)
    """The calls the last model response requested, in model order."""
    usage: RunUsage | None = None
    """The turn's usage up to that response (its tools not yet run); ``None`` in a state written before it was kept."""
    output_call_ids: tuple[str, ...] = attrs.field(default=(), converter=_id_tuple)
    """The output tool calls of that response the model Step's run did not process (it ran without them):
    the resumed run processes them with the calls' results, as a plain run does under ``end_strategy``
    ``'graceful'`` or ``'exhaustive'``."""

    def encode(self) -> str:
        """Return the state as JSON text: ``{"messages": "<JSON array>", "tool_call_ids": [...], "usage": {...}}``.

        ``"output_call_ids": [...]`` follows when there are any.

        The messages come first: the next Step's state starts with the same text, which is what the
        engine's store keeps instead of writing it again (`dex_agents.infrastructure.dex.run_state_parts`).
        The text is ``json.dumps`` of that object, with the messages as
        ``ModelMessagesTypeAdapter.dump_json`` writes them; each message's part
        of it comes from `ENCODED_MESSAGES` when that holds the same message
        object (see `EncodedMessages`). A state written with the keys in another order (earlier versions
        put ``tool_call_ids`` first) decodes the same.
        """
        messages = '"[' + ",".join(ENCODED_MESSAGES.bodies(self.messages)) + ']"'
        ids = json.dumps(list(self.tool_call_ids))
        usage = "" if self.usage is None else f', "usage": {json.dumps(dump_run_usage(self.usage))}'
        outputs = f', "output_call_ids": {json.dumps(list(self.output_call_ids))}' if self.output_call_ids else ""
        return f'{{"messages": {messages}, "tool_call_ids": {ids}{usage}{outputs}}}'

    @classmethod
    def decode(cls, text: str) -> "RunState":
        """Read a state `encode` wrote.

        Raises:
            RunnerContractError: ``text`` is not such a state.
        """
        try:
            loaded = json.loads(text)
            ids = loaded["tool_call_ids"]
            messages = ModelMessagesTypeAdapter.validate_json(loaded["messages"])
            usage = None if loaded.get("usage") is None else load_run_usage(loaded["usage"])
            outputs = loaded.get("output_call_ids", [])
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise RunnerContractError(f"not a Pydantic AI run state: {text[:60]!r}") from error
        for listed in (ids, outputs):
            if not isinstance(listed, list) or not all(isinstance(i, str) for i in listed):
                raise RunnerContractError(f"not a Pydantic AI run state: {text[:60]!r}")
        return cls(messages=messages, tool_call_ids=ids, usage=usage, output_call_ids=outputs)
