"""Prompts and approvals: lines read without blocking the loop, and who answers an approval."""

import contextlib
import io
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TextIO

import pytest
from rich.console import Console

from dex_agents.cli.demo import choose_approver
from dex_agents.cli.follow import ApprovalDecision, ApprovalRequest
from dex_agents.cli.terminal import TERMINAL_REJECTION, PromptApprover, ScriptedLines, TerminalLines, parse_yes
from tests.builders import make_interrupt

REQUEST = ApprovalRequest.of(
    "s",
    make_interrupt("call-2", "refund_order", '{"order_id":"7"}', raised_at=datetime.now(UTC)),
)


@pytest.fixture
def pipe() -> Iterator[tuple[TextIO, int]]:
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "r") as reader:
        yield reader, write_end
    with contextlib.suppress(OSError):
        os.close(write_end)


def console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, highlight=False), out


async def test_lines_from_a_pipe_are_read_one_by_one_until_the_end(pipe: tuple[TextIO, int]) -> None:
    reader, write_end = pipe
    view, out = console()
    lines = TerminalLines(view, reader)
    os.write(write_end, b"first\nsecond\r\nlast without newline")
    os.close(write_end)
    assert not lines.is_terminal
    assert await lines.readline("? ") == "first"
    assert await lines.readline("") == "second"
    assert await lines.readline("") == "last without newline"
    assert await lines.readline("") is None
    assert out.getvalue().startswith("? first\n")


@pytest.mark.parametrize(
    ("answer", "approved"), [("y", True), (" YES ", True), ("n", False), ("", False), (None, False)]
)
def test_only_y_or_yes_approves(answer: str | None, approved: bool) -> None:
    assert parse_yes(answer) is approved


async def test_the_prompt_asks_the_question_of_the_issue_and_a_no_rejects_with_a_message() -> None:
    view, out = console()
    approver = PromptApprover(ScriptedLines(view, ["n"]))
    assert await approver(REQUEST) == ApprovalDecision(approved=False, rejection_message=TERMINAL_REJECTION)
    assert out.getvalue() == 'Approve refund_order {"order_id": "7"}? [y/N] n\n'


async def test_without_a_terminal_and_without_yes_or_no_the_demo_answers_the_default_no(
    pipe: tuple[TextIO, int],
) -> None:
    view, out = console()
    approver = choose_approver(view, TerminalLines(view, pipe[0]), answer=None)
    decision = await approver(REQUEST)
    assert decision is not None
    assert decision.approved is False
    assert "standard input is not a terminal" in out.getvalue()


async def test_yes_approves_without_asking(pipe: tuple[TextIO, int]) -> None:
    view, out = console()
    approver = choose_approver(view, TerminalLines(view, pipe[0]), answer=True)
    assert await approver(REQUEST) == ApprovalDecision(approved=True)
    assert out.getvalue() == 'Approve refund_order {"order_id": "7"}? [y/N] y  (--yes)\n'
