"""``dex-agents demo``: the order agent as one durable session, from the first event to the snapshot.

The demo starts the dev server in this process and the order agent's Worker
(`dex_agents.cli.demo_worker`) as a child process in its own process group
(a listening Worker on a free loopback port, the faster mode; its replacement
after ``--crash`` binds the same address),
starts session ``order-session-7`` with "Refund order 7 and tell the
customer.", and draws its live events. The refund waits for approval: the
demo asks at the terminal, or answers ``--yes`` / ``--no`` (no on a standard
input that is not a terminal). It ends with the session's snapshot and what
the shop's ledger says.

``--crash`` kills the Worker (SIGKILL, whole process group) in the middle of
the refund Step, after the refund is booked and before the Step reports it,
and starts a replacement. Dex runs the Step again on the new Worker with the
same idempotency key, the ledger recognises the key, and the session carries
on: the refund ran once.

``--crash-engine`` kills the dev server instead, at the same point: the demo
runs it as a child process on a data dir (``python -m dex_agents.devserver
--data DIR``), SIGKILLs it while the refund Step runs and starts it again on the
same port and dir. The session's state, the pending Step and its events are on
disk; the restarted server redelivers the Step (as after a lost Worker), the
ledger recognises the key, and the turn completes.

``--framework sagent`` runs the same order agent on sagent
(`dex_agents.cli.sagent_order_agent`, through the sagent adapter); it needs
Python 3.13+ with ``dex-agents[sagent]`` and says so clearly elsewhere.

Ctrl-C stops the Worker (SIGTERM to its group) before the demo exits; the
Worker also stops by itself if the demo process dies.
"""

import asyncio
import contextlib
import importlib
import importlib.util
import sys
import tempfile
from collections.abc import Awaitable
from datetime import timedelta
from pathlib import Path

import attrs
from rich.console import Console
from rich.text import Text

from dex_agents.cli.demo_supervisor import WORKER_MODULE, WORKER_START_TIMEOUT, WorkerSupervisor
from dex_agents.cli.follow import Approver, SessionFollower
from dex_agents.cli.render import EventRenderer
from dex_agents.cli.shop import (
    CRASH_ENV,
    FRAMEWORK_ENV,
    PYDANTIC_AI,
    SAGENT,
    STATE_ENV,
    read_outbox,
    read_refunds,
    refund_gate,
    tool_runs,
)
from dex_agents.cli.terminal import FixedApprover, PromptApprover, TerminalLines
from dex_agents.cli.views import render_snapshot
from dex_agents.devserver import DevServer, DevServerConfig, DevServerProcess
from dex_agents.domain.events import AgentEvent, ToolCallStartedPayload
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.infrastructure.dex.container import WorkerMode, free_listen_address
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.launch.demo import DEMO_PROMPT
from dex_agents.launch.engine import Engine, open_engine
from dex_agents.launch.errors import CliError
from dex_agents.launch.output import safe_console
from dex_agents.testing.stack import LISTEN_ADDRESS_ENV, WORKER_MODE_ENV

SESSION_ID = "order-session-7"
"""The demo's session ID."""

PROMPT = DEMO_PROMPT
"""The demo's first user message."""


DEMO_TIMEOUT = 120.0
"""Seconds after which a stuck demo gives up."""


MODEL_DESCRIPTIONS = {
    PYDANTIC_AI: "a scripted Pydantic AI FunctionModel: it streams text and needs no API key",
    SAGENT: "a scripted sagent provider model (MockModelCaps), run by the sagent adapter: no API key",
}
"""What the header says of each framework's model."""


DEMO_DEVSERVER = DevServerConfig(dispatch_wait=timedelta(seconds=WORKER_START_TIMEOUT))
"""The demo's dev server waits for a Worker as long as the demo lets a Worker child start (real Dex: 10 s).

After ``--crash`` the refund Step's next attempt waits for the replacement
Worker, which on a loaded machine takes more than 10 s to import and serve; a
shorter wait fails that attempt and the next one runs the Step (attempt 3).
"""


