"""Reading lines and approvals from a person without blocking the event loop.

`TerminalLines` reads standard input through the event loop (``add_reader``),
so Ctrl-C, a Worker or a stream reader keep running while a prompt waits, and
cancelling a prompt leaves no thread behind. Standard input that the loop
cannot watch (a regular file) is read in a thread instead; such reads never
wait for a person.

The approvers answer a session's approvals: `PromptApprover` asks
``Approve refund_order {"order_id": "7"}? [y/N]``; `FixedApprover` answers for
``--yes`` / ``--no`` and for a standard input that is not a terminal.
"""

import asyncio
import os
import sys
from collections import deque
from typing import Protocol, TextIO

from rich.console import Console
from rich.text import Text

from dex_agents.cli.follow import ApprovalDecision, ApprovalRequest
from dex_agents.cli.views import compact_json

TERMINAL_REJECTION = "Rejected at the terminal."
"""The rejection message of a call a person declined at a prompt."""


class LineSource(Protocol):
    """Where a command reads what a person types."""

    async def readline(self, prompt: str) -> str | None:
        """Show ``prompt`` and return the next line without its newline; ``None`` at end of input."""
        ...


class TerminalLines:
    """Lines from standard input, read through the event loop."""

    def __init__(self, console: Console, stream: TextIO | None = None) -> None:
        """Create a reader.

        Args:
            console: where prompts are printed.
            stream: the input; standard input by default.
        """
        self._console = console
        self._stream: TextIO = stream or sys.stdin
        self._buffer = bytearray()
        self._lines: deque[str] = deque()
        self._eof = False

    @property
    def is_terminal(self) -> bool:
        """Whether the input is a terminal (a person may be typing)."""
        try:
            return self._stream.isatty()
        except ValueError:
            return False

    async def readline(self, prompt: str) -> str | None:
        """Show ``prompt`` and return the next line; ``None`` at end of input."""
        if prompt:
            self._console.print(Text(prompt), end="")
            self._console.file.flush()
        line = await self._next_line()
        if line is not None and not self.is_terminal:
            # Echo piped answers so the transcript shows them.
            self._console.print(Text(line), highlight=False)
        elif line is None and prompt:
            self._console.print()
        return line

    async def _next_line(self) -> str | None:
        while not self._lines:
            if self._eof:
                return None
            chunk = await self._read_chunk()
            if not chunk:
                self._eof = True
                if self._buffer:
                    self._lines.append(self._buffer.decode(errors="replace"))
                    self._buffer.clear()
                continue
            self._buffer.extend(chunk)
            while (newline := self._buffer.find(b"\n")) >= 0:
                self._lines.append(self._buffer[:newline].decode(errors="replace").rstrip("\r"))
                del self._buffer[: newline + 1]
        return self._lines.popleft()

    async def _read_chunk(self) -> bytes:
        try:
            fd = self._stream.fileno()
        except (OSError, ValueError):
            text = await asyncio.to_thread(self._stream.readline)
            return text.encode()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def on_readable() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(fd, on_readable)
        except (PermissionError, OSError, ValueError):
            # A regular file: the loop cannot watch it, and reading it never waits for a person.
            return await asyncio.to_thread(os.read, fd, 4096)
        try:
            await ready
        finally:
            loop.remove_reader(fd)
        try:
            return os.read(fd, 4096)
        except BlockingIOError:  # pragma: no cover - readable, then taken by someone else
            return await self._read_chunk()


class TypedLines:
    """Lines a person types at moments of their choosing (tests feed them with `type`); like a terminal.

    `ChatSession` reads a terminal while a turn runs, so a line typed then
    steers or queues; this source behaves the same way, for tests.
    """

    is_terminal = True
    """Lines arrive when typed, as on a terminal."""

    def __init__(self, console: Console) -> None:
        """Create a source with nothing typed yet."""
        self._console = console
        self._typed: asyncio.Queue[str | None] = asyncio.Queue()

    def type(self, line: str | None) -> None:
        """Type ``line`` (``None``: end of input)."""
        self._typed.put_nowait(line)

    async def readline(self, prompt: str) -> str | None:
        """Print ``prompt``, wait for the next typed line, print it and return it."""
        line = await self._typed.get()
        self._console.print(Text(prompt) + Text(line or ""))
        return line


class ScriptedLines:
    """Lines given in advance (for tests and scripted runs); prompts and answers are printed."""

    def __init__(self, console: Console, lines: list[str]) -> None:
        """Create a source that answers ``lines`` in order, then reports end of input."""
        self._console = console
        self._lines = deque(lines)

    async def readline(self, prompt: str) -> str | None:
        """Print ``prompt`` and the next scripted line, and return the line."""
        if not self._lines:
            return None
        line = self._lines.popleft()
        self._console.print(Text(prompt) + Text(line))
        return line


def approval_question(request: ApprovalRequest) -> str:
    """Return ``Approve <tool> <arguments>? [y/N] ``."""
    return f"Approve {request.tool_name} {compact_json(request.arguments)}? [y/N] "


def parse_yes(answer: str | None) -> bool:
    """Whether an answer to a ``[y/N]`` question is yes (anything else, or nothing, is no)."""
    return answer is not None and answer.strip().lower() in ("y", "yes")


class PromptApprover:
    """Asks a person at the terminal."""

    def __init__(self, lines: LineSource) -> None:
        """Create an approver that reads the answer from ``lines``."""
        self._lines = lines

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        """Ask, and approve only on ``y`` or ``yes``."""
        answer = await self._lines.readline(approval_question(request))
        if parse_yes(answer):
            return ApprovalDecision(approved=True)
        return ApprovalDecision(approved=False, rejection_message=TERMINAL_REJECTION)


class FixedApprover:
    """Gives the same answer to every approval, and prints the question with it."""

    def __init__(self, console: Console, *, approved: bool, because: str, rejection_message: str) -> None:
        """Create an approver.

        Args:
            console: where the question and answer are printed.
            approved: the answer.
            because: why no one was asked (``--yes``, ``--no``, no terminal).
            rejection_message: the message sent with a rejection.
        """
        self._console = console
        self._approved = approved
        self._because = because
        self._rejection_message = rejection_message

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        """Print the question and the fixed answer, and return it."""
        answer = "y" if self._approved else "n"
        self._console.print(
            Text(approval_question(request)) + Text(answer, style="bold") + Text(f"  ({self._because})", style="dim")
        )
        if self._approved:
            return ApprovalDecision(approved=True)
        return ApprovalDecision(approved=False, rejection_message=self._rejection_message)
