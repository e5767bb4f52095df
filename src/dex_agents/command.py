"""The ``dex-agents`` console script: the command line, or how to install it.

The command line (`dex_agents.cli`) needs the ``cli`` extra (click, rich and
the ``pydantic-ai`` extra for its demo and model agents). The script is
installed with the core package too, so without the extra it prints one line
saying which extra to install and exits 1, instead of an import traceback.
"""

import sys

CLI_MODULES = frozenset({"click", "rich", "pydantic_ai", "pydantic_graph"})
"""Top-level modules of the ``cli`` extra's packages."""

MISSING_EXTRA = "dex-agents: the command line needs the cli extra: pip install 'dex-agents[cli]' (no module {name!r})"
"""What the script prints when a module of the extra is missing."""


def main() -> int:
    """Run the command line; exit 1 with an install hint when the ``cli`` extra is missing."""
    try:
        from dex_agents.cli.app import main as cli_main
    except ModuleNotFoundError as error:
        name = (error.name or "").partition(".")[0]
        if name not in CLI_MODULES:
            raise
        sys.stderr.write(MISSING_EXTRA.format(name=name) + "\n")
        return 1
    return cli_main()
