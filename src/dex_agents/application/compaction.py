"""History compaction: the port a runner provides, the policy that triggers it, and where a model call goes.

The port: a runner that is a `HistoryCompactor` provides
``compact(messages, previous_summary) -> summary``: it folds the previous
summary (``None`` at the first compaction) and the messages it covers into
one new cumulative summary, as text or as a `CompactionSummary` with the
usage its model call spent. A runner without it gets `ExcerptCompactor`,
which keeps the start of each message's display text (no model call), so
every session stays bounded whatever its runner.

The policy (`CompactionPolicy`, ``AgentSessionOptions.compaction``): a
model call's context (the window's messages plus the summary, by estimated
stored size) may hold at most `CompactionPolicy.budget_bytes`: the smaller
of the ``context_budget_chars`` and ``context_budget_tokens`` (four
characters a token) the agent set, and never more than `MAX_CONTEXT_BYTES`,
which keeps every ``RunModel`` task well under the engine's 4 MiB limit; and
a window holds at most `MAX_WINDOW_MESSAGES` messages.
Over the budget, the Step that would run the model goes to
``CompactHistory`` first (`model_movement`). A compaction covers all but the
``keep_recent_messages`` latest messages, more when they alone exceed half
the budget, and never the active turn nor a tool call without its result
(`dex_agents.domain.history.compaction_cut`).

The other trigger is the provider: a runner raises `ContextOverflowError`
from `run_model_step` when the provider refused the context; ``RunModel``
then compacts and retries the model call once.
"""

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol, runtime_checkable

import attrs

from dex_agents.application.next import GoTo, StepName
from dex_agents.domain.history import ModelWindow, prefix_sequences
from dex_agents.domain.messages import MIN_STORED_BYTES, AgentMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.usage import AgentUsage

MAX_CONTEXT_BYTES = 2 * 1024 * 1024
"""The most a model call's window and summary may hold (estimated stored bytes), whatever the policy says."""

COMPACTION_LOAD_BYTES = 2 * 1024 * 1024
"""The most one ``CompactHistory`` attempt loads (by the same estimate); a longer window compacts in chunks."""

MAX_WINDOW_MESSAGES = 2000
"""The most messages a model call's window holds, whatever their size (each is one load of the model Step)."""

CHARS_PER_TOKEN = 4
"""How a token budget becomes a character budget."""

DEFAULT_KEEP_RECENT_MESSAGES = 20
"""Messages a compaction keeps verbatim by default."""

DEFAULT_MAX_SUMMARY_BYTES = 32 * 1024
"""Default limit of one stored summary (UTF-8 bytes); a longer one is cut with a notice."""


class CompactionReason(StrEnum):
    """Why ``CompactHistory`` runs (its input)."""

    POLICY = "policy"
    """The context exceeded the policy's budget."""
    OVERFLOW = "overflow"
    """The provider refused the model call's context (`ContextOverflowError`)."""


def _positive_or_none(_instance: object, attribute: "attrs.Attribute[int | None]", value: int | None) -> None:
    if value is not None and value < 1024:
        raise ValueError(f"{attribute.name} must be at least 1024 (or None), got {value!r}")


