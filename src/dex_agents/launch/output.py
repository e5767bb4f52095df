r"""Everything the command line prints shows control characters as visible marks: it never runs them.

Model text, tool arguments and outputs, reasons, session and interrupt IDs,
error messages: what a command prints comes from other people and from models,
and a terminal runs what it is sent. ``ESC ] 0 ; PWNED ESC \`` sets a terminal's
title, ``ESC [ 2 J`` clears its screen, ``ESC [ 8 m`` hides the text that
follows (the arguments of the approval being answered, say), OSC 52 writes the
clipboard on some terminals, and a bidi override reorders what a person reads.

`SafeConsole` is the one place this is dealt with: the `rich.console.Console`
every command prints through (`dex_agents.cli.running.make_console`, and
`safe_console` for a console handed in from elsewhere). Everything it renders
passes `visible`, so every view (``watch``, ``chat``, ``demo``, the console
command's lines, errors and tracebacks) is covered at once, however its text
was built:

- C0 controls and DEL become their Unicode Control Pictures (ESC is ``␛``,
  NUL ``␀``); newlines and tabs stay, as the views need them.
- C1 controls (U+0080-U+009F, among them the one-byte CSI ``\x9b``), bidi
  embeddings, overrides and isolates, zero-width and other invisible format
  characters, line and paragraph separators, Unicode tag characters and lone
  surrogates become an escape that names them (``\x9b``, ``\u202e``).

Rich's own control codes (colour, cursor moves of a live display) are not
text and pass untouched. Rich itself drops BEL, BS, VT, FF and CR from text;
those never reach the terminal either. Markup and emoji codes in printed
strings are not interpreted (``[link=...]`` would write an OSC 8 hyperlink).

`VisibleWriter` applies `visible` to plain text written to a stream, for what
the command line prints without rich (click's usage errors), and
`VisibleLogFormatter` to log records (a traceback quotes what it failed on):
`install_visible_logging` gives the root logger such a handler, and
`UVICORN_LOG_CONFIG` gives uvicorn's loggers one (the web console and
``dex-agents serve`` pass it to uvicorn).
"""

import logging
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from dex_agents.domain.shown_text import HIDDEN_CHARACTER as _HIDDEN
from dex_agents.domain.shown_text import shown_character as _shown
from dex_agents.domain.shown_text import visible as visible


def visible_text(text: Text) -> Text:
    """Return ``text`` (rich `Text`) with `visible` applied to its characters, its styles kept."""
    plain = text.plain
    if _HIDDEN.search(plain) is None:
        return text
    cuts = sorted({offset for match in _HIDDEN.finditer(plain) for offset in (match.start(), match.end())})
    result = text.blank_copy()
    for piece in text.divide(cuts):
        if len(piece.plain) == 1 and _HIDDEN.match(piece.plain):
            mark = Text(_shown(piece.plain), style=piece.style)
            for span in piece.spans:
                mark.stylize(span.style)
            result.append_text(mark)
        else:
            result.append_text(piece)
    return result


class SafeConsole(Console):
    """A rich console whose output shows control characters visibly (`visible`) instead of sending them."""

    def __init__(self, *, markup: bool = False, emoji: bool = False, **options: Any) -> None:
        """Create the console (``options`` as for rich's); markup and emoji codes in printed strings are off."""
        super().__init__(markup=markup, emoji=emoji, **options)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """Render like rich, with every text made `visible` first (so its layout counts the marks)."""
        if isinstance(renderable, Text):
            renderable = visible_text(renderable)
        elif isinstance(renderable, str):
            renderable = visible(renderable)
        for segment in super().render(renderable, options):
            if segment.control is None and _HIDDEN.search(segment.text) is not None:
                yield Segment(visible(segment.text), segment.style)
            else:
                yield segment


def safe_console(console: Console) -> Console:
    """Return ``console`` if it is a `SafeConsole`, else one printing to the same place with the same settings."""
    if isinstance(console, SafeConsole):
        return console
    terminal = console.is_terminal
    return SafeConsole(
        file=console.file,
        width=None if terminal else console.width,
        height=None if terminal else console.height,
        color_system=console.color_system,
        force_terminal=terminal,
        no_color=console.no_color,
        soft_wrap=console.soft_wrap,
        legacy_windows=console.legacy_windows,
        safe_box=console.safe_box,
        tab_size=console.tab_size,
        quiet=console.quiet,
        highlight=False,
    )


class VisibleWriter:
    """A text stream that writes what it is given to another one, made `visible` first."""

    def __init__(self, stream: TextIO) -> None:
        """Wrap ``stream``."""
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text``, made visible."""
        return self._stream.write(visible(text))

    def flush(self) -> None:
        """Flush the stream."""
        self._stream.flush()


class VisibleLogFormatter(logging.Formatter):
    """A log formatter whose lines (message and traceback) are made `visible`."""

    def format(self, record: logging.LogRecord) -> str:
        """Format ``record`` as `logging.Formatter` does, then make it visible."""
        return visible(super().format(record))


UVICORN_LOG_CONFIG: dict[str, object] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "visible": {"()": "dex_agents.launch.output.VisibleLogFormatter", "fmt": "%(levelname)s: %(message)s"}
    },
    "handlers": {"stderr": {"formatter": "visible", "class": "logging.StreamHandler", "stream": "ext://sys.stderr"}},
    "loggers": {
        "uvicorn": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
        "uvicorn.error": {"level": "INFO"},
        "uvicorn.access": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
    },
}
"""uvicorn's logging (``uvicorn.Config(log_config=...)``): what it logs (a traceback quotes the request that
failed) shows control characters visibly."""


def install_visible_logging() -> None:
    """Log warnings and errors to standard error through `VisibleLogFormatter`, unless logging is set up already."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(VisibleLogFormatter("%(message)s"))
    root.addHandler(handler)
