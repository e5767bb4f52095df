"""What the query RPCs return: the session snapshot and message pages; and how a turn ended.

Both read a bounded number of bytes, not only of messages: a snapshot holds
the latest messages, at most `SNAPSHOT_MESSAGE_LIMIT`, and a page at most its
limit, but each stops before its messages would exceed
`MESSAGE_LOAD_BUDGET_BYTES` (always holding at least one message). Sizes come
from `AgentState.large_messages`; every other message counts as
`LARGE_MESSAGE_BYTES`. The client loads exactly the sequences these functions
name, so neither what Dex sends the Worker nor what the RPC answers grows
past one frame, however large single messages are.

`turn_result` reads a finished turn's result from a snapshot. The most recent
turn is exact: it failed when ``last_turn_error`` is set. An earlier turn
(the session moved on) is read from its stored messages: a completed turn
stored what its model said, a failed one only user messages (its user
message, perhaps a turn-failure note); its error is no longer in the state.
A cancelled turn is the last one with ``last_turn_cancelled``, an earlier one
whose user messages include a turn-cancelled note.
"""

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

import attrs

from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import LARGE_MESSAGE_BYTES, AgentMessage, AgentUserMessage, MessageRole
from dex_agents.domain.session import AgentState, size_pairs, turn_number
from dex_agents.domain.tools import AgentToolCall, ToolOutcome
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER
from dex_agents.domain.usage import AgentUsage

SNAPSHOT_MESSAGE_LIMIT = 200
"""Messages a snapshot holds at most (the latest ones)."""

MAX_PAGE_LIMIT = 200
"""Messages a page holds at most."""

MESSAGE_LOAD_BUDGET_BYTES = 2 * 1024 * 1024
"""Estimated bytes of messages one snapshot or page loads at most (beyond its first message)."""


@attrs.frozen(kw_only=True)
class AgentSnapshot:
    """A session as the ``get_agent_snapshot`` RPC sees it."""

    state: AgentState | None
    """The session state; ``None`` until the start Step commits."""
    messages: tuple[AgentMessage, ...]
    """The latest messages (at most `SNAPSHOT_MESSAGE_LIMIT`), oldest first."""
    pending_interrupts: tuple[AgentInterrupt, ...]
    """Tool calls waiting for approval."""
    tool_calls: tuple[AgentToolCall, ...]
    """The active turn's tool-call records, in ``deferral_order``."""
    usage: AgentUsage
    """Usage summed over the session."""
    queued_message_count: int
    """User messages waiting for the next turn (queued, and steered ones no turn has taken yet)."""
    queued_messages: tuple[AgentUserMessage, ...] = ()
    """Those messages, oldest first: queued ones, then steered ones no turn has taken yet. Each can be
    withdrawn by its ``client_message_id`` (`AgentSessionClient.withdraw_user_message`)."""
    steered_messages: tuple[AgentUserMessage, ...] = ()
    """Steered messages the running turn has taken, which its next model call will see."""

    @property
    def is_idle(self) -> bool:
        """Whether the session started, runs no turn, has no queued user message and no approval pending.

        As committed: a turn ending is announced before its end is readable
        (``turn_committed`` says when it is).
        """
        state = self.state
        return (
            state is not None
            and state.active_turn_id is None
            and self.queued_message_count == 0
            and not self.pending_interrupts
        )


@attrs.frozen(kw_only=True)
class ListAgentMessagesRequest:
    """The ``list_agent_messages`` input: messages after a sequence, oldest first."""

    after_sequence: int = 0
    """Return messages with a greater sequence; 0 starts at the first message."""
    limit: int = 50
    """Messages wanted; clamped to 1..200."""


@attrs.frozen(kw_only=True)
class AgentMessagesPage:
    """One page of stored messages, oldest first."""

    messages: tuple[AgentMessage, ...]
    """The page."""
    next_after_sequence: int | None
    """Pass as ``after_sequence`` for the next page; ``None`` when there is none."""


@attrs.frozen(kw_only=True)
class MessageIndex:
    """What a reader needs to choose the messages of a snapshot or page (the ``get_agent_message_index`` RPC)."""

    message_count: int = 0
    """Messages stored so far."""
    large_messages: tuple[tuple[int, int], ...] = attrs.field(default=(), converter=size_pairs)
    """``(sequence, estimated bytes)`` of each message over `LARGE_MESSAGE_BYTES`."""

    @classmethod
    def of(cls, state: AgentState | None) -> "MessageIndex":
        """Return the index of ``state`` (empty before the session started)."""
        if state is None:
            return cls()
        return cls(message_count=state.message_count, large_messages=state.large_messages)


def clamp_page_limit(limit: int) -> int:
    """Clamp a requested page size to 1..`MAX_PAGE_LIMIT`."""
    return max(1, min(MAX_PAGE_LIMIT, limit))


