"""`dex-agents chat`: its core driven line by line, and the real command through a pseudo-terminal."""

import contextlib
import io
import os
import pty
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from dex_agents.cli.chat import AfterQuit, ChatSession
from dex_agents.cli.shop import STATE_ENV, read_outbox, read_refunds
from dex_agents.cli.terminal import ScriptedLines
from dex_agents.testing import wait_until
from tests.integration.cli.support import ASSISTANT, ORDER_FLOW, PROMPT, YOU, OrderStack, cli_env, command, strip_ansi

pytestmark = pytest.mark.integration


async def test_chat_approves_one_refund_rejects_another_and_shows_snapshot_history_and_stop(
    stack: OrderStack,
) -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False)
    lines = ScriptedLines(
        console, [PROMPT, "y", "Refund order 8", "n", "/snapshot", "/history", "/nonsense", "/stop", "never read"]
    )
    chat = ChatSession(stack.sessions, "chat-1", console, lines, after_quit=AfterQuit.ENDS_WITH_CHAT)
    assert await chat.start()
    await chat.run()
    printed = out.getvalue()

    def after(anchor: str, *lines: str) -> None:
        start = printed.index(anchor)
        for line in lines:
            assert line in printed[start:], f"{line!r} after {anchor!r} in:\n{printed}"

    after(
        YOU + PROMPT,
        'Approve refund_order {"order_id": "7"}? [y/N] y',
        "✓ approved (turn-1.call-2)",
        "✓ refund_order succeeded → Refund R-1 of 42.00 EUR issued for order 7",
        ASSISTANT + "Done: order 7 is refunded (R-1, 42.00 EUR) and the customer has been emailed.",
        "✓ turn-1 completed",
    )
    after(
        YOU + "Refund order 8",
        'Approve refund_order {"order_id": "8"}? [y/N] n',
        "✗ rejected (turn-2.call-2): Rejected at the terminal.",
        ASSISTANT + "I did not refund order 8: the refund was not approved (Rejected at the terminal).",
        "✓ turn-2 completed",
    )
    after(
        YOU + "/snapshot",
        "Snapshot of session chat-1 · waiting_for_user_message · 2 turns · 16 messages",
        "Usage: 7 model calls",
    )
    after(
        YOU + "/history",
        "History of chat-1",
        "← refund_order ✓ succeeded",  # the outcome stays on the stored tool result after the turn
        "← refund_order ✗ rejected",
        "16   turn-2   assistant   I did not refund order 8",
    )
    after(YOU + "/nonsense", "unknown command /nonsense (try /help)")
    after(YOU + "/stop", "session chat-1 stopped")
    assert "never read" not in printed
    assert printed.count(YOU + PROMPT) == 1  # what the person typed is not echoed again
    assert [(r.refund_id, r.order_id) for r in read_refunds(stack.shop)] == [("R-1", "7")]
    assert [mail["to"] for mail in read_outbox(stack.shop)] == ["ada@example.com"]
    assert chat.stopped


async def test_quit_on_a_server_leaves_the_session_running_and_says_so(stack: OrderStack) -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False)
    lines = ScriptedLines(console, ["/help", "/quit", "never read"])
    chat = ChatSession(stack.sessions, "chat-q", console, lines, after_quit=AfterQuit.KEEPS_RUNNING)
    assert await chat.start()
    await chat.run()
    printed = out.getvalue()
    assert "/quit (leave without stopping it)" in printed
    assert "left session chat-q; it keeps running on the server" in printed
    assert "never read" not in printed
    assert not chat.stopped

    # Still there to join: the session answers, and its start Step (which may still be running) writes its state.
    async def started() -> object:
        return (await stack.sessions.get_agent_snapshot("chat-q")).state

    assert await wait_until("chat-q's state", started)


