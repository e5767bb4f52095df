r"""Text from others shown safely: control and invisible characters become visible marks, never themselves.

Model text, tool outputs, error messages and what a server answers reach a
terminal or a page, which would run an escape sequence (``ESC [ 2 J`` clears a
screen, OSC 52 writes a clipboard) or let a bidi override reorder what a person
reads. `visible` is the one rule, stdlib only so that every layer can use it
(the command line's `dex_agents.launch.output` builds its rich console on it;
the conformance probe prints a server's answers through it):

- C0 controls and DEL become their Unicode Control Pictures (ESC is ``␛``,
  NUL ``␀``); newlines and tabs stay; ``\r\n`` becomes ``\n``.
- C1 controls (U+0080-U+009F), bidi embeddings, overrides and isolates,
  zero-width and other invisible format characters, line and paragraph
  separators, Unicode tag characters and lone surrogates become an escape that
  names them (``\x9b``, ``\u202e``).
"""

import re

HIDDEN_CHARACTER = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f\ud800-\udfff]"
)
"""One character that must not reach a terminal as itself (newline and tab excepted)."""


def shown_character(character: str) -> str:
    """The visible mark of one `HIDDEN_CHARACTER`: a Control Picture for C0 and DEL, else an escape naming it."""
    code = ord(character)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str) -> str:
    """Return ``text`` with every control or invisible character replaced by a visible mark (see the module)."""
    if HIDDEN_CHARACTER.search(text) is None:
        return text
    return HIDDEN_CHARACTER.sub(lambda match: shown_character(match.group()), text.replace("\r\n", "\n"))