def page_sequences(
    *,
    after_sequence: int,
    limit: int,
    message_count: int,
    large_messages: Iterable[tuple[int, int]] = (),
    budget: int = MESSAGE_LOAD_BUDGET_BYTES,
) -> tuple[range, int | None]:
    """Return the sequences of one page and the cursor of the next.

    Args:
        after_sequence: the page starts after this sequence.
        limit: the requested size, clamped to 1..200.
        message_count: messages stored, numbered 1..message_count.
        large_messages: ``AgentState.large_messages``.
        budget: estimated bytes the page may hold beyond its first message.
    """
    first = max(after_sequence, 0) + 1
    last = min(first + clamp_page_limit(limit) - 1, message_count)
    sizes = dict(large_messages)
    total = 0
    for sequence in range(first, last + 1):
        total += _size(sizes, sequence)
        if total > budget and sequence > first:
            last = sequence - 1
            break
    sequences = range(first, last + 1)
    next_after = last if last < message_count else None
    return sequences, next_after


def snapshot_sequences(
    message_count: int, *, large_messages: Iterable[tuple[int, int]] = (), budget: int = MESSAGE_LOAD_BUDGET_BYTES
) -> range:
    """Return the sequences a snapshot holds: the latest `SNAPSHOT_MESSAGE_LIMIT` that fit in ``budget``."""
    oldest = max(1, message_count - SNAPSHOT_MESSAGE_LIMIT + 1)
    sizes = dict(large_messages)
    first = message_count + 1
    total = 0
    for sequence in range(message_count, oldest - 1, -1):
        total += _size(sizes, sequence)
        if total > budget and sequence < message_count:
            break
        first = sequence
    return range(first, message_count + 1)


def _size(sizes: Mapping[int, int], sequence: int) -> int:
    return sizes.get(sequence, LARGE_MESSAGE_BYTES)


class TurnStatus(StrEnum):
    """How a finished turn ended (a `TurnResult`'s ``status``, a ``turn_committed`` event's ``outcome``)."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    """A person cancelled it (`AgentSessionClient.cancel_turn`); its note is among its messages."""

    @classmethod
    def of(cls, *, failed: bool, cancelled: bool) -> "TurnStatus":
        """Return ``cancelled`` for a cancelled turn, else ``failed`` or ``completed``."""
        if cancelled:
            return cls.CANCELLED
        return cls.FAILED if failed else cls.COMPLETED


@attrs.frozen(kw_only=True)
class TurnResult:
    """A finished turn, as its committed state shows it."""

    turn_id: str
    """The turn."""
    status: TurnStatus
    """How it ended."""
    error: str | None
    """Why it failed, when known (``None`` for a completed turn)."""
    messages: tuple[AgentMessage, ...]
    """Its stored messages among the snapshot's, oldest first (its user message first)."""
    snapshot: AgentSnapshot
    """The snapshot the result was read from."""

    @property
    def reply(self) -> str | None:
        """The text of the turn's last assistant message that has text."""
        texts = [m.text for m in self.messages if m.role is MessageRole.ASSISTANT and m.text]
        return texts[-1] if texts else None

    @property
    def tool_outcomes(self) -> tuple[ToolOutcome, ...]:
        """What each of the turn's tool calls came to, in call order."""
        return tuple(outcome for message in self.messages for outcome in message.tool_outcomes)


def is_turn_finished(state: AgentState | None, turn_id: str) -> bool:
    """Whether turn ``turn_id`` started and its end is committed in ``state``."""
    return state is not None and state.turn_count >= turn_number(turn_id) and state.active_turn_id != turn_id


def turn_result(
    snapshot: AgentSnapshot,
    turn_id: str,
    *,
    messages: Sequence[AgentMessage] | None = None,
    error_hint: str | None = None,
) -> TurnResult | None:
    """Return turn ``turn_id``'s result, or ``None`` while it has not finished (or not started).

    Args:
        snapshot: the session's snapshot.
        turn_id: the turn.
        messages: stored messages holding the turn's (others are skipped); by
            default the snapshot's. An earlier turn none of whose messages are
            given reads as completed.
        error_hint: the error of the turn's ``turn_failed`` event, if the caller
            saw one: the only source of an earlier failed turn's error.
    """
    state = snapshot.state
    if state is None or not is_turn_finished(state, turn_id):
        return None
    given = snapshot.messages if messages is None else messages
    of_turn = tuple(m for m in given if m.turn_id == turn_id)
    cancelled = False
    if turn_number(turn_id) == state.turn_count:
        error = state.last_turn_error
        failed = error is not None
        cancelled = state.last_turn_cancelled
    else:
        failed = bool(of_turn) and all(m.role is MessageRole.USER for m in of_turn)
        cancelled = failed and any((m.text or "").startswith(TURN_CANCELLED_NOTE_HEADER) for m in of_turn)
        failed = failed and not cancelled
        error = error_hint if failed else None
    return TurnResult(
        turn_id=turn_id,
        status=TurnStatus.of(failed=failed, cancelled=cancelled),
        error=error,
        messages=of_turn,
        snapshot=snapshot,
    )