def _non_negative(_instance: object, attribute: "attrs.Attribute[int]", value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must not be negative, got {value!r}")


def _summary_limit(_instance: object, attribute: "attrs.Attribute[int]", value: int) -> None:
    if value < 1024:
        raise ValueError(f"{attribute.name} must be at least 1024, got {value!r}")


@attrs.frozen(kw_only=True)
class CompactionPolicy:
    """When a session compacts its model context, and what it keeps verbatim."""

    context_budget_chars: int | None = attrs.field(default=None, validator=_positive_or_none)
    """Most characters (estimated stored bytes) a model call's context may hold; ``None``: no own limit."""
    context_budget_tokens: int | None = attrs.field(default=None, validator=_positive_or_none)
    """The same budget in tokens (four characters a token); ``None``: no own limit."""
    keep_recent_messages: int = attrs.field(default=DEFAULT_KEEP_RECENT_MESSAGES, validator=_non_negative)
    """Latest messages a compaction keeps verbatim (when they fit in half the budget)."""
    max_summary_bytes: int = attrs.field(default=DEFAULT_MAX_SUMMARY_BYTES, validator=_summary_limit)
    """Limit of one stored summary in UTF-8 bytes (at most a quarter of the budget); a longer one keeps its
    start and a notice."""

    @property
    def budget_bytes(self) -> int:
        """The effective budget: the smallest of the two own limits and `MAX_CONTEXT_BYTES`."""
        limits = [MAX_CONTEXT_BYTES]
        if self.context_budget_chars is not None:
            limits.append(self.context_budget_chars)
        if self.context_budget_tokens is not None:
            limits.append(self.context_budget_tokens * CHARS_PER_TOKEN)
        return min(limits)

    @property
    def summary_limit_bytes(self) -> int:
        """The limit of one stored summary: ``max_summary_bytes``, and never over a quarter of the budget."""
        return max(1024, min(self.max_summary_bytes, self.budget_bytes // 4))

    @property
    def target_bytes(self) -> int:
        """What a compaction leaves at most: half the budget, so compactions stay rare."""
        return self.budget_bytes // 2

    def should_compact(self, state: AgentState) -> bool:
        """Whether the next model call must compact first: over budget, with messages before the active turn."""
        held = len(state.model_window().sequences)
        over = state.context_bytes > self.budget_bytes or held > MAX_WINDOW_MESSAGES
        return over and held > 1


@attrs.frozen
class CompactionSummary:
    """What a compactor returns: the new cumulative summary and the usage spent on it."""

    text: str
    """The summary."""
    usage: AgentUsage = attrs.field(factory=AgentUsage)
    """The compaction's model usage (zero for one without a model call)."""


@runtime_checkable
class HistoryCompactor(Protocol):
    """The optional part of the runner contract that summarises history (any object may implement it)."""

    async def compact(
        self, messages: Sequence[AgentMessage], previous_summary: str | None
    ) -> "str | CompactionSummary":
        """Return one summary of ``previous_summary`` (``None`` at first) followed by ``messages``, oldest first."""
        ...


EXCERPT_CHARS = 400
"""Characters of each message's display text `ExcerptCompactor` keeps."""


class ExcerptCompactor:
    """A compactor without a model: the previous summary plus each message's role and the start of its text.

    Deterministic, so a repeated attempt stores the same summary; the stored
    summary is bounded by ``CompactionPolicy.max_summary_bytes`` (its start
    is kept, so the oldest context survives longest in it).
    """

    async def compact(self, messages: Sequence[AgentMessage], previous_summary: str | None) -> CompactionSummary:
        """Return the excerpt summary."""
        lines = [] if previous_summary is None else [previous_summary]
        for message in messages:
            text = (message.text or "").strip()
            if message.tool_name and not text:
                text = f"({message.tool_name})"
            if not text:
                continue
            cut = text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + " [...]"
            lines.append(f"[{message.sequence} {message.role.value}] {cut}")
        return CompactionSummary("\n".join(lines))


def compaction_window(state: AgentState) -> ModelWindow:
    """Return what one ``CompactHistory`` attempt loads: a bounded prefix of the window, one message more.

    The extra message tells whether the message after the prefix is a tool
    result (a cut is never placed before one); a large one (over 8 KiB) is not
    loaded, and the prefix's end is then no place for a cut.
    """
    window = state.model_window()
    if not window.sequences:
        return window
    if MIN_STORED_BYTES * len(window.sequences) <= state.window_bytes <= COMPACTION_LOAD_BYTES:
        return window  # the tracked size is real (never below the floor) and the whole window fits one load
    prefix = prefix_sequences(
        window.first_sequence,
        window.last_sequence,
        large_messages=state.large_messages,
        budget=COMPACTION_LOAD_BYTES,
    )
    large = dict(state.large_messages)
    following = prefix.stop  # the message after the prefix: loaded to learn its role, unless it is large
    last = min(following if following not in large else prefix.stop - 1, window.last_sequence)
    return ModelWindow(first_sequence=window.first_sequence, last_sequence=last, summary_number=window.summary_number)


def model_movement(state: AgentState, policy: CompactionPolicy) -> GoTo:
    """Return where a turn goes to call the model: ``RunModel``, or ``CompactHistory`` first when over budget.

    Each movement names the messages the next Step loads.
    """
    if policy.should_compact(state):
        return GoTo(step=StepName.COMPACT_HISTORY, input=CompactionReason.POLICY.value, window=compaction_window(state))
    return GoTo(step=StepName.RUN_MODEL, window=state.model_window())
