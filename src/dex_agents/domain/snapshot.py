"""What the query RPCs return: the session snapshot and message pages."""

import attrs

from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.tools import AgentToolCall
from dex_agents.domain.usage import AgentUsage

SNAPSHOT_MESSAGE_LIMIT = 200
"""Messages a snapshot holds at most (the latest ones)."""

MAX_PAGE_LIMIT = 200
"""Messages a page holds at most."""


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
    """User messages waiting for the next turn."""


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


def clamp_page_limit(limit: int) -> int:
    """Clamp a requested page size to 1..`MAX_PAGE_LIMIT`."""
    return max(1, min(MAX_PAGE_LIMIT, limit))


def page_sequences(*, after_sequence: int, limit: int, message_count: int) -> tuple[range, int | None]:
    """Return the sequences of one page and the cursor of the next.

    Args:
        after_sequence: the page starts after this sequence.
        limit: the requested size, clamped to 1..200.
        message_count: messages stored, numbered 1..message_count.
    """
    first = max(after_sequence, 0) + 1
    last = min(first + clamp_page_limit(limit) - 1, message_count)
    sequences = range(first, last + 1)
    next_after = last if last < message_count else None
    return sequences, next_after


def snapshot_sequences(message_count: int) -> range:
    """Return the sequences a snapshot holds: the latest `SNAPSHOT_MESSAGE_LIMIT`."""
    return range(max(1, message_count - SNAPSHOT_MESSAGE_LIMIT + 1), message_count + 1)