def sagent_unavailable() -> str | None:
    """Return why the sagent order agent cannot run in this Python, or ``None`` when it can."""
    running = f"Python {sys.version.split()[0]}"
    if sys.version_info < (3, 13):
        why = f"this is {running}"
    elif importlib.util.find_spec("sagent") is None:
        why = f"sagent is not installed in this {running}"
    else:
        return None
    return (
        f"--framework sagent needs sagent 0.1.20, which runs on Python 3.13+ ({why}): install "
        "'dex-agents[sagent]' under Python 3.13, or in this repository run "
        "`make .venv-sagent/.synced && .venv-sagent/bin/dex-agents demo --framework sagent`"
    )


def load_order_flow(framework: str) -> AgentSessionFlow:
    """Return the order agent's Flow on ``framework``.

    Raises:
        CliError: an unknown framework, or sagent cannot run here.
    """
    if framework == PYDANTIC_AI:
        from dex_agents.cli.order_agent import build_order_flow

        return build_order_flow()
    if framework == SAGENT:
        problem = sagent_unavailable()
        if problem is not None:
            raise CliError(problem)
        # Imported by name: the module needs Python 3.13 and sagent (mypy checks it in .venv-sagent).
        module = importlib.import_module("dex_agents.cli.sagent_order_agent")
        flow: AgentSessionFlow = module.build_order_flow()
        return flow
    raise CliError(f"unknown framework {framework!r}; choose {PYDANTIC_AI!r} or {SAGENT!r}")


def choose_approver(console: Console, lines: TerminalLines, *, answer: bool | None) -> Approver:
    """Return who answers the refund's approval: ``--yes``, ``--no``, the person, or no (no terminal)."""
    if answer is True:
        return FixedApprover(console, approved=True, because="--yes", rejection_message="")
    if answer is False:
        return FixedApprover(console, approved=False, because="--no", rejection_message="Rejected with --no.")
    if lines.is_terminal:
        return PromptApprover(lines)
    return FixedApprover(
        console,
        approved=False,
        because="standard input is not a terminal: the default answer; --yes approves",
        rejection_message="Nobody was at a terminal to approve it.",
    )


