"""Reading lines and approvals from a person without blocking the event loop.

`TerminalLines` reads standard input through the event loop (``add_reader``),
so Ctrl-C, a Worker or a stream reader keep running while a prompt waits, and
cancelling a prompt leaves no thread behind. Standard input that the loop
cannot watch (a regular file) is read in a thread instead; such reads never
wait for a person.

A terminal in its usual (canonical) mode holds at most `TERMINAL_LINE_LIMIT`
bytes of one line and drops the rest of a longer one before the program reads
it. `TerminalLines` says so instead of handing on a cut line: a line that
reached the limit comes back as a `CutLine`, which a command refuses with a
message. `read_block` reads text of any length: it turns canonical mode off
while the person pastes, up to a line holding only ``.`` (or Ctrl-D).

The approvers answer a session's approvals: `PromptApprover` asks
``Approve refund_order {"order_id": "7"}? [y/N]``; `FixedApprover` answers for
``--yes`` / ``--no`` and for a standard input that is not a terminal. An answer
other than yes is a rejection, and its words are the reason the model reads
(``n too expensive``: "too expensive"; a bare ``n`` gives `TERMINAL_REJECTION`):
`approval_decision`.
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
"""The rejection message of a call a person declined at a prompt without saying why."""

TERMINAL_LINE_LIMIT = 4095
"""Bytes of one line a Linux terminal in canonical mode keeps (its 4 KiB buffer, less the newline)."""

END_OF_BLOCK = "."
"""The line that ends text read with `read_block`."""

_CTRL_D = 0x04


class CutLine(str):
    """A line the terminal cut at its line limit: the rest of what was typed or pasted was dropped."""

    __slots__ = ()


def line_limit(fd: int) -> int:
    """The longest line (bytes) the terminal on ``fd`` holds in canonical mode."""
    if os.uname().sysname == "Linux":
        return TERMINAL_LINE_LIMIT  # PC_MAX_CANON says 255 there, but n_tty keeps 4095
    try:
        return max(1, os.fpathconf(fd, "PC_MAX_CANON") - 1)
    except (OSError, ValueError):
        return TERMINAL_LINE_LIMIT


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
        self._lines: deque[tuple[str, int]] = deque()
        """Lines read and not yet returned, each with its length in bytes."""
        self._eof = False

    @property
    def is_terminal(self) -> bool:
        """Whether the input is a terminal (a person may be typing)."""
        try:
            return self._stream.isatty()
        except ValueError:
            return False

    async def readline(self, prompt: str) -> str | None:
        """Show ``prompt`` and return the next line; ``None`` at end of input.

        On a terminal, a line as long as the terminal's line limit is a `CutLine`: the terminal dropped the rest.
        """
        if prompt:
            self._console.print(Text(prompt), end="")
            self._console.file.flush()
        read = await self._next_line()
        if read is None:
            if prompt:
                self._console.print()
            return None
        line, size = read
        if not self.is_terminal:
            # Echo piped answers so the transcript shows them.
            self._console.print(Text(line), highlight=False)
            return line
        return CutLine(line) if size >= line_limit(self._stream.fileno()) else line

    async def read_block(self, prompt: str) -> str | None:
        """Show ``prompt`` and return the text typed or pasted up to a line holding only ``.`` (or Ctrl-D).

        On a terminal, canonical mode is off meanwhile, so no line limit applies; ``None`` at end of input.
        """
        fd = self._terminal_fd()
        if fd is None:
            self._console.print(Text(prompt))
            return await self._block_of_lines()
        import termios

        saved = termios.tcgetattr(fd)
        raw = termios.tcgetattr(fd)
        raw[3] &= ~termios.ICANON  # lflag: no line buffer (echo stays on)
        raw[6][termios.VMIN], raw[6][termios.VTIME] = 1, 0
        termios.tcsetattr(fd, termios.TCSANOW, raw)
        try:
            # The prompt only once the line limit is off: text pasted as soon as it shows is not cut.
            self._console.print(Text(prompt))
            # Lines the terminal already handed over (a paste that arrived with the command) come first.
            block = bytearray(b"".join(line.encode() + b"\n" for line, _size in self._lines) + self._buffer)
            self._lines.clear()
            self._buffer.clear()
            while True:
                text = block.replace(b"\r", b"\n")
                if _CTRL_D in text:
                    return text[: text.index(_CTRL_D)].decode(errors="replace").rstrip("\n")
                lines = text.decode(errors="replace").split("\n")
                if END_OF_BLOCK in lines[:-1]:
                    return "\n".join(lines[: lines.index(END_OF_BLOCK)])
                chunk = await self._read_chunk()
                if not chunk:
                    return text.decode(errors="replace").rstrip("\n") or None
                block.extend(chunk)
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, saved)

    async def _block_of_lines(self) -> str | None:
        lines: list[str] = []
        while True:
            read = await self._next_line()
            if read is None:
                return "\n".join(lines) if lines else None
            if read[0] == END_OF_BLOCK:
                return "\n".join(lines)
            lines.append(read[0])

    def _terminal_fd(self) -> int | None:
        if not self.is_terminal:
            return None
        try:
            return self._stream.fileno()
        except (OSError, ValueError):
            return None

    async def _next_line(self) -> tuple[str, int] | None:
        while not self._lines:
            if self._eof:
                return None
            chunk = await self._read_chunk()
            if not chunk:
                self._eof = True
                if self._buffer:
                    self._lines.append((self._buffer.decode(errors="replace"), len(self._buffer)))
                    self._buffer.clear()
                continue
            self._buffer.extend(chunk)
            while (newline := self._buffer.find(b"\n")) >= 0:
                raw = self._buffer[:newline]
                self._lines.append((raw.decode(errors="replace").rstrip("\r"), len(raw)))
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


async def read_text_block(lines: LineSource, console: Console, prompt: str) -> str | None:
    """Text of any length from ``lines``, up to a line with only ``.``: `TerminalLines.read_block`, or line by line."""
    read_block = getattr(lines, "read_block", None)
    if read_block is not None:
        block: str | None = await read_block(prompt)
        return block
    console.print(Text(prompt, style="dim"))
    collected: list[str] = []
    while (line := await lines.readline("")) is not None and line != END_OF_BLOCK:
        collected.append(line)
    return "\n".join(collected)


def cut_line_notice(line: str) -> Text:
    """What a command prints for a `CutLine` instead of using it."""
    return Text(
        f"the terminal cut this line at {len(line.encode()):,} bytes, its line limit, and dropped the rest: "
        "nothing was sent. For long text type /paste, paste it, then a line with only '.'",
        style="red",
    )


def approval_question(request: ApprovalRequest) -> str:
    """Return ``Approve <tool> <arguments>? [y/N] ``."""
    return f"Approve {request.tool_name} {compact_json(request.arguments)}? [y/N] "


def parse_yes(answer: str | None) -> bool:
    """Whether an answer to a ``[y/N]`` question is yes (anything else, or nothing, is no)."""
    return answer is not None and answer.strip().lower() in ("y", "yes")


def approval_decision(answer: str | None) -> ApprovalDecision:
    """The decision an answer to an approval question gives: yes approves, anything else rejects.

    A rejection's reason is what follows a leading ``n``/``no`` (``n too expensive``), or the whole
    answer when it is not a bare no; a bare no (or nothing) gives `TERMINAL_REJECTION`.
    """
    if parse_yes(answer):
        return ApprovalDecision(approved=True)
    text = (answer or "").strip()
    first, _, rest = text.partition(" ")
    reason = rest.strip() if first.lower().rstrip(":,") in ("n", "no") else text
    return ApprovalDecision(approved=False, rejection_message=reason or TERMINAL_REJECTION)


class PromptApprover:
    """Asks a person at the terminal."""

    def __init__(self, lines: LineSource) -> None:
        """Create an approver that reads the answer from ``lines``."""
        self._lines = lines

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        """Ask, and approve only on ``y`` or ``yes``."""
        return approval_decision(await self._lines.readline(approval_question(request)))


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
