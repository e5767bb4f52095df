"""``dex-agents watch``, ``approve`` and ``reject``: follow a running session and answer its approvals.

``watch`` draws a session's events from a position in its event stream (the
oldest kept by default, or a resume token it printed before) and reads
commands meanwhile: ``approve ID``, ``reject ID "reason"``, ``result CALL_ID
JSON`` and ``result-error CALL_ID "message"`` (the result of a call that waits
for it from outside: an external tool, or a tool that raised ``CallDeferred``;
``/result`` works too), ``cancel
["reason"]`` (cancel the running turn), ``withdraw MESSAGE_ID`` (take back a
waiting message, by the client message ID the snapshot lists), ``snapshot``,
``quit``. Steered messages (where each landed), the queue (at the start and in
``snapshot``) and cancelled turns are drawn with the other events. A
malformed command is reported in one line; when standard input is not a
terminal (a script) it also ends the watch with exit code 2.
``approve`` and ``reject`` answer one approval and exit.

Every answer names its approver (``--approver``, by default the OS user), and
an approval is bound to the call as it was shown (its ``call_digest``): a
call that differs is failed, not run. ``watch`` prints the whole call of every
approval that waits (when it starts, when one is raised, at ``snapshot``), and
``approve ID`` binds to what it printed; an approval it has not shown is not
sent. ``dex-agents approve`` prints the call it approves, bound to what it
read, or to ``--call-digest`` when the caller saw the call elsewhere.
"""

import asyncio
import contextlib
import json
import shlex
from typing import Literal

import attrs
import dex
from rich.console import Console
from rich.text import Text

from dex_agents.cli.follow import SessionFollower, os_user
from dex_agents.cli.render import EventRenderer
from dex_agents.cli.terminal import TerminalLines
from dex_agents.cli.views import compact_json, describe_pending, queue_lines, render_snapshot
from dex_agents.domain.errors import InvalidInputError, ToolResultRefusedError
from dex_agents.domain.interrupts import InterruptKind
from dex_agents.domain.json_values import JsonValue
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.domain.tools import call_digest as tool_call_digest
from dex_agents.infrastructure.dex.client import AgentSessionClient
from dex_agents.launch.engine import open_engine
from dex_agents.launch.errors import CliError, UsageError
from dex_agents.launch.loading import load_flow
from dex_agents.launch.output import safe_console

COMMANDS_HELP = (
    'commands: approve ID · reject ID "reason" · result CALL_ID JSON · result-error CALL_ID "message" · '
    'cancel "reason" · withdraw MESSAGE_ID · snapshot · quit'
)
"""The commands ``watch`` reads."""

Action = Literal["approve", "reject", "result", "result-error", "cancel", "withdraw", "snapshot", "quit", "help"]


@attrs.frozen(kw_only=True)
class WatchCommand:
    """One parsed ``watch`` command."""

    action: Action
    """What to do."""
    interrupt_id: str | None = None
    """The approval answered (``approve`` / ``reject``)."""
    reason: str | None = None
    """The rejection message (``reject``) or why the turn is cancelled (``cancel``)."""
    message_id: str | None = None
    """The waiting message to take back (``withdraw``)."""
    tool_call_id: str | None = None
    """The call whose result is given (``result`` / ``result-error``)."""
    result: JsonValue = None
    """The result, parsed from its JSON (``result``)."""


