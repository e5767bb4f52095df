"""``dex-agents chat``: an interactive session, one turn at a time.

`ChatSession` is the whole interaction, independent of where its lines come
from: a line is a user message (streamed back turn by turn, approvals asked
inline) or a command: ``/snapshot``, ``/history``, ``/stop``, ``/quit`` and
``/help``. `run_chat` wires it to an engine, a Worker and the terminal.

On a terminal the chat keeps reading while a turn runs: a line typed then
steers the running turn (it joins at the turn's next model call, after the
tool results) or, after ``/queue``, waits for the next turn (``/steer``
switches back; the prompt shows the mode: ``you (steer)``). ``/withdraw``
takes back the last message queued that way while no turn has taken it, and
Ctrl-C (or ``/cancel``) cancels the running turn instead of leaving; Ctrl-C
while no turn runs leaves. An approval asked meanwhile is answered by the
next line. Lines that are not typed at a terminal (a pipe, a script) are read
one turn at a time, as before.

Joining a session that exists (``chat --session ID``) shows its status, its
pending approvals with ``/approve ID`` and ``/reject ID reason``, and its
waiting messages, and draws a running turn from its start (its live text so
far) and on (`dex_agents.cli.chat_join`). An approval question stops asking
once the approval is answered elsewhere; any answer but yes rejects, with the
person's words as the reason (``n too expensive``). A message the session
refuses (too large) is said in one line and the chat goes on. A line the
terminal cut at its line limit is not sent (it says so); ``/paste`` reads text
of any length, up to a line with only ``.``.

What ``/quit`` leaves behind depends on where the session lives (`AfterQuit`,
in `dex_agents.cli.chat_quit`): on the in-process dev server it ends with the
chat; on a server it stays, and it keeps running only while some Worker serves
its Flow.
"""

import asyncio
import contextlib
import secrets
import signal
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from dex_agents.cli.chat_join import ANSWER_USAGE, ChatApprovals, joined_lines
from dex_agents.cli.chat_quit import AfterQuit as AfterQuit
from dex_agents.cli.follow import Approver, SessionFollower
from dex_agents.cli.render import EventRenderer
from dex_agents.cli.terminal import CutLine, LineSource, TerminalLines, cut_line_notice, read_text_block
from dex_agents.cli.views import MARK, messages_table, render_snapshot
from dex_agents.domain.errors import InvalidInputError
from dex_agents.domain.messages import AgentMessage, MessageDelivery
from dex_agents.infrastructure.dex.client import AgentSessionClient, MessageReceipt, SessionUnavailableError
from dex_agents.launch.engine import open_engine
from dex_agents.launch.loading import load_flow
from dex_agents.launch.output import safe_console

CANCEL_REASON = "cancelled from dex-agents chat"
"""The reason ``/cancel`` and Ctrl-C give."""

HELP = (
    "Type a message to send it. Commands: /snapshot (the session's state), /history (every stored message), "
    "/paste (send long or many-line text, ended by a line with only '.'), "
    f"{ANSWER_USAGE} (answer a pending approval; at its prompt, y approves and anything else rejects, "
    "'n <reason>' with a reason), /stop (stop the session and leave), /quit (leave without stopping it), /help. "
    "While a turn runs, what you type steers it (/queue: keep it for the next turn; /steer: back), "
    "/withdraw takes back the last queued message, /cancel or Ctrl-C cancels the turn."
)
"""What ``/help`` prints."""

PASTE_PROMPT = "paste the text, then a line with only '.' (Ctrl-D also ends it)"


