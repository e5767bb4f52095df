"""How a command runs and fails, and the options several commands share.

Every command is a coroutine run by `asyncio.run`, printing through a
`dex_agents.launch.output.SafeConsole`: control characters in anything shown
(model text, tool output, reasons, IDs, errors) appear as visible marks,
never as escape codes the terminal would run. A failure prints one line,
``error: ...``, on standard error and exits non-zero (2 for malformed input, 1
otherwise); ``--debug`` adds the traceback. Ctrl-C cancels the coroutine, so
every Worker, server and child process it started is stopped on the way out,
and exits 130.
"""

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.text import Text

from dex_agents.launch.errors import EXIT_INTERRUPTED, EXIT_OK, CliError, explain
from dex_agents.launch.output import SafeConsole, install_visible_logging

F = TypeVar("F", bound=Callable[..., Any])

NON_TERMINAL_WIDTH = 100
"""Columns used when standard output is not a terminal and ``COLUMNS`` is unset."""

DEFAULT_SERVER = "127.0.0.1:8801"
"""Where ``watch``, ``approve`` and ``reject`` look for Dex by default (``dex-agents dev-server``'s port)."""

Command = Callable[[Console], Coroutine[Any, Any, None]]


def make_console() -> Console:
    """Return the console for standard output (100 columns when it is not a terminal).

    A `SafeConsole`: control characters in what it prints show as visible marks (`dex_agents.launch.output`).
    """
    console = SafeConsole(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = SafeConsole(highlight=False, width=NON_TERMINAL_WIDTH)
    return console


def run(command: Command, *, debug: bool) -> int:
    """Run one command's coroutine and return the exit code (errors are printed, not raised)."""
    install_visible_logging()
    errors = SafeConsole(stderr=True, highlight=False)
    console = make_console()
    try:
        asyncio.run(command(console))
    except KeyboardInterrupt:
        if errors.is_terminal:
            errors.print()  # after the ^C the terminal echoed
        errors.print(Text("interrupted", style="yellow"))
        return EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 - the one place every failure becomes one line
        if debug:
            errors.print_exception()
        problem = explain(error)
        line = Text("error: ", style="bold red") + Text(problem.message)
        if not debug and not isinstance(error, CliError):
            line += Text(" (--debug prints the traceback)", style="dim")
        errors.print(line, soft_wrap=True)
        return problem.exit_code
    return EXIT_OK


def debug_option(function: F) -> F:
    """Add ``--debug`` to a command."""
    option = click.option(
        "--debug", is_flag=True, default=False, help="Print the traceback of a failure.", is_eager=False
    )
    return option(function)


def wants_debug(ctx: click.Context, *, debug: bool) -> bool:
    """Whether a command prints tracebacks: its own ``--debug`` or the group's."""
    return debug or bool(ctx.obj and ctx.obj.get("debug"))


def approver_option(function: F) -> F:
    """Add ``--approver NAME`` to a command."""
    option = click.option(
        "--approver",
        metavar="NAME",
        default=None,
        callback=check_approver,
        help="Who your approvals and rejections name (default: your OS user name).",
    )
    return option(function)


def check_approver(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse a blank ``--approver``, one over 512 characters, or one with a NUL."""
    if value is not None and (not value.strip() or len(value) > 512 or "\x00" in value):
        raise click.BadParameter("give 1 to 512 characters of text (not blank)", ctx, param)
    return value


def server_option(function: F) -> F:
    """Add ``--server HOST:PORT`` (default: `DEFAULT_SERVER`) to a command."""
    option = click.option(
        "--server", metavar="HOST:PORT", default=DEFAULT_SERVER, show_default=True, help="The Dex server."
    )
    return option(function)


def flow_option(function: F) -> F:
    """Add the required ``--flow MODULE:FLOW_FACTORY`` to a command."""
    option = click.option(
        "--flow",
        "flow_target",
        metavar="MODULE:FLOW_FACTORY",
        required=True,
        help="The session's Flow (the same factory its Worker serves).",
    )
    return option(function)
