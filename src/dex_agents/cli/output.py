"""Everything the command line prints passes one sanitiser: `dex_agents.launch.output`, which the web console shares."""

from dex_agents.launch.output import (
    SafeConsole,
    VisibleLogFormatter,
    VisibleWriter,
    install_visible_logging,
    safe_console,
    visible,
    visible_text,
)

__all__ = [
    "SafeConsole",
    "VisibleLogFormatter",
    "VisibleWriter",
    "install_visible_logging",
    "safe_console",
    "visible",
    "visible_text",
]
