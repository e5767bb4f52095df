"""``dex-agents chat``: an interactive session, one turn at a time.

`ChatSession` is the whole interaction, independent of where its lines come
from: a line is a user message (streamed back turn by turn, approvals asked
inline) or a command: ``/snapshot``, ``/history``, ``/stop``, ``/quit`` and
``/help``. `run_chat` wires it to an engine, a Worker and the terminal.

What ``/quit`` leaves behind depends on where the session lives (`AfterQuit`):
on the in-process fake Dex it ends with the chat; on a server it stays, and it
keeps running only while some Worker serves its Flow.
"""

import contextlib
import secrets
from enum import StrEnum

import dex
from rich.console import Console
from rich.text import Text

from dex_agents.cli.engine import open_engine
from dex_agents.cli.follow import Approver, SessionFollower
from dex_agents.cli.loading import load_flow
from dex_agents.cli.render import EventRenderer
from dex_agents.cli.terminal import LineSource, PromptApprover, TerminalLines
from dex_agents.cli.views import MARK, messages_table, render_snapshot
from dex_agents.domain.messages import AgentMessage
from dex_agents.infrastructure.dex.client import AgentSessionClient

HELP = (
    "Type a message to send it. Commands: /snapshot (the session's state), /history (every stored message), "
    "/stop (stop the session and leave), /quit (leave without stopping it), /help."
)
"""What ``/help`` prints."""


class AfterQuit(StrEnum):
    """What becomes of the session when the person leaves with ``/quit``."""

    ENDS_WITH_CHAT = "ends_with_chat"
    """It lives on fake Dex inside this process, which stops with the chat."""
    WAITS_FOR_WORKER = "waits_for_worker"
    """It stays on the server; this process ran its Worker, so it continues once another Worker serves its Flow."""
    KEEPS_RUNNING = "keeps_running"
    """It stays on the server, served by the application's own Worker."""

    @classmethod
    def of(cls, *, embedded: bool, serve_worker: bool) -> "AfterQuit":
        """Return what follows ``/quit`` on in-process fake Dex (``embedded``) or a server, with or without a Worker."""
        if embedded:
            return cls.ENDS_WITH_CHAT
        return cls.WAITS_FOR_WORKER if serve_worker else cls.KEEPS_RUNNING

    def farewell(self, session_id: str) -> str:
        """Return what ``/quit`` prints."""
        match self:
            case AfterQuit.ENDS_WITH_CHAT:
                return (
                    f"left session {session_id}; it ends with this chat (its fake Dex runs in this process: "
                    "use dev-server and --server to keep sessions)"
                )
            case AfterQuit.WAITS_FOR_WORKER:
                return (
                    f"left session {session_id}; it stays on the server and continues when a Worker serves its "
                    "Flow (this chat's Worker stops now)"
                )
            case AfterQuit.KEEPS_RUNNING:
                return f"left session {session_id}; it keeps running on the server"


class ChatSession:
    """One person talking to one session."""

    def __init__(
        self,
        sessions: AgentSessionClient,
        session_id: str,
        console: Console,
        lines: LineSource,
        *,
        approver: Approver | None = None,
        after_quit: AfterQuit,
    ) -> None:
        """Create the chat.

        Args:
            sessions: the session client of the agent's Flow.
            session_id: the session to start or join.
            console: where everything is drawn.
            lines: what the person types.
            approver: answers approvals; by default the person is asked on ``lines``.
            after_quit: what becomes of the session on ``/quit``, for its message.
        """
        self.sessions = sessions
        self.session_id = session_id
        self.console = console
        self.lines = lines
        self.renderer = EventRenderer(console, echo_user_messages=False)
        self.follower = SessionFollower(sessions, session_id, self.renderer, approver=approver or PromptApprover(lines))
        self.after_quit = after_quit
        self.stopped = False

    async def start(self) -> bool:
        """Start the session, or join it if it exists; return whether it was new."""
        try:
            await self.sessions.start_session(self.session_id)
        except dex.FlowAlreadyStartedError:
            return False
        return True

    async def run(self) -> None:
        """Read lines until ``/stop``, ``/quit`` or the end of input."""
        while not self.stopped:
            line = await self.lines.readline(f"you {MARK} ")
            if line is None:
                break
            if not await self.handle(line):
                break
        self.renderer.close()

    async def handle(self, line: str) -> bool:
        """Handle one line; return ``False`` when the chat should end."""
        text = line.strip()
        if not text:
            return True
        if not text.startswith("/"):
            await self.send(text)
            return True
        command = text.split()[0].lower()
        match command:
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
            case "/help":
                self.console.print(Text(HELP, style="dim"))
            case _:
                self.console.print(Text(f"unknown command {command} (try /help)", style="red"))
        return True

    async def send(self, text: str) -> None:
        """Send one user message and follow its turn to the end."""
        before = await self.follower.snapshot()
        turns = 0 if before.state is None else before.state.turn_count
        receipt = await self.sessions.submit_user_message(self.session_id, text)
        if not receipt.accepted:
            self.console.print(Text("the session refused a blank message", style="red"))
            return
        await self.follower.follow_receipt(receipt, turns_before=turns)

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


async def run_chat(
    console: Console, target: str, *, server: str | None, session_id: str | None, serve_worker: bool
) -> None:
    """Run ``dex-agents chat``: load the Flow, connect, serve it, and talk until the person leaves."""
    import pydantic_ai

    pydantic_ai.BANNER_ENABLED = False  # the terminal belongs to the chat; the Worker runs agents in this process
    loaded = load_flow(target)
    flow = loaded.flow
    async with contextlib.AsyncExitStack() as stack:
        engine = await stack.enter_async_context(open_engine(server, [flow], console))
        if serve_worker or engine.embedded:
            with console.status("starting a Worker", spinner="dots"):
                await stack.enter_async_context(engine.worker())
        session = session_id or new_session_id()
        chat = ChatSession(
            engine.sessions(flow),
            session,
            console,
            TerminalLines(console),
            after_quit=AfterQuit.of(embedded=engine.embedded, serve_worker=serve_worker),
        )
        fresh = await chat.start()
        console.print(
            Text(f"chat with {flow.get_flow_type()} ", style="bold")
            + Text(f"· session {session} ({'new' if fresh else 'joined'}) · {engine.description}", style="dim")
        )
        console.print(Text(HELP, style="dim"))
        await chat.run()