class ChatSession:
    """One person talking to one session."""

    def __init__(  # noqa: PLR0913 - the chat's collaborators; the optional ones by keyword
        self,
        sessions: AgentSessionClient,
        session_id: str,
        console: Console,
        lines: LineSource,
        *,
        approver: Approver | None = None,
        after_quit: AfterQuit,
        answered_by: str | None = None,
    ) -> None:
        """Create the chat.

        Args:
            sessions: the session client of the agent's Flow.
            session_id: the session to start or join.
            console: where everything is drawn.
            lines: what the person types; read while a turn runs when it is a terminal (``is_terminal``).
            approver: answers approvals; by default the person is asked on ``lines``.
            after_quit: what becomes of the session on ``/quit``, for its message.
            answered_by: who answers name as approver (default: the OS user).
        """
        self.sessions = sessions
        self.session_id = session_id
        self.console = console
        self.lines = lines
        self.renderer = EventRenderer(console, echo_user_messages=False)
        self.typing_while_running = bool(getattr(lines, "is_terminal", False))
        """Whether lines are read while a turn runs (a person at a terminal), else one turn at a time."""
        self.follower = SessionFollower(sessions, session_id, self.renderer, answered_by=answered_by)
        self.approvals = ChatApprovals(sessions, session_id, console, lines, self.follower)
        """Asks about approvals and answers them by ID (``/approve``, ``/reject``)."""
        self.follower.approver = approver or (
            self.approvals.ask if self.typing_while_running else self.approvals.ask_in_turn
        )
        self.after_quit = after_quit
        self.stopped = False
        self.delivery = MessageDelivery.STEER
        """What a line typed while a turn runs does: steer it (the default) or queue for the next turn."""
        self._turn: asyncio.Task[None] | None = None
        self._reading: asyncio.Task[str | None] | None = None
        self.running = True
        """Whether the session takes messages (``False``: it has ended)."""
        self._queued: list[str] = []
        self._cancelling = False
        self._leaving = False
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def turn_running(self) -> bool:
        """Whether the chat follows a running turn."""
        return self._turn is not None and not self._turn.done()

    @property
    def leaving(self) -> bool:
        """Whether Ctrl-C asked to leave the chat."""
        return self._leaving

    async def start(self) -> bool:
        """Start the session, or join it if it exists (`join` shows it); return whether it was new."""
        started = await self.sessions.ensure_session(self.session_id)
        self.running = started.running
        return started.created

    async def join(self) -> None:
        """Show the session joined: its status, pending approvals (with how to answer them), waiting messages.

        A running turn is drawn from its start (its live text so far, then on) and followed, as a turn
        the person started is; events of turns that ended before are not drawn again.
        """
        snapshot = await self.follower.snapshot()
        for line in joined_lines(self.session_id, snapshot, running=self.running):
            self.console.print(line, soft_wrap=True)
        self.approvals.printed(snapshot)
        state = snapshot.state
        if state is None or state.active_turn_id is None or not self.running:
            self.follower.resume_token = await self.sessions.latest_resume_token(self.session_id)
            return
        self.follower.resume_token = await self.sessions.resume_token_before_turn(self.session_id, state.active_turn_id)
        self._turn = asyncio.create_task(self._follow_joined(state.turn_count))
        if not self.typing_while_running:
            await self._turn

    async def _follow_joined(self, turns: int) -> None:
        try:
            await self.follower.follow(idle_after_turns=turns)
        finally:
            self._cancelling = False

    async def run(self) -> None:
        """Read lines until ``/stop``, ``/quit``, the end of input or Ctrl-C while no turn runs."""
        try:
            while not self.stopped and not self.leaving:
                line = await self._next_line()
                if line is None:
                    break
                if not await self.handle(line):
                    break
            if self._leaving:
                self.console.print(Text(self.after_quit.farewell(self.session_id), style="dim"))
            elif self._turn is not None and not self.stopped:
                await self._turn  # the end of input: let the running turn finish on screen
        finally:
            for task in (self._turn, self._reading, *self._tasks):
                if task is not None and not task.done():
                    task.cancel()
            self.renderer.close()

    async def _next_line(self) -> str | None:
        """The next line the person typed; ``None`` at the end of input or when Ctrl-C left."""
        prompt = f"you ({self.delivery.value}) {MARK} " if self.turn_running else f"you {MARK} "
        self._reading = asyncio.ensure_future(self.lines.readline(prompt))
        try:
            return await self._reading
        except asyncio.CancelledError:
            if self.leaving:
                return None
            raise
        finally:
            self._reading = None

    def interrupt(self) -> None:
        """Ctrl-C: cancel the running turn; with none running (or a second time), leave."""
        if self.turn_running and not self._cancelling:
            self._spawn(self.cancel_running_turn())
            return
        self._leaving = True
        if self._reading is not None:
            self._reading.cancel()
        self.approvals.drop_question()

    async def cancel_running_turn(self) -> None:
        """Ask the session to cancel its running turn (``/cancel``, Ctrl-C)."""
        self._cancelling = True
        self.approvals.drop_question()  # the cancel answers the pending approval
        self.console.print(Text("⊘ cancelling the running turn (Ctrl-C again leaves the chat)", style="yellow"))
        if not await self.sessions.cancel_turn(self.session_id, CANCEL_REASON):
            self._cancelling = False
            self.console.print(Text("no turn is running", style="dim"))

    async def handle(self, line: str) -> bool:  # noqa: C901 - one case per chat command
        """Handle one line; return ``False`` when the chat should end."""
        if isinstance(line, CutLine):
            self.console.print(cut_line_notice(line))
            return True
        text = line.strip()
        if not text.startswith("/") and self.approvals.take_answer(line):
            return True
        if not text:
            return True
        if not text.startswith("/"):
            await self.send(text)
            return True
        command = text.split()[0].lower()
        match command:
            case "/approve" | "/reject":
                await self.approvals.answer_by_id(text)
            case "/paste":
                await self.paste()
            case "/snapshot":
                await self.show_snapshot()
            case "/history":
                await self.show_history()
            case "/stop":
                await self.sessions.stop_session(self.session_id, "stopped from dex-agents chat")
                self.stopped = True
                self.console.print(Text(f"session {self.session_id} stopped", style="bold"))
                return False
            case "/quit" | "/exit":
                self.console.print(Text(self.after_quit.farewell(self.session_id), style="dim"))
                return False
            case "/steer" | "/queue":
                self.delivery = MessageDelivery.STEER if command == "/steer" else MessageDelivery.QUEUE
                what = "steers the running turn" if command == "/steer" else "is queued for the next turn"
                self.console.print(Text(f"typing while a turn runs now {what}", style="dim"))
            case "/withdraw":
                await self.withdraw_last()
            case "/cancel":
                if self.turn_running:
                    await self.cancel_running_turn()
                else:
                    self.console.print(Text("no turn is running", style="dim"))
            case "/help":
                self.console.print(Text(HELP, style="dim"))
            case _:
                self.console.print(Text(f"unknown command {command} (try /help)", style="red"))
        return True

    async def send(self, text: str) -> None:
        """Send one user message: it steers or queues while a turn runs, else starts a turn that is followed.

        A message the session refuses (too large, a character it cannot store) or a session that has
        ended is said in one line; the chat goes on.
        """
        try:
            await self._send(text)
        except InvalidInputError as error:
            self.console.print(Text(f"not sent: {error}", style="red"))
        except SessionUnavailableError:
            self.running = False
            self.console.print(Text(f"not sent: session {self.session_id} has ended (/history shows it)", style="red"))

    async def _send(self, text: str) -> None:
        if self.turn_running:
            await self._send_while_running(text)
            return
        before = await self.follower.snapshot()
        turns = 0 if before.state is None else before.state.turn_count
        receipt = await self.sessions.submit_user_message(self.session_id, text)
        if not receipt.accepted:
            self.console.print(Text("the session refused a blank message", style="red"))
            return
        self._turn = asyncio.create_task(self._follow(receipt, turns))
        if not self.typing_while_running:
            await self._turn
            return
        self.console.print(
            Text(
                f"typing now {'steers this turn' if self.delivery is MessageDelivery.STEER else 'queues'}"
                " (/steer, /queue) · Ctrl-C cancels it",
                style="dim",
            )
        )

    async def _send_while_running(self, text: str) -> None:
        receipt = await self.sessions.submit_user_message(self.session_id, text, delivery=self.delivery)
        if not receipt.accepted:
            self.console.print(Text("the session refused a blank message", style="red"))
        elif self.delivery is MessageDelivery.STEER:
            self.console.print(Text("↪ steering the running turn: its next model call sees it", style="cyan"))
        else:
            self._queued.append(receipt.client_message_id)
            self.console.print(Text("queued for the next turn (/withdraw takes it back)", style="cyan"))

    async def _follow(self, receipt: MessageReceipt, turns_before: int) -> None:
        """Follow the receipt's turn, then any turn typed messages started meanwhile, until the session is idle."""
        try:
            snapshot = await self.follower.follow_receipt(receipt, turns_before=turns_before)
            if not snapshot.is_idle and snapshot.state is not None:
                await self.follower.follow(idle_after_turns=snapshot.state.turn_count)
        finally:
            self._cancelling = False

    async def withdraw_last(self) -> None:
        """Take back the last message queued while a turn ran, if no turn has taken it yet."""
        if not self._queued:
            self.console.print(Text("nothing queued to withdraw", style="dim"))
            return
        message_id = self._queued.pop()
        if await self.sessions.withdraw_user_message(self.session_id, message_id):
            self.console.print(Text("withdrew the last queued message", style="cyan"))
        else:
            self.console.print(Text("too late: a turn already took the last queued message", style="dim"))

    async def paste(self) -> None:
        """``/paste``: read text of any length, up to a line with only ``.``, and send it as one message."""
        text = await read_text_block(self.lines, self.console, PASTE_PROMPT)
        if text and text.strip():
            lines = text.count("\n") + 1
            self.console.print(Text(f"sending {len(text):,} characters ({lines} {'line' if lines == 1 else 'lines'})"))
            await self.send(text)
        else:
            self.console.print(Text("nothing pasted", style="dim"))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def show_snapshot(self) -> None:
        """Print the session's snapshot."""
        snapshot = await self.follower.snapshot()
        render_snapshot(self.console, self.session_id, snapshot, tool_outcomes=self.renderer.tool_outcomes)

    async def history(self) -> list[AgentMessage]:
        """Return every stored message, oldest first."""
        messages: list[AgentMessage] = []
        after = 0
        while True:
            page = await self.sessions.list_agent_messages(self.session_id, after_sequence=after, limit=200)
            messages.extend(page.messages)
            if page.next_after_sequence is None:
                return messages
            after = page.next_after_sequence

    async def show_history(self) -> None:
        """Print every stored message."""
        messages = await self.history()
        if not messages:
            self.console.print(Text("no messages yet", style="dim"))
            return
        self.console.print(messages_table(messages, title=f"History of {self.session_id}"))


