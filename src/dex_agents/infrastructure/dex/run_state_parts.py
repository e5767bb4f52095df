"""The run state stored as parts: each write keeps a prefix of the previous state and adds what changed.

Within a turn every model Step stores the turn's run state (its messages so far), and the next one
mostly extends the last: one more response and its results. Stored whole, each Step wrote all of it
again (quadratic in the turn's calls), and the value passed Dex's 1 KiB blob threshold after a few
calls, so every resumed ``RunModel`` fetched it back with one ``LoadBlobs`` round trip before it could
run (about a millisecond on the dev server, per model Step).

So the state is a chain of parts in ``FRAMEWORK_RUN_STATES``, keyed `part_key` (``part-000000``,
``part-000001``...). Part *k* is ``"<keep>:<text>"``: the state is part *k-1*'s state cut to its first
*keep* characters, then *text*. Part 0 keeps nothing. A write adds one part (the common prefix with
the state before it is kept), so it stores about what changed. A text over 1 KiB is stored deflated
(``"<keep>~<base64>"``, `COMPRESS_OVER_BYTES`): Pydantic AI's JSON of one response and its results is
about 1.6 KiB and deflates to well under 1 KiB, so the parts of an ordinary turn stay under Dex's blob
threshold and a resumed model Step gets every part inline.
A write starts a new chain (the whole state in part 0) instead of adding a part when:

- the state shares nothing with the previous one (a compaction, another attempt's different answer);
- the chain would hold more than twice the state plus `CHAIN_SLACK` characters (what later parts cut
  off, the previous state's tail, stays stored);
- its inline parts would pass `INLINE_MAX_BYTES`: a Step that loads the run state carries them in its
  task's own frame, which the SDK Worker receives only up to 4 MiB (the window's messages share it);
- the chain would pass `CHAIN_MAX_CHARACTERS`. Past that a turn's run state is written whole at every
  Step, as it was before parts, so the limit of what one Step writes (3 MiB) stops a turn whose run state
  outgrows it, with `StepResultTooLargeError`, before a chain of parts could outgrow what one
  ``LoadBlobs`` answer (4 MiB) brings a Worker that has none of them.

`chain_state` rebuilds the text from the parts in key order; `next_parts` says what to write and
delete. Both are pure; `dex_agents.infrastructure.dex.stores.DexRunStateStore` applies them.
"""

import base64
import binascii
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PART_PREFIX = "part-"
"""The key prefix of a run state part; the rest is the part's 6-digit (or longer) number."""

COMPRESS_OVER_BYTES = 1024
"""A part's text longer than this is stored deflated when that is shorter: Dex's default blob threshold (1 KiB), over
which a value reaches a Step as a blob ID it must fetch (``LoadBlobs``) before it runs."""

COMPRESS_UNDER_BYTES = 8 * 1024
"""A part's text longer than this is stored plain: deflated it would still be a blob, and deflating it costs time."""

INLINE_MAX_BYTES = 256 * 1024
"""UTF-8 bytes of a chain's parts at most the blob threshold (sent inline with each task that loads them)."""

CHAIN_MAX_CHARACTERS = 2 * 1024 * 1024
"""Characters a chain's parts may hold in all; past it each write stores the whole state again."""

CHAIN_SLACK = 4096
"""Characters a chain may hold beyond twice its state's length (what later parts cut off) before a write restarts it."""

_BLOCK = 1 << 16
"""Characters compared at once while looking for the common prefix."""


class _InflatedParts:
    """Deflated part bodies and their texts, least recently used out first (thread-safe).

    The Worker that wrote a part, or read it for an earlier Step of the turn, rebuilds the state without
    inflating it again.
    """

    def __init__(self, max_characters: int) -> None:
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._max_characters = max_characters
        self._characters = 0
        self._lock = threading.Lock()

    def get(self, body: str) -> str | None:
        with self._lock:
            text = self._texts.get(body)
            if text is not None:
                self._texts.move_to_end(body)
            return text

    def keep(self, body: str, text: str) -> None:
        size = len(body) + len(text)
        if size > self._max_characters // 16:
            return  # a large part is rare, and inflating it costs little beside its size
        with self._lock:
            old = self._texts.pop(body, None)
            if old is not None:
                self._characters -= len(body) + len(old)
            self._texts[body] = text
            self._characters += size
            while self._characters > self._max_characters:
                evicted_body, evicted = self._texts.popitem(last=False)
                self._characters -= len(evicted_body) + len(evicted)


_INFLATED = _InflatedParts(max_characters=4 * 1024 * 1024)
"""Parts kept inflated: 4 Mi characters of bodies and texts in all (about 1,500 parts of an ordinary turn)."""


def part_key(number: int) -> str:
    """Return the map key of part ``number``: ascending key order is chain order."""
    return f"{PART_PREFIX}{number:06d}"


def is_part_key(key: str) -> bool:
    """Whether ``key`` names a run state part."""
    return key.startswith(PART_PREFIX) and key[len(PART_PREFIX) :].isdigit()


def part_number(key: str) -> int:
    """Return the number of the part ``key`` names."""
    return int(key[len(PART_PREFIX) :])


