"""`ModelWindow`: which stored messages (and summary) one model call reads.

Its own module, without dependencies, so tool-call records can keep the window
their tool Step reads (`AgentToolCall.history_window`);
`dex_agents.domain.history` says how the window moves.
"""

import attrs


@attrs.frozen(kw_only=True)
class ModelWindow:
    """What a model call reads: the summary ``summary_number`` (if any) and messages ``first..last``."""

    first_sequence: int
    """The first message after the summary's range (1 without a summary)."""
    last_sequence: int
    """The last stored message (``first_sequence - 1`` when the window holds none)."""
    summary_number: int | None = None
    """The compaction whose summary opens the window, or ``None``."""

    @property
    def sequences(self) -> range:
        """The window's message sequences, in order."""
        return range(self.first_sequence, self.last_sequence + 1)
