"""A clock that only moves when a test advances it."""

from datetime import UTC, datetime, timedelta

DEFAULT_START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class ManualClock:
    """``Clock``: fixed UTC time, moved by `advance` (no real sleeping)."""

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        assert start.tzinfo is not None, "the Worker clock is timezone-aware"
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, by: timedelta | float) -> datetime:
        """Move forward by ``by`` (a timedelta or seconds) and return the new time."""
        step = by if isinstance(by, timedelta) else timedelta(seconds=by)
        assert step >= timedelta(0), "the clock never goes back"
        self._now += step
        return self._now

    def set(self, now: datetime) -> None:
        """Jump to ``now`` (not earlier than the current time)."""
        assert now >= self._now, "the clock never goes back"
        self._now = now
