"""What the running Step or RPC declared it reads, enforced on the in-memory ports.

Dex hands a handler only the AttributeMap instances and Channel messages it
loads, and raises ``AttributeMapNotLoadedError`` on any other read. The
in-memory host does the same from the Step's or RPC's declaration
(`dex_agents.application.declarations`): within an attempt, a port read the
declaration does not cover raises `NotLoadedError`, so a use case that reads
what its Step did not declare fails its unit tests, not only on Dex. Outside
any attempt (a test asserting end state) everything is readable. As on Dex, a
handler reads back what it wrote itself.
"""

import contextlib
from collections.abc import Iterator

from dex_agents.application.declarations import EVERYTHING, Loaded


class NotLoadedError(AssertionError):
    """A read the running Step or RPC did not declare (on Dex: ``AttributeMapNotLoadedError``)."""


class LoadGate:
    """What the running attempt may read; shared by one host's ports."""

    def __init__(self) -> None:
        self.loaded: Loaded = EVERYTHING
        self.handler = "a test"
        self._written: set[object] = set()

    @contextlib.contextmanager
    def loading(self, loaded: Loaded, handler: str) -> Iterator[None]:
        """Within the block, only ``loaded`` (and what the block writes) is readable, as for ``handler``."""
        previous = self.loaded, self.handler, self._written
        self.loaded, self.handler, self._written = loaded, handler, set()
        try:
            yield
        finally:
            self.loaded, self.handler, self._written = previous

    def wrote(self, key: object) -> None:
        """Note a write: the attempt may read it back."""
        self._written.add(key)

    def refuse(self, what: str, key: object, *, allowed: bool) -> None:
        """Raise `NotLoadedError` unless ``allowed`` or the attempt wrote ``key`` itself."""
        if allowed or key in self._written:
            return
        raise NotLoadedError(f"{self.handler} read {what}, which it does not declare (add its Load)")


OPEN = LoadGate()
"""The gate of a port built on its own: never inside an attempt, so everything is readable."""
