"""The command line's one output sanitiser: control characters are shown as marks, never sent to the terminal."""

import io
import re

import pytest
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from dex_agents.cli.app import main, make_console, run
from dex_agents.cli.errors import CliError
from dex_agents.cli.output import SafeConsole, VisibleWriter, safe_console, visible
from dex_agents.cli.render import EventRenderer
from dex_agents.cli.views import MARK
from dex_agents.domain.events import AgentEvent, text_delta

ATTACK = "\x1b]0;PWNED\x1b\\ \x1b[2J\x1b[8mHIDDEN\x1b[0m"
"""Sets the window title, clears the screen, hides what follows."""

_RICH_OWN = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""What rich itself sends a colour terminal: SGR styles and cursor moves (CSI with digits only)."""


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (ATTACK, "␛]0;PWNED␛\\ ␛[2J␛[8mHIDDEN␛[0m"),
        ("\x1b]52;c;ZXZpbA==\x07", "␛]52;c;ZXZpbA==␇"),  # OSC 52 writes the clipboard
        ("\x9b31m", "\\x9b31m"),  # the one-byte CSI of C1
        ("\x85 \x90 \x9d", "\\x85 \\x90 \\x9d"),
        ("a\u202eb\u202cc \u2066d\u2069", "a\\u202eb\\u202cc \\u2066d\\u2069"),  # bidi overrides and isolates
        ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("tag\U000e0041", "tag\\U000e0041"),
        ("lone \ud800", "lone \\ud800"),
        ("nul\x00 del\x7f bs\x08 cr\r", "nul␀ del␡ bs␈ cr␍"),
        ("keeps\nnew lines\tand tabs", "keeps\nnew lines\tand tabs"),
        ("windows\r\nline", "windows\nline"),
        ("plain é ✓ 日本 👨‍👩‍👧", "plain é ✓ 日本 👨‍👩‍👧"),
    ],
)
def test_visible_shows_every_control_character_as_a_mark(text: str, shown: str) -> None:
    assert visible(text) == shown


def _colour_console() -> tuple[SafeConsole, io.StringIO]:
    out = io.StringIO()
    return SafeConsole(file=out, width=80, force_terminal=True, color_system="standard", highlight=False), out


def _only_rich_codes(output: str) -> None:
    assert "\x1b]" not in output
    assert "\x9b" not in output
    assert "\u202e" not in output
    for escape in re.findall(r"\x1b.{0,12}", output):
        assert _RICH_OWN.match(escape), repr(escape)


def test_a_safe_console_keeps_its_own_colours_and_cursor_moves_but_sends_no_other_escape() -> None:
    console, out = _colour_console()
    console.print(Text(f"assistant {MARK} ", style="bold cyan") + Text(ATTACK + " \x9b2J \u202eevil"))
    console.print(ATTACK)  # a string, like a Text
    table = Table("tool", "output")
    table.add_row("publish", ATTACK)
    console.print(table)
    with Live(Text(ATTACK), console=console, auto_refresh=False) as live:
        live.update(Text("again " + ATTACK), refresh=True)
    console.rule(Text(ATTACK))
    output = out.getvalue()
    _only_rich_codes(output)
    assert "\x1b[1m" in output or "\x1b[1;36m" in output  # its own styles still work
    assert "␛]0;PWNED" in output


def test_markup_and_emoji_codes_in_printed_strings_are_shown_as_typed() -> None:
    console, out = _colour_console()
    console.print("[link=https://evil.example]click[/link] :smile:")
    assert "\x1b]8;" not in out.getvalue()  # no OSC 8 hyperlink
    assert "[link=https://evil.example]click[/link] :smile:" in out.getvalue()


def test_every_command_prints_through_a_safe_console_and_a_handed_in_console_is_made_safe() -> None:
    assert isinstance(make_console(), SafeConsole)
    out = io.StringIO()
    plain = Console(file=out, width=120, color_system=None)
    safe = safe_console(plain)
    assert isinstance(safe, SafeConsole)
    assert safe_console(safe) is safe
    assert safe.width == 120
    renderer = EventRenderer(safe, live=False)
    event = AgentEvent.enveloped(text_delta(ATTACK), turn_id="turn-1", step_execution_id="RunModel-1", attempt=1)
    renderer.handle(event)
    renderer.close()
    assert out.getvalue() == f"assistant {MARK} ␛]0;PWNED␛\\ ␛[2J␛[8mHIDDEN␛[0m\n"


def test_an_error_line_and_click_s_own_messages_show_control_characters_visibly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def failing(console: Console) -> None:
        raise CliError("the session said \x1b]0;PWNED\x07")

    assert run(failing, debug=False) == 1
    assert capsys.readouterr().err == "error: the session said ␛]0;PWNED\n"  # rich drops BEL itself
    assert main(["demo", "--framework", "\x1b[2J"]) == 2
    assert "\x1b" not in capsys.readouterr().err
    written = io.StringIO()
    VisibleWriter(written).write("a\x1bb")
    assert written.getvalue() == "a␛b"
