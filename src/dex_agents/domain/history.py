"""The model's view of a long session: a cumulative summary plus the messages after the range it covers.

Every message stays stored; compaction only moves the start of the model's
window. `AgentState` keeps the window's bookkeeping (``summary_count``,
``summarized_through``, ``window_bytes``), so a host can compute what a model
call loads before it loads anything:

- `HistorySummary`: one compaction's result, cumulative (it summarises every
  message from 1 through ``through_sequence``, folding in the previous
  summary). Compaction ``n`` stores its summary under `summary_key` ``(n)``, so
  a repeated attempt overwrites the same slot and each compaction stores
  exactly one summary.
- `ModelWindow` (`dex_agents.domain.window`): what one model call reads: the
  current summary (if any) and the messages ``first_sequence..last_sequence``.
- `compaction_cut`: where a compaction ends. It never covers the active turn,
  keeps at least ``keep_recent`` messages verbatim when they fit, and never
  separates a tool call from its result: the first retained message is never
  a tool result (role ``tool``), because results follow the message that asked
  for them.
- `prefix_sequences`: a bounded prefix of the window, by the same size
  estimates the query RPCs use, for a compaction that reads in chunks.
"""

from collections.abc import Iterable, Sequence

import attrs

from dex_agents.domain.limits import json_text_size
from dex_agents.domain.messages import LARGE_MESSAGE_BYTES, MIN_STORED_BYTES, AgentMessage, MessageRole, stored_size
from dex_agents.domain.window import ModelWindow as ModelWindow  # re-exported: its home before its own module

SUMMARY_KEY_DIGITS = 12
"""Digits of a stored summary's map key."""


def summary_key(number: int) -> str:
    """Return the ``AGENT_HISTORY_SUMMARIES`` key of compaction ``number`` (from 1, 12 digits, zero-padded).

    Raises:
        ValueError: ``number`` is below 1 or needs more than 12 digits.
    """
    if not 1 <= number < 10**SUMMARY_KEY_DIGITS:
        raise ValueError(f"summary number must be in 1..{10**SUMMARY_KEY_DIGITS - 1}, got {number!r}")
    return f"{number:0{SUMMARY_KEY_DIGITS}d}"


@attrs.frozen(kw_only=True)
class HistorySummary:
    """The cumulative summary a compaction stored."""

    number: int
    """Which compaction of the session stored it, from 1."""
    through_sequence: int
    """It summarises every message from sequence 1 through this one."""
    text: str
    """The summary, as the model reads it in place of those messages."""

    @property
    def size(self) -> int:
        """Estimated stored bytes (the text as escaped JSON plus room for the keys)."""
        return stored_size_of_text(self.text)


def stored_size_of_text(text: str) -> int:
    """Return an upper estimate of the stored size of a summary text (as escaped JSON, plus room for the keys)."""
    return MIN_STORED_BYTES + json_text_size(text)


@attrs.frozen(kw_only=True)
class CompactionCut:
    """Where a compaction ends: it covers ``first_sequence..through_sequence``."""

    first_sequence: int
    """The first message it covers (the first after the previous summary)."""
    through_sequence: int
    """The last message it covers."""
    covered_bytes: int
    """Estimated stored bytes of the covered messages."""


def compaction_cut(
    messages: Sequence[AgentMessage],
    *,
    window_bytes: int,
    target_bytes: int,
    keep_recent: int,
    window_last: int,
    protected_from: int | None,
) -> CompactionCut | None:
    """Return how far a compaction over the window's prefix ``messages`` reaches, or ``None`` (nothing to cover).

    The cut covers every message before the ``keep_recent`` latest ones
    (through ``window_last``); when what it leaves still exceeds
    ``target_bytes`` (of the window's ``window_bytes``), it reaches into them
    as far as needed. It never covers sequence ``protected_from`` or later
    (the active turn), and the first message it leaves is never a tool result
    (role ``tool``): results follow the message that asked for them, so no
    call is separated from its result.

    ``messages`` are the window's first messages, consecutive, from its first
    one; a compaction may read a bounded prefix, plus one more message so the
    role of the message after the prefix is known (a cut whose next message
    is unknown is not taken, unless it is the window's last).

    Raises:
        ValueError: ``messages`` are not consecutive.
    """
    if not messages:
        return None
    first = messages[0].sequence
    for offset, message in enumerate(messages):
        if message.sequence != first + offset:
            raise ValueError(f"compaction needs consecutive messages, got {message.sequence} at {first + offset}")
    ceiling = window_last if protected_from is None else min(window_last, protected_from - 1)
    covered: dict[int, int] = {}
    total = 0
    valid: list[int] = []
    for index, message in enumerate(messages):
        if message.sequence > ceiling:
            break
        total += stored_size(message)
        covered[message.sequence] = total
        following = messages[index + 1] if index + 1 < len(messages) else None
        if following is None and message.sequence < window_last:
            continue  # the next message is past the prefix: its role is unknown
        if following is not None and following.role is MessageRole.TOOL:
            continue  # it answers a call at or before this message
        valid.append(message.sequence)
    if not valid:
        return None
    preferred = window_last - keep_recent
    below = [through for through in valid if through <= preferred]
    chosen = below[-1] if below else None
    if chosen is None or window_bytes - covered[chosen] > target_bytes:
        above = [t for t in valid if (chosen is None or t > chosen) and window_bytes - covered[t] <= target_bytes]
        chosen = above[0] if above else valid[-1]
    return CompactionCut(first_sequence=first, through_sequence=chosen, covered_bytes=covered[chosen])


def prefix_sequences(first: int, last: int, *, large_messages: Iterable[tuple[int, int]], budget: int) -> range:
    """Return ``first..n``: the longest prefix of ``first..last`` whose estimated size fits ``budget`` (at least one).

    Messages not in ``large_messages`` count as `LARGE_MESSAGE_BYTES`.
    """
    sizes = dict(large_messages)
    total = 0
    end = first - 1
    for sequence in range(first, last + 1):
        total += sizes.get(sequence, LARGE_MESSAGE_BYTES)
        if total > budget and sequence > first:
            break
        end = sequence
    return range(first, end + 1)
