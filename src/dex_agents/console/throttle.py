"""`FailedTries`: a client that keeps presenting a wrong token is made to wait, longer each time.

Per client (its address as the server sees it): the first `FREE_TRIES`
wrong tokens cost nothing; each one after that blocks the client for twice
as long as the one before, from `FIRST_BLOCK` up to `LONGEST_BLOCK`. While
blocked, every request of that client is answered 429 with ``Retry-After``
without looking at its token, right or wrong, so guessing gains nothing from
parallel connections. A right token ends the count. Clients that stay quiet
for `FORGET_AFTER` are forgotten, and at most `MAX_CLIENTS` are kept (the
longest quiet go first), so the table cannot grow without bound.
"""

import collections
import math
import time
from collections.abc import Callable

import attrs

FREE_TRIES = 5
"""Wrong tokens a client may present before it is slowed down."""

FIRST_BLOCK = 1.0
"""Seconds the first wrong token after the free ones blocks the client."""

LONGEST_BLOCK = 300.0
"""The longest block, in seconds."""

FORGET_AFTER = 3600.0
"""Seconds after its last wrong token that a client's count is dropped."""

MAX_CLIENTS = 10_000
"""Clients whose count is kept at once."""


@attrs.define
class _Client:
    failures: int = 0
    blocked_until: float = 0.0
    last_failure: float = 0.0


class FailedTries:
    """Counts wrong tokens per client and says how long each must wait."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Create an empty count; ``clock`` (seconds, monotonic) is replaceable for tests."""
        self._clock = clock
        self._clients: collections.OrderedDict[str, _Client] = collections.OrderedDict()

    def wait_for(self, client: str) -> int:
        """Return how many whole seconds ``client`` must still wait (0: it may try now)."""
        found = self._clients.get(client)
        if found is None:
            return 0
        now = self._clock()
        if now - found.last_failure > FORGET_AFTER:
            del self._clients[client]
            return 0
        return max(0, math.ceil(found.blocked_until - now))

    def failed(self, client: str) -> None:
        """Count a wrong token of ``client``."""
        now = self._clock()
        found = self._clients.pop(client, None) or _Client()
        found.failures += 1
        found.last_failure = now
        beyond = found.failures - FREE_TRIES
        if beyond > 0:
            found.blocked_until = now + min(LONGEST_BLOCK, FIRST_BLOCK * 2 ** min(beyond - 1, 32))
        self._clients[client] = found
        while len(self._clients) > MAX_CLIENTS:
            self._clients.popitem(last=False)

    def succeeded(self, client: str) -> None:
        """Forget ``client``'s wrong tokens: it presented the right one."""
        self._clients.pop(client, None)