def encode_part(keep: int, text: str) -> str:
    """Return the stored value of a part that keeps ``keep`` characters of the state before it and adds ``text``.

    ``"<keep>:<text>"``; a text over `COMPRESS_OVER_BYTES` is stored deflated, as
    ``"<keep>~<base64>"``, when that is shorter.
    """
    plain = f"{keep}:{text}"
    if len(plain) * 4 <= COMPRESS_OVER_BYTES or len(text) > COMPRESS_UNDER_BYTES:  # UTF-8: 1 to 4 bytes a character
        return plain
    encoded = text.encode()
    head = len(plain) - len(text)  # "<keep>:", ASCII
    if head + len(encoded) <= COMPRESS_OVER_BYTES or len(encoded) > COMPRESS_UNDER_BYTES:
        return plain
    # A window no larger than the text compresses as well as the default one, and its set-up costs far less (17
    # against 42 us for a 1.6 KiB part); any window inflates with the default settings.
    window = min(max(len(encoded).bit_length(), 10), 15)
    body = base64.b64encode(zlib.compress(encoded, 6, window)).decode("ascii")
    if len(body) >= len(encoded):
        return plain
    _INFLATED.keep(body, text)
    return f"{keep}~{body}"


def decode_part(value: str) -> tuple[int, str]:
    """Return (keep, text) of a stored part.

    Raises:
        ValueError: the value is not a part.
    """
    end = 0
    while end < len(value) and value[end].isdigit():
        end += 1
    if end == 0 or end == len(value) or value[end] not in ":~":
        raise ValueError(f"not a run state part: {value[:40]!r}")
    keep, body = int(value[:end]), value[end + 1 :]
    if value[end] == ":":
        return keep, body
    text = _INFLATED.get(body)
    if text is None:
        try:
            text = zlib.decompress(base64.b64decode(body, validate=True)).decode()
        except (binascii.Error, zlib.error, UnicodeDecodeError) as error:
            raise ValueError(f"not a run state part: {value[:40]!r}") from error
        _INFLATED.keep(body, text)
    return keep, text


def chain_state(parts: Iterable[str]) -> str:
    """Return the state the ``parts`` (stored values, in chain order) make.

    Kept as a list of pieces, cut from the end, so rebuilding costs the state's length once.

    Raises:
        ValueError: a part is not a part, or keeps more than the state before it has.
    """
    pieces: list[str] = []
    length = 0
    for value in parts:
        keep, text = decode_part(value)
        if keep > length:
            raise ValueError(f"a run state part keeps {keep} characters of a state of {length}")
        while length > keep:
            last = pieces.pop()
            length -= len(last)
            if length < keep:
                pieces.append(last[: keep - length])
                length = keep
        if text:
            pieces.append(text)
            length += len(text)
    return "".join(pieces)


def common_prefix_length(first: str, second: str) -> int:
    """Return how many leading characters ``first`` and ``second`` share (block by block, then by halves)."""
    limit = min(len(first), len(second))
    start = 0
    while start < limit:
        end = min(start + _BLOCK, limit)
        if first[start:end] == second[start:end]:
            start = end
            continue
        low, high = start, end
        while low < high:
            middle = (low + high + 1) // 2
            if first[start:middle] == second[start:middle]:
                low = middle
            else:
                high = middle - 1
        return low
    return limit


@dataclass(frozen=True)
class ChainSize:
    """What a chain's stored parts hold: characters in all, and UTF-8 bytes of the parts sent inline."""

    characters: int = 0
    inline_bytes: int = 0

    @classmethod
    def of(cls, values: Iterable[str]) -> "ChainSize":
        """The size of the parts ``values``."""
        size = cls()
        for value in values:
            size = size.plus(value)
        return size

    def plus(self, value: str) -> "ChainSize":
        """The size with one more part ``value``."""
        inline = 0
        if len(value) <= COMPRESS_OVER_BYTES:
            encoded = len(value.encode())
            inline = encoded if encoded <= COMPRESS_OVER_BYTES else 0
        return ChainSize(self.characters + len(value), self.inline_bytes + inline)

    def fits(self, state: str) -> bool:
        """Whether a chain of this size may hold ``state`` (the module docstring's rules but the first)."""
        return (
            self.characters <= min(2 * len(state) + CHAIN_SLACK, CHAIN_MAX_CHARACTERS)
            and self.inline_bytes <= INLINE_MAX_BYTES
        )


@dataclass(frozen=True)
class PartWrites:
    """What storing a new state changes: parts to set (by key) and keys to delete."""

    set: Mapping[str, str]
    delete: tuple[str, ...]


def next_parts(previous: str | None, part_keys: tuple[str, ...], size: ChainSize, state: str) -> PartWrites:
    """What stores ``state`` over the chain ``part_keys`` (chain order, ``size``) that makes ``previous``.

    ``previous`` is ``None`` when there is no chain (none stored, or a state in another layout): the
    write starts one, as it does by the module docstring's rules. The same state again writes nothing.
    """
    if previous is not None and part_keys:
        if state == previous:
            return PartWrites(set={}, delete=())
        keep = common_prefix_length(previous, state)
        if keep:
            value = encode_part(keep, state[keep:])
            if size.plus(value).fits(state):
                return PartWrites(set={part_key(part_number(part_keys[-1]) + 1): value}, delete=())
    return PartWrites(set={part_key(0): encode_part(0, state)}, delete=tuple(k for k in part_keys if k != part_key(0)))