@attrs.define
class Demo:
    """One run of the demo on an engine."""

    console: Console
    engine: Engine
    flow: AgentSessionFlow
    supervisor: WorkerSupervisor
    state: Path
    framework: str = attrs.field(default=PYDANTIC_AI, kw_only=True)
    renderer: EventRenderer = attrs.field(init=False)
    crash_task: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    engine_process: DevServerProcess | None = attrs.field(default=None, init=False)
    """The dev server child that ``--crash-engine`` kills and starts again."""

    @renderer.default
    def _console_renderer(self) -> EventRenderer:
        return EventRenderer(self.console)

    def _say(self, *objects: Text | str, highlight: bool = False) -> None:
        self.console.print(*objects, soft_wrap=True, highlight=highlight)

    def header(self, *, crash: bool) -> None:
        """Print what runs where."""
        process = self.engine_process
        engine = (
            self.engine.description
            if process is None
            else f"the dev server, child process pid {process.pid} on {process.address} (data in {process.data_dir})"
        )
        rows = [
            ("engine", engine),
            ("worker", f"child process pid {self.supervisor.current.pid} (python -m {WORKER_MODULE})"),
            ("model", MODEL_DESCRIPTIONS[self.framework]),
            ("session", f"{SESSION_ID} (Flow type {self.flow.get_flow_type()}): one Step per model call and per tool"),
        ]
        if crash and process is not None:
            rows.append(("crash", "the dev server will be SIGKILLed in the middle of the refund Step, then restarted"))
        elif crash:
            rows.append(("crash", "the Worker will be SIGKILLed in the middle of the refund Step"))
        self._say(Text("dex-agents demo: an order agent as one durable Dex session", style="bold"))
        for name, value in rows:
            self._say(Text(f"  {name:<8} ", style="dim") + Text(value), highlight=False)
        self._say()

    async def cancel_crash(self) -> None:
        """Stop a crash still in progress (Ctrl-C), so that every Worker it started is known and stopped."""
        task = self.crash_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, CliError):
                await task

    def react(self, event: AgentEvent) -> None:
        """Start the crash once the refund Step runs (``--crash`` only)."""
        if (
            self.crash_task is None
            and isinstance(event.payload, ToolCallStartedPayload)
            and event.payload.tool_name == "refund_order"
        ):
            self.crash_task = asyncio.create_task(self.crash() if self.engine_process is None else self.crash_engine())

    async def crash_engine(self) -> None:
        """SIGKILL the dev server inside the refund Step, then start it again on its port and data dir."""
        process = self.engine_process
        assert process is not None
        gate = refund_gate(self.state)
        try:
            await gate.wait_until_reached(timeout=WORKER_START_TIMEOUT)
        except TimeoutError as error:
            raise CliError("the refund Step never reached the point where the demo kills the dev server") from error
        self.renderer.line(
            f"💥 the refund is booked; SIGKILL the dev server (pid {process.pid}) while its Step runs",
            style="bold red",
        )
        await process.kill()
        self.renderer.line(
            f"the dev server is gone (SIGKILL); the session is on disk in {process.data_dir}", style="red"
        )
        await process.restart()
        self.renderer.line(
            f"↻ the dev server (pid {process.pid}) starts again on {process.address} with the same data; "
            "it runs the refund Step again",
            style="bold yellow",
        )
        gate.release()  # the first run's tool goes on, and its result has no server to reach

    async def crash(self) -> None:
        """Kill the Worker inside the refund Step, then start a replacement."""
        gate = refund_gate(self.state)
        try:
            await gate.wait_until_reached(timeout=WORKER_START_TIMEOUT)
        except TimeoutError as error:
            raise CliError("the refund Step never reached the point where the demo kills the Worker") from error
        victim = self.supervisor.current
        self.renderer.line(
            f"💥 the refund is booked; SIGKILL the Worker (pid {victim.pid}) before its Step can report it",
            style="bold red",
        )
        await self.supervisor.kill(victim)
        self.renderer.line("the Worker is gone (SIGKILL); the session's state is safe in Dex", style="red")
        # Say so before the replacement can serve: its first events must not come before this line.
        replacement = await self.supervisor.spawn()
        self.renderer.line(
            f"↻ a replacement Worker (pid {replacement.pid}) starts; Dex runs the refund Step again on it",
            style="bold yellow",
        )
        await self.supervisor.wait_serving(replacement)

    async def run(self, approver: Approver, *, crash: bool) -> None:
        """Start the session, follow its turn to the end, and print the snapshot and the ledger."""
        sessions = self.engine.sessions(self.flow)
        follower = SessionFollower(sessions, SESSION_ID, self.renderer, approver=approver)
        if crash:
            follower.on_event = self.react
        await sessions.start_session(SESSION_ID, PROMPT)
        snapshot = await self._race(follower.follow_turn(1))
        if self.crash_task is not None:
            await self.crash_task
        self.renderer.close()
        render_snapshot(self.console, SESSION_ID, snapshot, tool_outcomes=self.renderer.tool_outcomes)
        self._say()
        self.summary(snapshot, crash=crash)
        await sessions.stop_session(SESSION_ID, "the demo is over")
        state = snapshot.state
        if state is not None and state.last_turn_error:
            raise CliError(f"the demo's turn failed: {state.last_turn_error}")

    async def _race(self, work: Awaitable[AgentSnapshot]) -> AgentSnapshot:
        """Await ``work`` while watching the Workers; a Worker that dies on its own ends the demo."""
        main = asyncio.ensure_future(work)
        watchdog = asyncio.create_task(self.supervisor.watch())
        try:
            while True:
                side = {watchdog} if self.crash_task is None else {watchdog, self.crash_task}
                done, _ = await asyncio.wait({main, *side}, return_when=asyncio.FIRST_COMPLETED)
                if main in done:
                    return main.result()
                for task in done:
                    task.result()  # raises the side task's error
        finally:
            for task in (main, watchdog):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, CliError):
                    await task

    def summary(self, snapshot: AgentSnapshot, *, crash: bool) -> None:
        """Print what the shop's files say happened (every claim is read from them or from the snapshot)."""
        refunds = read_refunds(self.state)
        runs = tool_runs("refund_order", self.state)
        emails = read_outbox(self.state)
        if not refunds:
            ran = "refund_order never ran" if not runs else f"refund_order ran {len(runs)} times"
            self._say(Text("No refund was issued: ", style="bold") + Text(f"the ledger is empty ({ran})."))
        else:
            first = refunds[0]
            once = "ran once" if len(refunds) == 1 else f"was booked {len(refunds)} times"
            self._say(
                Text(f"The refund {once}: ", style="bold green" if len(refunds) == 1 else "bold red")
                + Text(f"the ledger holds {len(refunds)} refund ({first.refund_id}, {first.amount} for order 7).")
            )
        if len(runs) > 1:
            keys = sorted({str(run.get("key", "")) for run in runs})
            pids = ", ".join(str(run["pid"]) for run in runs)
            line = f"refund_order started {len(runs)} times (Worker pids {pids}) with "
            if len(keys) == 1 and len(refunds) == 1:
                line += f"one idempotency key ({keys[0]}); the second run found the refund booked under that key."
            else:
                line += f"the keys {', '.join(keys)}."
            self._say(Text(line))
        sent = "email was" if len(emails) == 1 else "emails were"
        self._say(Text(f"{len(emails)} {sent} sent to the customer."))
        state = snapshot.state
        completed = state is not None and state.active_turn_id is None and state.last_turn_error is None
        if crash and self.crash_task is None:
            self._say(Text("--crash: the refund Step never ran, so there was no Worker to kill.", style="yellow"))
        elif crash and completed and self.engine_process is not None:
            self._say(
                Text(
                    "The session carried on: the dev server died inside the refund Step, started again on its data "
                    "dir, ran that one Step again, and the turn completed.",
                    style="bold",
                )
            )
        elif crash and completed:
            self._say(
                Text(
                    "The session carried on: the Worker died inside the refund Step, Dex ran that one Step again "
                    "on the replacement Worker, and the turn completed.",
                    style="bold",
                )
            )


