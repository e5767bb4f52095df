"""Limits on the text a session accepts and stores, and how it keeps to them.

Input (refused, never altered): a text a client sends (a user message, the
first message, a rejection reason) must be valid Unicode without NUL
(U+0000) and at most a configured number of UTF-8 bytes. `check_input_text`
names the first problem, `InputProblem`, or returns ``None``. A lone surrogate
(such as U+D800 alone) is not Unicode text: frameworks cannot serialize it, so the
session refuses it rather than store something other than what was sent.
NUL is refused because stores and frameworks disagree about it.

Output (kept, but bounded): a text a tool or the engine produces is made safe
to store by `sanitize_output_text` (each lone surrogate and NUL becomes
U+FFFD) and bounded by `cap_text`, which keeps the start of the text and
says, in the text, how much was cut, so a model reading it knows it saw a
part.
"""

import json
import re
import unicodedata
from enum import StrEnum

DEFAULT_MAX_INPUT_TEXT_BYTES = 256 * 1024
"""Default limit of one client text (user message, rejection reason): 256 KiB of UTF-8."""

DEFAULT_MAX_TOOL_OUTPUT_BYTES = 256 * 1024
"""Default limit of one stored tool output or tool error: 256 KiB of UTF-8."""

ERROR_TEXT_BYTES = 8 * 1024
"""Limit of a stored error text (engine recovery details, runner exceptions): 8 KiB."""

_UNSAFE = re.compile("[\x00\ud800-\udfff]")
_REPLACEMENT = "\ufffd"


class InputProblem(StrEnum):
    """Why a client text is refused."""

    BLANK = "blank"
    """Empty, or nothing but white space."""
    TOO_LARGE = "too_large"
    """More UTF-8 bytes than the limit."""
    LONE_SURROGATE = "lone_surrogate"
    """A UTF-16 surrogate without its pair: not Unicode text."""
    NUL_CHARACTER = "nul_character"
    """The character U+0000."""
    INVALID_ID = "invalid_id"
    """An ID that is empty, too long, or holds ``/``."""
    NOT_TEXT = "not_text"
    """Not a ``str`` at all."""
    NOT_JSON = "not_json"
    """Text that is not one JSON value (a submitted tool result), or a value with no JSON form."""


MAX_ID_LENGTH = 512
"""Longest session or interrupt ID the client sends (characters)."""


def utf8_size(text: str) -> int:
    """Return the UTF-8 size of ``text`` in bytes; a lone surrogate counts 3 bytes, as CESU-8 would store it."""
    return len(text.encode("utf-8", "surrogatepass"))


def check_input_text(text: str, *, max_bytes: int, allow_blank: bool = False) -> InputProblem | None:
    """Return why a client text must be refused, or ``None`` when it may be accepted.

    The checks run in the order of `InputProblem`, except that the size comes
    first, so that a huge text is judged without scanning it twice.
    """
    if len(text) > max_bytes or utf8_size(text) > max_bytes:
        return InputProblem.TOO_LARGE
    if not allow_blank and not text.strip():
        return InputProblem.BLANK
    unsafe = _UNSAFE.search(text)
    if unsafe is None:
        return None
    return InputProblem.NUL_CHARACTER if unsafe.group() == "\x00" else InputProblem.LONE_SURROGATE


def describe_input_problem(problem: InputProblem, *, what: str, size: int, max_bytes: int) -> str:
    """Return a one-line explanation of ``problem`` for ``what`` (e.g. "the user message")."""
    match problem:
        case InputProblem.BLANK:
            return f"{what} is blank"
        case InputProblem.TOO_LARGE:
            return f"{what} has {size:,} bytes of UTF-8; the limit is {max_bytes:,}"
        case InputProblem.LONE_SURROGATE:
            return f"{what} holds a lone UTF-16 surrogate, which is not Unicode text"
        case InputProblem.NUL_CHARACTER:
            return f"{what} holds the NUL character (U+0000)"
        case InputProblem.NOT_TEXT:
            return f"{what} must be text (str)"
        case InputProblem.INVALID_ID:
            return f"{what} must be 1 to {MAX_ID_LENGTH} characters of Unicode text without NUL"
        case InputProblem.NOT_JSON:
            return f"{what} is not JSON"


def check_id(value: str, *, allow_slash: bool = True) -> InputProblem | None:
    """Return `InputProblem.INVALID_ID` when ``value`` cannot be an ID, else ``None``.

    An ID is 1 to `MAX_ID_LENGTH` characters without NUL or lone surrogates;
    ``allow_slash=False`` refuses ``/`` too (interrupt IDs never hold one).
    """
    if not value or len(value) > MAX_ID_LENGTH or _UNSAFE.search(value) is not None:
        return InputProblem.INVALID_ID
    if not allow_slash and "/" in value:
        return InputProblem.INVALID_ID
    return None


SESSION_ID_RESERVED = "$:"
"""Characters Dex reserves in the Flow IDs an application starts (besides ``/``): a session cannot start with one."""

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories of characters that are not shown as themselves: controls, format (bidi) characters,
surrogates and line or paragraph separators."""


def session_id_problem(value: str, *, starting: bool = False) -> str | None:
    """Return why ``value`` cannot be a session ID (a phrase: "is blank"), or ``None`` when it can.

    A session ID is one path segment of a URL and a Dex Flow ID that a person
    can read and type: 1 to `MAX_ID_LENGTH` characters, not blank, without
    white space at either end, without ``/``, and without controls, format
    characters (bidi overrides included), lone surrogates or line separators.
    ``starting`` also refuses what Dex reserves in the IDs of the Flows an
    application starts (`SESSION_ID_RESERVED`).
    """
    if not value:
        return "is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"has {len(value):,} characters; the limit is {MAX_ID_LENGTH}"
    if not value.strip():
        return "is blank"
    if value != value.strip():
        return "starts or ends with white space"
    if "/" in value:
        return "holds a /"
    for character in value:
        if unicodedata.category(character) in _INVISIBLE_CATEGORIES:
            return f"holds the invisible or control character U+{ord(character):04X}"
    if starting:
        for character in SESSION_ID_RESERVED:
            if character in value:
                return f"holds {character!r}, which Dex reserves in the IDs of the Flows an application starts"
    return None


def sanitize_output_text(text: str) -> str:
    """Return ``text`` with every lone surrogate and NUL replaced by U+FFFD (unchanged when it has none)."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_REPLACEMENT, text)


def cap_text(text: str, max_bytes: int, *, what: str) -> str:
    """Return ``text`` if it fits in ``max_bytes`` of UTF-8, else its start and a notice of the cut.

    The result never exceeds ``max_bytes`` (the notice included) and never
    splits a character. ``what`` names the text in the notice, for example
    "the tool's output".
    """
    if len(text) * 4 <= max_bytes:
        return text  # even four bytes a character fit: no need to encode
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= max_bytes:
        return text
    notice = f"\n[dex-agents: {what} was {len(encoded):,} bytes; only its first {{kept:,}} bytes are shown.]"
    room = max(0, max_bytes - len(notice.format(kept=max_bytes)))
    kept = encoded[:room].decode("utf-8", "ignore")
    return kept + notice.format(kept=utf8_size(kept))


def json_text_size(text: str) -> int:
    """Return the size of ``text`` as a JSON string with every non-ASCII character escaped, quotes included."""
    return len(json.encoder.encode_basestring_ascii(text))
