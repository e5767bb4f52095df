"""The size of what one Step attempt writes, checked before the result leaves the Worker.

A Step's writes (Attributes, map instances, Channel messages) travel to Dex
in one result frame. A frame over the server's gRPC receive limit is not a
failed Step: the server refuses the whole task stream, and the SDK's pull
Worker then backs off for about a minute, stalling every session it serves.
So the binding meters every value it stages (`metered_writes`: the
dex-agents codecs report each encoded value, the run-state store its text)
and, when a Step would write more than `MAX_STEP_RESULT_BYTES`, fails the
attempt with `StepResultTooLargeError` instead of sending the frame. The
attempt then takes its Step's retries and failure route like any failure.

The limit leaves room under the smallest receive limit in play: 4 MiB, gRPC's
default, which the dev server uses (real Dex receives 16 MiB).
"""

import contextlib
import contextvars
from collections.abc import Iterator

from dex_agents.domain.errors import StepResultTooLargeError

MAX_STEP_RESULT_BYTES = 3 * 1024 * 1024
"""The most one Step attempt may write (3 MiB of encoded values)."""


class WriteMeter:
    """Adds up the encoded size of the values one Step attempt stages."""

    def __init__(self) -> None:
        self.total = 0
        self.largest_name = ""
        self.largest = 0

    def add(self, name: str, size: int) -> None:
        """Count one staged value of ``size`` bytes."""
        self.total += size
        if size > self.largest:
            self.largest, self.largest_name = size, name

    def check(self, limit: int = MAX_STEP_RESULT_BYTES) -> None:
        """Raise when the staged values exceed ``limit``.

        Raises:
            StepResultTooLargeError: they do.
        """
        if self.total > limit:
            raise StepResultTooLargeError(
                f"the Step would write {self.total:,} bytes, over the {limit:,}-byte limit of one result"
                f" (largest value: {self.largest_name}, {self.largest:,} bytes); nothing was written"
            )


_CURRENT: contextvars.ContextVar[WriteMeter | None] = contextvars.ContextVar("dex_agents_write_meter", default=None)


@contextlib.contextmanager
def metered_writes() -> Iterator[WriteMeter]:
    """Meter every value staged in this block (by this task)."""
    meter = WriteMeter()
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)


def count_write(name: str, size: int) -> None:
    """Count a staged value in the current block's meter, if there is one."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.add(name, size)
