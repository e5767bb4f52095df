"""How the command line fails: one clear line and an exit code, a traceback only with ``--debug``.

`CliError` is what a command raises for a problem the person can fix (bad
input, an unreachable server, an unknown session). `explain` turns any other
exception a command lets escape into one line as well, so nothing but
``--debug`` prints a traceback.
"""

import dex

EXIT_OK = 0
"""Success."""
EXIT_FAILURE = 1
"""The command ran and failed (unreachable server, unknown session, a refused answer, ...)."""
EXIT_USAGE = 2
"""The command line or an input line was malformed (click uses 2 as well)."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (128 + SIGINT)."""


class CliError(Exception):
    """A failure to report as one line, with its exit code."""

    def __init__(self, message: str, *, exit_code: int = EXIT_FAILURE) -> None:
        """Create the error.

        Args:
            message: one line for the person, without a leading ``error:``.
            exit_code: the process exit code.
        """
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class UsageError(CliError):
    """Malformed input: exit code 2."""

    def __init__(self, message: str) -> None:
        """Create the error with exit code 2."""
        super().__init__(message, exit_code=EXIT_USAGE)


def explain(error: BaseException) -> CliError:
    """Return ``error`` as a `CliError` with one line that says what went wrong."""
    if isinstance(error, CliError):
        return error
    if isinstance(error, dex.FlowNotFoundError | dex.FlowNotActiveOrNotFoundError):
        target = f"session {error.flow_id!r}" if error.flow_id else "the session"
        return CliError(f"unknown {target}: {error.detail}")
    if isinstance(error, dex.DexServiceError):
        return CliError(f"Dex {error.operation or 'call'} failed: {' '.join(error.detail.split())}")
    text = " ".join(str(error).split())
    return CliError(f"{type(error).__name__}: {text}" if text else type(error).__name__)
