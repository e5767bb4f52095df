"""How the command line fails: `dex_agents.launch.errors`, which the web console shares."""

from dex_agents.launch.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CliError, UsageError, explain

__all__ = ["EXIT_FAILURE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "CliError", "UsageError", "explain"]