def read_until(fd: int, needle: str, screen: list[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while needle not in strip_ansi("".join(screen)):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"{needle!r} never appeared on the terminal:\n{strip_ansi(''.join(screen))}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                screen.append(os.read(fd, 65536).decode(errors="replace"))
            except OSError:  # the child closed the terminal
                break


@contextlib.contextmanager
def chat_in_a_terminal(
    *args: str, columns: int, state: Path
) -> Iterator[tuple[int, subprocess.Popen[bytes], list[str]]]:
    """``dex-agents chat ARGS`` on a pseudo-terminal: its controller end, the process and a list for what it shows.

    The process is killed if it still runs when the block ends.
    """
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        command("chat", *args),
        env=cli_env(TERM="xterm", COLUMNS=str(columns), LINES="40", **{STATE_ENV: str(state)}),
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
    )
    os.close(terminal)
    try:
        yield controller, process, []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)


def test_chat_in_a_terminal_streams_the_answer_and_asks_for_approval_inline(tmp_path: Path) -> None:
    with chat_in_a_terminal(ORDER_FLOW, "--session", "pty-chat", columns=120, state=tmp_path) as (
        controller,
        process,
        screen,
    ):
        read_until(controller, YOU, screen)
        os.write(controller, f"{PROMPT}\n".encode())
        read_until(controller, 'Approve refund_order {"order_id": "7"}? [y/N]', screen)
        os.write(controller, b"y\n")
        read_until(controller, "turn-1 completed", screen)
        os.write(controller, b"/stop\n")
        read_until(controller, "session pty-chat stopped", screen)
        assert process.wait(timeout=20) == 0
    shown = strip_ansi("".join(screen))
    assert "chat with OrderAgent · session pty-chat (new) · the dev server in this process" in shown
    assert "✓ refund_order succeeded → Refund R-1 of 42.00 EUR issued for order 7" in shown
    assert ASSISTANT + "Done: order 7 is refunded (R-1, 42.00 EUR) and the customer has been emailed." in shown
    assert [refund.order_id for refund in read_refunds(tmp_path)] == ["7"]


def test_a_terminal_chat_in_memory_sends_no_cut_line_pastes_long_text_whole_and_quit_says_the_session_ends_with_it(
    tmp_path: Path,
) -> None:
    long_text = "What about order 8? " + "please " * 1000  # about 7 KB on one line: past the terminal's 4,095 bytes
    with chat_in_a_terminal(ORDER_FLOW, "--session", "pty-quit", "--in-memory", columns=200, state=tmp_path) as (
        controller,
        process,
        screen,
    ):
        read_until(controller, YOU, screen)
        os.write(controller, f"{long_text}\n".encode())
        read_until(controller, "the terminal cut this line at 4,095 bytes", screen)
        os.write(controller, b"/paste\n")
        read_until(controller, "paste the text, then a line with only '.'", screen)
        os.write(controller, f"{long_text}\nand a second line\n.\n".encode())
        read_until(controller, f"sending {len(long_text) + 18:,} characters (2 lines)", screen)
        read_until(controller, "turn-1 completed", screen)
        os.write(controller, b"/quit\n")
        read_until(controller, "left session pty-quit;", screen)
        assert process.wait(timeout=20) == 0
    shown = " ".join(strip_ansi("".join(screen)).split())
    assert "nothing was sent" in shown
    assert shown.count("turn-1 ─") == 1, "only the pasted text started a turn"
    assert "left session pty-quit; it ends with this chat (its dev server runs in this process" in shown
    assert "keeps running" not in shown


def test_chat_keeps_its_sessions_and_chat_session_id_goes_on_with_one_after_chat_exited(tmp_path: Path) -> None:
    data = tmp_path / "chat-data"

    def chat(*lines: str) -> str:
        done = subprocess.run(
            command("chat", ORDER_FLOW, "--session", "kept", "--data", str(data)),
            input="".join(f"{line}\n" for line in lines),
            env=cli_env(**{STATE_ENV: str(tmp_path)}),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return " ".join(strip_ansi(done.stdout).split())

    said = chat(PROMPT, "y", "/quit")
    assert f"sessions kept in {data}" in said
    assert "left session kept; it is kept with this chat's data: chat --session kept picks it up again" in said
    shown = chat("/history", "/quit")
    assert "session kept (joined)" in shown
    assert "History of kept" in shown
    assert "Done: order 7 is refunded (R-1, 42.00 EUR)" in shown, "the first chat's turn is still there"
    assert [refund.order_id for refund in read_refunds(tmp_path)] == ["7"]