def parse_watch_command(line: str) -> WatchCommand | None:
    """Parse one typed line; ``None`` for a blank line.

    Raises:
        UsageError: the line is not one of the commands.
    """
    first = line.split(maxsplit=1)
    if first and first[0].lower().removeprefix("/") == "result":
        return _result_command(line)
    try:
        words = shlex.split(line)
    except ValueError as error:
        raise UsageError(f"malformed command {line.strip()!r}: {error} ({COMMANDS_HELP})") from error
    if not words:
        return None
    verb, *rest = words
    verb = verb.lower().removeprefix("/")
    if verb == "result-error" and len(rest) >= 2:
        return WatchCommand(action="result-error", tool_call_id=rest[0], reason=" ".join(rest[1:]))
    if verb in ("snapshot", "quit", "help") and not rest:
        return WatchCommand(action=verb)  # type: ignore[arg-type]
    if verb == "approve" and len(rest) == 1:
        return WatchCommand(action="approve", interrupt_id=rest[0])
    if verb == "reject" and rest:
        reason = " ".join(rest[1:]) or None
        return WatchCommand(action="reject", interrupt_id=rest[0], reason=reason)
    if verb == "cancel":
        return WatchCommand(action="cancel", reason=" ".join(rest) or None)
    if verb == "withdraw" and len(rest) == 1:
        return WatchCommand(action="withdraw", message_id=rest[0])
    raise UsageError(f"malformed command {line.strip()!r} ({COMMANDS_HELP})")


def _result_command(line: str) -> WatchCommand:
    """``result CALL_ID JSON``: the JSON is the rest of the line as typed (shell quoting would eat its quotes)."""
    parts = line.strip().split(maxsplit=2)
    if len(parts) < 3:
        raise UsageError(f"malformed command {line.strip()!r}: give the call ID and its JSON result ({COMMANDS_HELP})")
    try:
        value: JsonValue = json.loads(parts[2])
    except ValueError as error:
        raise UsageError(f"the result of {parts[1]!r} is not JSON: {error}") from error
    return WatchCommand(action="result", tool_call_id=parts[1], result=value)


async def require_session(sessions: AgentSessionClient, session_id: str, address: str) -> AgentSnapshot:
    """Return the session's snapshot.

    Raises:
        CliError: no session has that ID.
    """
    try:
        return await sessions.get_agent_snapshot(session_id)
    except (dex.FlowNotFoundError, dex.FlowNotActiveOrNotFoundError) as error:
        raise CliError(f"unknown session {session_id!r} on Dex at {address}") from error


async def answer_interrupt(
    sessions: AgentSessionClient,
    session_id: str,
    interrupt_id: str,
    *,
    approved: bool,
    reason: str | None = None,
    approver: str | None = None,
    call_digest: str | None = None,
) -> None:
    """Approve or reject one pending approval, naming ``approver``; an approval binds to ``call_digest``.

    Raises:
        CliError: the approval is not pending (the message lists those that are).
    """
    if await sessions.resolve_interrupt(
        session_id,
        interrupt_id,
        approved=approved,
        rejection_message=reason,
        approver=approver,
        call_digest=call_digest if approved else None,
    ):
        return
    snapshot = await sessions.get_agent_snapshot(session_id)
    pending = ", ".join(i.interrupt_id for i in snapshot.pending_interrupts) or "none"
    raise CliError(f"no pending approval {interrupt_id!r} in session {session_id!r} (pending: {pending})")


async def submit_result(
    sessions: AgentSessionClient, session_id: str, tool_call_id: str, *, result: JsonValue, error: str | None
) -> None:
    """Give a call waiting for its result from outside its result (or ``error``).

    Raises:
        CliError: the session refused it (unknown call, answered already, not waiting, or a bad result).
    """
    try:
        if error is not None:
            await sessions.submit_tool_result(session_id, tool_call_id, error=error)
        else:
            await sessions.submit_tool_result(session_id, tool_call_id, result=result)
    except (ToolResultRefusedError, InvalidInputError) as refused:
        raise CliError(str(refused)) from refused