async def run_demo(
    console: Console,
    *,
    answer: bool | None,
    crash: bool,
    framework: str = PYDANTIC_AI,
    crash_engine: bool = False,
) -> None:
    """Run ``dex-agents demo`` on ``framework`` (``pydantic-ai`` or ``sagent``); ``crash_engine`` kills the dev server.

    Raises:
        CliError: the framework cannot run here (sagent outside Python 3.13+), or the demo failed.
    """
    console = safe_console(console)
    if framework == SAGENT and (problem := sagent_unavailable()) is not None:
        raise CliError(problem)
    lines = TerminalLines(console)
    approver = choose_approver(console, lines, answer=answer)
    with tempfile.TemporaryDirectory(prefix="dex-agents-demo-") as tmp:
        work_dir = Path(tmp)
        state = work_dir / "shop"
        state.mkdir()
        listen = free_listen_address()  # the faster mode: the dev server calls the Worker children here
        env = {
            STATE_ENV: str(state),
            FRAMEWORK_ENV: framework,
            WORKER_MODE_ENV: WorkerMode.LISTEN.value,
            LISTEN_ADDRESS_ENV: listen,
        }
        if crash or crash_engine:
            env[CRASH_ENV] = "1"
        try:
            async with asyncio.timeout(DEMO_TIMEOUT), contextlib.AsyncExitStack() as stack:
                with console.status("starting the dev server and the Worker process", spinner="dots"):
                    process: DevServerProcess | None = None
                    if crash_engine:
                        process = await stack.enter_async_context(DevServerProcess(data_dir=work_dir / "engine"))
                        address = process.address
                    else:
                        address = (await stack.enter_async_context(DevServer(DEMO_DEVSERVER))).address
                    supervisor = WorkerSupervisor(address, work_dir, env)
                    stack.push_async_callback(supervisor.stop_all)
                    worker = await supervisor.spawn()
                    # Load the agent here while the Worker process loads it there.
                    flow = load_order_flow(framework)
                    engine = await stack.enter_async_context(
                        open_engine(
                            address,
                            [flow],
                            console,
                            embedded=True,
                            worker_mode=WorkerMode.LISTEN,
                            listen_address=listen,
                        )
                    )
                    await supervisor.wait_serving(worker)
                demo = Demo(console, engine, flow, supervisor, state, framework=framework)
                demo.engine_process = process
                stack.push_async_callback(demo.cancel_crash)  # runs before the Workers are stopped
                demo.header(crash=crash or crash_engine)
                await demo.run(approver, crash=crash or crash_engine)
        except TimeoutError as error:
            raise CliError(f"the demo did not finish within {DEMO_TIMEOUT:g} s") from error
