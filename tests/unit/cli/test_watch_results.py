"""`watch` and a call waiting for its result from outside: how it is drawn, and the ``result`` commands."""

import io
from typing import Any, cast

import pytest
from rich.console import Console

from dex_agents import AgentEventType, AgentUsage
from dex_agents.cli.render import EventExtras, EventRenderer
from dex_agents.cli.terminal import TerminalLines
from dex_agents.cli.watch import Watch, WatchCommand, parse_watch_command, print_pending
from dex_agents.domain.errors import ToolResultAlreadySubmittedError
from dex_agents.domain.interrupts import EXPIRED_RESULT_MESSAGE, InterruptKind
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.launch.errors import CliError, UsageError
from tests.builders import make_interrupt
from tests.unit.cli.events import event

WAITING = make_interrupt("c1", "inventory", '{"sku": "A-7"}', kind=InterruptKind.TOOL_RESULT)


@pytest.mark.parametrize(
    ("line", "command"),
    [
        (
            'result c1 {"stock": 3, "note": "it\'s here"}',
            WatchCommand(action="result", tool_call_id="c1", result={"stock": 3, "note": "it's here"}),
        ),
        ("/result c1 42", WatchCommand(action="result", tool_call_id="c1", result=42)),
        ("result c1 null", WatchCommand(action="result", tool_call_id="c1", result=None)),
        (
            'result-error c1 "the warehouse is closed"',
            WatchCommand(action="result-error", tool_call_id="c1", reason="the warehouse is closed"),
        ),
    ],
)
def test_result_commands_take_the_rest_of_the_line_as_json(line: str, command: WatchCommand) -> None:
    assert parse_watch_command(line) == command


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("result c1 {nope", "is not JSON"),
        ("result c1", "give the call ID and its JSON result"),
        ("result-error c1", "malformed"),
    ],
)
def test_a_bad_result_command_is_a_usage_error(line: str, why: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_watch_command(line)
    assert why in raised.value.message


def test_a_call_waiting_for_its_result_is_drawn_with_how_to_answer_it() -> None:
    out = io.StringIO()
    view = EventRenderer(Console(file=out, width=200, color_system=None), live=False, approval_arguments=True)
    raised = event(
        AgentEventType.INTERRUPT_RAISED,
        interrupt_id=WAITING.interrupt_id,
        tool_call_id="c1",
        tool_name="inventory",
        deadline=None,
        kind="tool_result",
    )
    view.handle(raised, EventExtras(interrupt=WAITING))
    for approved, message in ((True, None), (False, "closed"), (False, EXPIRED_RESULT_MESSAGE)):
        view.handle(
            event(
                AgentEventType.INTERRUPT_RESOLVED,
                interrupt_id=WAITING.interrupt_id,
                approved=approved,
                rejection_message=message,
                kind="tool_result",
            )
        )
    assert out.getvalue().splitlines() == [
        '  ⏸ inventory waits for its result from outside (answer: result c1 JSON | result-error c1 "message")',
        "  ✓ result submitted (turn-1.c1.result)",
        "  ✗ error submitted (turn-1.c1.result): closed",
        "  ⌛ no result (turn-1.c1.result): nobody submitted one before the deadline",
    ]
    assert view.shown_approvals == {}  # nothing to approve


def test_the_pending_list_shows_a_waiting_result_by_its_call_id() -> None:
    out = io.StringIO()
    snapshot = AgentSnapshot(
        state=None,
        messages=(),
        pending_interrupts=(WAITING,),
        tool_calls=(),
        usage=AgentUsage(),
        queued_message_count=0,
    )
    shown = print_pending(Console(file=out, width=200, color_system=None), snapshot)
    assert out.getvalue().strip() == (
        'pending result c1: inventory {"sku": "A-7"}  (result c1 JSON | result-error c1 "message")'
    )
    assert shown == {}


class FakeSessions:
    def __init__(self, refuse: Exception | None = None) -> None:
        self.sent: list[tuple[str, str, dict[str, object]]] = []
        self.refuse = refuse

    async def submit_tool_result(self, session_id: str, tool_call_id: str, **answer: object) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.sent.append((session_id, tool_call_id, answer))


def watch(sessions: FakeSessions) -> tuple[Watch, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    return Watch(cast(Any, sessions), "s", console, cast(TerminalLines, None)), out


async def test_the_result_commands_submit_the_value_or_the_error() -> None:
    sessions = FakeSessions()
    view, out = watch(sessions)

    await view.carry_out(WatchCommand(action="result", tool_call_id="c1", result={"stock": 3}))
    await view.carry_out(WatchCommand(action="result-error", tool_call_id="c1", reason="closed"))

    assert sessions.sent == [("s", "c1", {"result": {"stock": 3}}), ("s", "c1", {"error": "closed"})]
    assert "sent: result c1" in out.getvalue()


async def test_a_refused_result_is_one_error_line_not_a_crash() -> None:
    refused = ToolResultAlreadySubmittedError("tool call 'c1' has its result already", tool_call_id="c1")
    view, _ = watch(FakeSessions(refuse=refused))
    with pytest.raises(CliError) as raised:
        await view.carry_out(WatchCommand(action="result", tool_call_id="c1", result=1))
    assert "has its result already" in raised.value.message