def print_pending(console: Console, snapshot: AgentSnapshot) -> dict[str, str]:
    """Print the session's pending approvals and how to answer them, and its waiting messages.

    Returns the digest of each call printed, by interrupt ID.
    """
    for line in queue_lines(snapshot):
        console.print(line, soft_wrap=True)
    shown: dict[str, str] = {}
    for interrupt in snapshot.pending_interrupts:
        if interrupt.kind is InterruptKind.TOOL_RESULT:
            call_id = interrupt.tool_call_id
            console.print(
                Text(describe_pending(interrupt), style="yellow")
                + Text(f'  (result {call_id} JSON | result-error {call_id} "message")', style="dim"),
                soft_wrap=True,
            )
            continue
        console.print(
            Text(f"pending approval {interrupt.interrupt_id}: ", style="yellow")
            + Text(f"{interrupt.tool_name} {compact_json(interrupt.arguments)}")
            + Text(f'  (approve {interrupt.interrupt_id} | reject {interrupt.interrupt_id} "reason")', style="dim"),
            soft_wrap=True,
        )
        shown[interrupt.interrupt_id] = tool_call_digest(interrupt.tool_name, interrupt.arguments)
    return shown


class Watch:
    """Follows one session and carries out typed commands."""

    def __init__(
        self,
        sessions: AgentSessionClient,
        session_id: str,
        console: Console,
        lines: TerminalLines,
        *,
        resume_token: str = "",
        approver: str | None = None,
        shown: dict[str, str] | None = None,
    ) -> None:
        """Create the watch (see `run_watch` for the arguments; ``shown``: calls printed already, `print_pending`)."""
        self.sessions = sessions
        self.session_id = session_id
        self.console = console
        self.lines = lines
        self.approver = approver or os_user()
        self.renderer = EventRenderer(console, approval_arguments=True)
        self.shown = dict(shown or {})
        """The digest of every pending call this watch printed whole, by interrupt ID."""
        self.follower = SessionFollower(sessions, session_id, self.renderer, resume_token=resume_token)

    async def run(self, *, until_idle: bool) -> None:
        """Follow events and read commands until ``quit``, Ctrl-C, or (with ``until_idle``) an idle session."""
        following = asyncio.create_task(self.follower.follow(idle_after_turns=0 if until_idle else None))
        commands = asyncio.create_task(self.read_commands())
        try:
            done, _ = await asyncio.wait({following, commands}, return_when=asyncio.FIRST_COMPLETED)
            if commands in done and commands.exception() is None and not commands.result():
                # End of input: keep following.
                done, _ = await asyncio.wait({following}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            for task in (following, commands):
                task.cancel()
            for task in (following, commands):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self.renderer.close()
            token = self.follower.resume_token
            if token:
                self.console.print(Text(f"resume with --from {token}", style="dim"), highlight=False)

    async def read_commands(self) -> bool:
        """Carry out typed commands; return ``True`` after ``quit``, ``False`` at the end of input.

        Raises:
            UsageError: a malformed command when the input is not a terminal.
        """
        while True:
            line = await self.lines.readline("")
            if line is None:
                return False
            try:
                command = parse_watch_command(line)
            except UsageError as error:
                if not self.lines.is_terminal:
                    raise
                self.console.print(Text(f"error: {error.message}", style="red"))
                continue
            if command is None:
                continue
            if command.action == "quit":
                return True
            try:
                await self.carry_out(command)
            except CliError as error:
                self.console.print(Text(f"error: {error.message}", style="red"))

    async def carry_out(self, command: WatchCommand) -> None:
        """Carry out one command."""
        match command.action:
            case "approve" | "reject":
                assert command.interrupt_id is not None
                approved = command.action == "approve"
                digest = self.shown.get(command.interrupt_id) or self.renderer.shown_approvals.get(command.interrupt_id)
                if approved and digest is None:
                    raise CliError(
                        f"approval {command.interrupt_id!r} was not shown here, so it is not sent: type snapshot "
                        "to see what waits, then approve it"
                    )
                await answer_interrupt(
                    self.sessions,
                    self.session_id,
                    command.interrupt_id,
                    approved=approved,
                    reason=command.reason,
                    approver=self.approver,
                    call_digest=digest,
                )
                self.console.print(Text(f"sent: {command.action} {command.interrupt_id}", style="dim"))
            case "result" | "result-error":
                assert command.tool_call_id is not None
                await submit_result(
                    self.sessions,
                    self.session_id,
                    command.tool_call_id,
                    result=command.result,
                    error=command.reason if command.action == "result-error" else None,
                )
                self.console.print(Text(f"sent: {command.action} {command.tool_call_id}", style="dim"))
            case "cancel":
                if await self.sessions.cancel_turn(self.session_id, command.reason):
                    self.console.print(Text("sent: cancel the running turn", style="dim"))
                else:
                    self.console.print(Text("no turn is running", style="dim"))
            case "withdraw":
                assert command.message_id is not None
                if await self.sessions.withdraw_user_message(self.session_id, command.message_id):
                    self.console.print(Text(f"withdrew {command.message_id}", style="dim"))
                else:
                    self.console.print(Text(f"no waiting message {command.message_id} (a turn took it?)", style="red"))
            case "snapshot":
                snapshot = await self.sessions.get_agent_snapshot(self.session_id)
                render_snapshot(self.console, self.session_id, snapshot, tool_outcomes=self.renderer.tool_outcomes)
                for interrupt in snapshot.pending_interrupts:  # render_snapshot printed each whole
                    self.shown[interrupt.interrupt_id] = tool_call_digest(interrupt.tool_name, interrupt.arguments)
            case "help" | "quit":
                self.console.print(Text(COMMANDS_HELP, style="dim"))


async def run_watch(
    console: Console,
    session_id: str,
    *,
    server: str,
    flow_target: str,
    resume_token: str,
    until_idle: bool,
    approver: str | None = None,
) -> None:
    """Run ``dex-agents watch`` (answers name ``approver``, by default the OS user)."""
    console = safe_console(console)
    loaded = load_flow(flow_target)
    async with open_engine(server, [loaded.flow], console) as engine:
        sessions = engine.sessions(loaded.flow)
        snapshot = await require_session(sessions, session_id, engine.address)
        state = "not started" if snapshot.state is None else snapshot.state.status.value
        console.print(
            Text(f"watching session {session_id} ", style="bold")
            + Text(f"· {state} · {engine.description} · {COMMANDS_HELP}", style="dim")
        )
        shown = print_pending(console, snapshot)
        watch = Watch(
            sessions,
            session_id,
            console,
            TerminalLines(console),
            resume_token=resume_token,
            approver=approver,
            shown=shown,
        )
        await watch.run(until_idle=until_idle)


async def run_answer(
    console: Console,
    session_id: str,
    interrupt_id: str,
    *,
    server: str,
    flow_target: str,
    approved: bool,
    reason: str | None,
    approver: str | None = None,
    call_digest: str | None = None,
) -> None:
    """Run ``dex-agents approve`` or ``dex-agents reject``.

    An approval binds to ``call_digest`` when given, else to the call as this command prints it.
    """
    console = safe_console(console)
    loaded = load_flow(flow_target)
    async with open_engine(server, [loaded.flow], console) as engine:
        sessions = engine.sessions(loaded.flow)
        snapshot = await require_session(sessions, session_id, engine.address)
        pending = {interrupt.interrupt_id: interrupt for interrupt in snapshot.pending_interrupts}
        interrupt = pending.get(interrupt_id)
        if interrupt is None:
            listed = ", ".join(pending) or "none"
            raise CliError(f"no pending approval {interrupt_id!r} in session {session_id!r} (pending: {listed})")
        if approved:
            console.print(
                Text(f"approving {interrupt_id}: ", style="yellow")
                + Text(f"{interrupt.tool_name} {compact_json(interrupt.arguments)}"),
                soft_wrap=True,
            )
        await answer_interrupt(
            sessions,
            session_id,
            interrupt_id,
            approved=approved,
            reason=reason,
            approver=approver or os_user(),
            call_digest=call_digest or tool_call_digest(interrupt.tool_name, interrupt.arguments),
        )
        verb = "approved" if approved else "rejected"
        console.print(Text(f"{verb} {interrupt_id} in session {session_id}"))
