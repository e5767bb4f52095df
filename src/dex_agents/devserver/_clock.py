"""The dev server's clock: real (wall-clock) time plus whatever a test advanced, or frozen.

Wall-clock time, so that Timers and approval deadlines stored in a data dir keep their
server-clock time across a restart: time the server was down counts.
"""

import asyncio
import time
from collections.abc import Callable


class ClockTimer:
    """A callback due at a server-clock deadline (`ServerClock.call_at`); ``cancel`` drops it."""

    __slots__ = ("_callback", "_clock", "_handle", "_pending", "deadline")

    def __init__(
        self, clock: "ServerClock", pending: "set[ClockTimer]", deadline: float, callback: Callable[[], None]
    ) -> None:
        self._clock = clock
        self._pending = pending
        self._callback = callback
        self._handle: asyncio.TimerHandle | None = None
        self.deadline = deadline
        pending.add(self)
        self._arm()

    def _arm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self._clock.frozen:
            remaining = max(self.deadline - self._clock.now(), 0.0)
            self._handle = asyncio.get_running_loop().call_later(remaining, self.check)

    def check(self) -> None:
        """Fire once the deadline passed on the server clock, else wait the rest (the clock follows real time)."""
        if self not in self._pending:
            return
        if self._clock.now() < self.deadline:
            self._arm()
            return
        self.cancel()
        self._callback()

    def cancel(self) -> None:
        """Drop the callback (idempotent)."""
        self._pending.discard(self)
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class ServerClock:
    """A Unix-seconds clock that tests can move forward.

    Timers, back-off waits, method timeouts and heartbeat timeouts all run on this
    clock. It follows real time (unless frozen) and jumps when ``advance`` is called;
    every sleeper re-checks its deadline after a jump.
    """

    def __init__(self, *, start: float | None = None, frozen: bool = False) -> None:
        self._origin_wall = time.time() if start is None else start
        self._origin_monotonic = time.monotonic()
        self._offset = 0.0
        self._frozen_at: float | None = 0.0 if frozen else None
        self._changed = asyncio.Event()
        self._timers: set[ClockTimer] = set()

    @property
    def offset(self) -> float:
        """Seconds ``advance`` added so far (kept in the data dir, so a restart keeps the server's time)."""
        return self._offset

    def restore_offset(self, offset: float) -> None:
        """Take back the advances of a previous server on the same data dir."""
        self._offset = max(self._offset, offset)

    @property
    def frozen(self) -> bool:
        """Whether the clock only moves on ``advance``."""
        return self._frozen_at is not None

    def now(self) -> float:
        """Return the current server time in Unix seconds."""
        elapsed = self._frozen_at if self._frozen_at is not None else time.monotonic() - self._origin_monotonic
        return self._origin_wall + elapsed + self._offset

    def advance(self, seconds: float) -> None:
        """Move the clock forward and wake every sleeper so it re-checks its deadline.

        Args:
            seconds: Non-negative number of seconds to add.

        Raises:
            ValueError: If ``seconds`` is negative.
        """
        if seconds < 0:
            raise ValueError("the server clock cannot go backwards")
        self._offset += seconds
        self.notify()

    def notify(self) -> None:
        """Wake every sleeper (used after ``advance`` and when a watched value changes)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        for timer in list(self._timers):
            timer.check()

    def call_at(self, deadline: float, callback: Callable[[], None]) -> ClockTimer:
        """Call ``callback`` (on the running loop) once ``deadline`` passes on this clock.

        A loop timer, not a task: a jump of the clock (``advance``) fires what fell due at
        once. Cheaper than a task in `sleep_until` for what is almost always cancelled
        (a method's timeout watch).
        """
        return ClockTimer(self, self._timers, deadline, callback)

    async def sleep_until(self, deadline: float, wake: asyncio.Event | None = None) -> bool:
        """Sleep until ``deadline`` on this clock, or until ``wake`` is set.

        Args:
            deadline: Unix seconds on this clock.
            wake: Optional event that ends the sleep early.

        Returns:
            ``True`` when the deadline was reached, ``False`` when ``wake`` ended it.
        """
        while True:
            if wake is not None and wake.is_set():
                return False
            remaining = deadline - self.now()
            if remaining <= 0:
                return True
            waiters = [asyncio.ensure_future(self._changed.wait())]
            if wake is not None:
                waiters.append(asyncio.ensure_future(wake.wait()))
            try:
                await asyncio.wait(
                    waiters,
                    timeout=None if self.frozen else remaining,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                for waiter in waiters:
                    waiter.cancel()