def new_session_id(prefix: str = "chat") -> str:
    """Return a fresh session ID such as ``chat-3f9a1c``."""
    return f"{prefix}-{secrets.token_hex(3)}"


async def run_chat(  # noqa: PLR0913 - one parameter per command option
    console: Console,
    target: str,
    *,
    server: str | None,
    session_id: str | None,
    serve_worker: bool,
    approver: str | None = None,
    data_dir: Path | None = None,
) -> None:
    """Run ``dex-agents chat``: load the Flow, connect, serve it, and talk until the person leaves.

    Approvals answered at the prompt name ``approver`` (by default the OS user). Without
    ``server`` the chat runs its own dev server, keeping its sessions in ``data_dir``
    (``None``: in memory), so a later ``chat --session ID`` on the same dir goes on with one.
    """
    console = safe_console(console)
    import pydantic_ai

    pydantic_ai.BANNER_ENABLED = False  # the terminal belongs to the chat; the Worker runs agents in this process
    loaded = load_flow(target)
    flow = loaded.flow
    async with contextlib.AsyncExitStack() as stack:
        engine = await stack.enter_async_context(open_engine(server, [flow], console, data_dir=data_dir))
        if serve_worker or engine.embedded:
            with console.status("starting a Worker", spinner="dots"):
                await stack.enter_async_context(engine.worker())
        session = session_id or new_session_id()
        chat = ChatSession(
            engine.sessions(flow),
            session,
            console,
            TerminalLines(console),
            after_quit=AfterQuit.of(
                embedded=engine.embedded, serve_worker=serve_worker, kept=engine.data_dir is not None
            ),
            answered_by=approver,
        )
        fresh = await chat.start()
        console.print(
            Text(f"chat with {flow.get_flow_type()} ", style="bold")
            + Text(f"· session {session} ({'new' if fresh else 'joined'}) · {engine.description}", style="dim")
        )
        console.print(Text(HELP, style="dim"))
        if not fresh:
            await chat.join()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, chat.interrupt)  # Ctrl-C cancels a running turn
        try:
            await chat.run()
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGINT)
