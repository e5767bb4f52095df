"""The reference model of the lifecycle test: what the client sent, and what the session must have stored.

`Sent` records every message the test sent (tag, delivery, whether the session
accepted it, whether a withdrawal removed it). `check_safety` holds at every
moment, whatever still runs: messages numbered 1..N with turns in order, no
message stored twice, no withdrawn message stored or read by a model call, every
tool return after its call, the snapshot's messages equal to the paged history,
a note in every cancelled turn and in every failed turn after a tool call
finished, no non-idempotent write run twice. `check_settled` holds once no
turn runs and nothing waits: every accepted message not withdrawn is stored
exactly once, queued ones opening turns in the order they were sent.
"""

import json
from collections import Counter, defaultdict
from collections.abc import Sequence

import attrs

from dex_agents import AgentMessage, AgentSnapshot, MessageRole
from dex_agents.domain.events import AgentEvent, AgentEventType
from dex_agents.domain.failure_note import TURN_FAILURE_NOTE_HEADER
from dex_agents.domain.messages import MessageDelivery
from dex_agents.domain.session import turn_number
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER
from tests.lifecycle.runner import tag_of


@attrs.define
class Sent:
    """One message the test sent."""

    tag: str
    text: str
    delivery: MessageDelivery
    client_message_id: str
    accepted: bool = False
    withdrawn: bool = False

    @property
    def must_be_stored(self) -> bool:
        return self.accepted and not self.withdrawn


@attrs.frozen(kw_only=True)
class Observed:
    """What the session shows: its history, its snapshot, its events, and what the runner ran."""

    history: Sequence[AgentMessage]
    snapshot: AgentSnapshot
    events: Sequence[AgentEvent]
    seen: Sequence[tuple[str, str]]
    """(``model``, tag) for every tag a model call read; (``tool``, ``<tool> <idempotency key>``) per tool run."""


def _finished_turns(snapshot: AgentSnapshot) -> set[str]:
    state = snapshot.state
    if state is None:
        return set()
    last = state.turn_count if state.active_turn_id is None else state.turn_count - 1
    return {f"turn-{n}" for n in range(1, last + 1)}


def check_safety(sent: Sequence[Sent], observed: Observed) -> None:
    """Raise `AssertionError` when what the session stored breaks a rule that holds at every moment."""
    history = list(observed.history)
    assert [m.sequence for m in history] == list(range(1, len(history) + 1)), "messages are numbered 1..N"
    numbers = [turn_number(m.turn_id) for m in history]
    assert numbers == sorted(numbers), f"turns are stored in order: {numbers}"
    by_sequence = {m.sequence: m for m in history}
    for message in observed.snapshot.messages:
        assert by_sequence.get(message.sequence) == message, f"snapshot message {message.sequence} = history"

    stored_tags = Counter(tag_of(m.text) for m in history if m.role is MessageRole.USER and tag_of(m.text))
    twice = [tag for tag, n in stored_tags.items() if n > 1]
    assert not twice, f"messages stored more than once: {twice}"
    withdrawn = {s.tag for s in sent if s.withdrawn}
    assert not withdrawn & set(stored_tags), f"withdrawn messages were stored: {withdrawn & set(stored_tags)}"
    read = {what for kind, what in observed.seen if kind == "model"}
    assert not withdrawn & read, f"withdrawn messages reached a model call: {withdrawn & read}"
    refused = {s.tag for s in sent if not s.accepted}
    assert not refused & set(stored_tags), f"refused messages were stored: {refused & set(stored_tags)}"

    turns: dict[str, list[AgentMessage]] = defaultdict(list)
    for message in history:
        turns[message.turn_id].append(message)
    for turn_id, messages in turns.items():
        _check_turn(turn_id, messages)

    finished = _finished_turns(observed.snapshot)
    finished_calls: Counter[str] = Counter()
    for event in observed.events:
        if event.type is AgentEventType.TOOL_CALL_FINISHED and event.turn_id is not None:
            finished_calls[event.turn_id] += 1
    for event in observed.events:
        ended = event.turn_id
        if ended is None or ended not in finished:
            continue
        turn_id = ended
        texts = [m.text or "" for m in turns.get(turn_id, [])]
        if event.type is AgentEventType.TURN_CANCELLED:
            assert texts, f"{turn_id} was cancelled and stored nothing"
            assert texts[-1].startswith(TURN_CANCELLED_NOTE_HEADER), f"{turn_id} was cancelled: {texts}"
        if event.type is AgentEventType.TURN_FAILED and finished_calls[turn_id] and texts:
            assert texts[-1].startswith(TURN_FAILURE_NOTE_HEADER), f"{turn_id} failed after tool calls: {texts}"

    writes = Counter(what for kind, what in observed.seen if kind == "tool" and what.startswith("write "))
    assert all(n == 1 for n in writes.values()), f"a non-idempotent write ran twice: {writes}"


def _check_turn(turn_id: str, messages: Sequence[AgentMessage]) -> None:
    opening = messages[0]
    assert opening.role is MessageRole.USER, f"{turn_id} opens with its user message"
    asked: set[str] = set()
    for message in messages[1:]:
        item = json.loads(message.framework_item)
        if not isinstance(item, dict):
            continue
        if item.get("kind") == "calls":
            asked.update(item["ids"])
        elif item.get("kind") == "returns":
            missing = set(item["ids"]) - asked
            assert not missing, f"{turn_id}: tool returns without their calls: {missing}"
            assert "missing" not in item["statuses"], f"{turn_id}: a call had no record when the model answered"


def check_settled(sent: Sequence[Sent], observed: Observed) -> None:
    """Raise `AssertionError` when a settled session lost, repeated or reordered an accepted message."""
    history = observed.history
    stored = [tag_of(m.text) for m in history if m.role is MessageRole.USER and tag_of(m.text)]
    expected = {s.tag for s in sent if s.must_be_stored}
    assert set(stored) == expected, f"lost: {sorted(expected - set(stored))}, unexpected: {set(stored) - expected}"
    openers = [tag_of(m.text) for m in history if m.client_message_id is not None]
    queued = [s.tag for s in sent if s.must_be_stored and s.delivery is MessageDelivery.QUEUE]
    opened_queued = [tag for tag in openers if tag in set(queued)]
    assert opened_queued == queued, f"queued messages open turns in the order sent: {opened_queued} != {queued}"
    assert observed.snapshot.is_idle, "settled: no turn runs and nothing waits"
