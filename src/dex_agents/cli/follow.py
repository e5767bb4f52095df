"""Following a session's live events: read, look up what the events leave out, draw, answer approvals.

`SessionFollower` reads the session's ``flow.agent_events`` Stream from a
resume token, draws every event with an `EventRenderer`, and hands each
approval that is still pending to an `Approver` (demo and chat ask at the
terminal; ``watch`` passes none and takes typed commands instead). Events
carry no tool arguments or results, so the follower reads them from the
snapshot. Each answer names who gave it (``answered_by``, the OS user by
default) and binds an approval to the call as the person was shown it
(`ApprovalRequest.call_digest`). A turn ends for the follower at ``turn_committed``, written after
the turn's state committed: the stored messages it reads then need no
waiting. Other events arrive before their Step commits, so the follower reads
the snapshot again briefly until it shows what they announce. Streams are best
effort: while no event arrives the follower checks the snapshot, so a lost
event cannot make it wait forever. A server that stops answering for a while
(a dev server restarting on its data dir) is waited for, up to `RECONNECT_WAIT`,
and the follower reads on from its resume token.
"""

import asyncio
import contextlib
import getpass
import os
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

import attrs
import dex
from rich.console import Console
from rich.status import Status

from dex_agents.cli.render import EventExtras, EventRenderer
from dex_agents.domain.events import (
    AgentEvent,
    AgentEventType,
    InterruptRaisedPayload,
    ToolCallDeferredPayload,
    ToolCallFinishedPayload,
    TurnCommittedPayload,
    TurnStartedPayload,
)
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.session import turn_number_or_zero
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.domain.tools import AgentToolCall, ToolCallStatus, call_digest
from dex_agents.infrastructure.dex.client import AgentEventMessage, AgentSessionClient, MessageReceipt

T = TypeVar("T")

DEFAULT_POLL = timedelta(seconds=1)
"""How long one read waits for an event before the follower checks the snapshot."""

_SETTLE_SECONDS = 5.0
"""How long the follower waits for a Step's commit to show what its event announced (a time, not a count of
reads: a read's own cost varies with the machine's load and with how many RPCs a snapshot takes)."""
_SETTLE_PAUSE = 0.05
_TURN_ENDS = (AgentEventType.TURN_COMMITTED,)

RECONNECT_WAIT = timedelta(seconds=60)
"""How long the follower waits for a server that does not answer (restarting) before it gives up."""
_RECONNECT_PAUSE = 0.2


def unreachable(error: dex.DexServiceError) -> bool:
    """Whether a call failed because the server did not answer (down, restarting), not because of the call."""
    return error.code.name in ("UNAVAILABLE", "DEADLINE_EXCEEDED") and not isinstance(error, dex.LongPollTimeoutError)


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """A pending approval, as a person is asked about it."""

    session_id: str
    """The session."""
    interrupt_id: str
    """What `AgentSessionClient.resolve_interrupt` takes."""
    tool_name: str
    """The tool waiting."""
    arguments: str
    """Its arguments (JSON text)."""
    deadline: datetime | None
    """When the session stops waiting, if ever."""

    @property
    def call_digest(self) -> str:
        """The digest of the call as the person is shown it (`tool_name`, `arguments`): an approval binds to it."""
        return call_digest(self.tool_name, self.arguments)

    @classmethod
    def of(cls, session_id: str, interrupt: AgentInterrupt) -> "ApprovalRequest":
        """Build the request for one pending interrupt."""
        return cls(
            session_id=session_id,
            interrupt_id=interrupt.interrupt_id,
            tool_name=interrupt.tool_name,
            arguments=interrupt.arguments,
            deadline=interrupt.deadline,
        )


@attrs.frozen(kw_only=True)
class ApprovalDecision:
    """A person's answer."""

    approved: bool
    """Whether the call may run."""
    rejection_message: str | None = None
    """Why not (sent only with a rejection)."""


class Approver(Protocol):
    """Decides pending approvals; ``None`` leaves the approval pending."""

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision | None:
        """Return the answer to ``request``."""
        ...


def os_user() -> str:
    """Who runs this command, as the OS says (``$LOGNAME``, ``$USER``..., else the account of the process)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return f"uid {os.getuid()}"


def is_idle(snapshot: AgentSnapshot, *, min_turns: int = 0) -> bool:
    """Whether the snapshot is idle (`AgentSnapshot.is_idle`) after at least ``min_turns`` turns."""
    return snapshot.is_idle and snapshot.state is not None and snapshot.state.turn_count >= min_turns


def _approver_name(answered_by: str | None) -> str:
    return answered_by or os_user()


@attrs.define
class SessionFollower:
    """Reads, enriches and draws one session's events; answers its approvals through an `Approver`."""

    sessions: AgentSessionClient
    """The session client of the session's Flow."""
    session_id: str
    """The session."""
    renderer: EventRenderer
    """Where events are drawn."""
    approver: Approver | None = attrs.field(default=None, kw_only=True)
    """Answers pending approvals; ``None`` only draws them."""
    answered_by: str = attrs.field(default=None, kw_only=True, converter=_approver_name)
    """Who the answers name as approver (given ``None``: the OS user, `os_user`)."""
    resume_token: str = attrs.field(default="", kw_only=True)
    """Where to start reading (``""``: the oldest event kept)."""
    poll: timedelta = attrs.field(default=DEFAULT_POLL, kw_only=True)
    """How long one read waits before the snapshot is checked."""
    on_event: Callable[[AgentEvent], None] | None = attrs.field(default=None, init=False)
    """Called after each event is drawn (the demo uses it to react to a tool starting)."""
    last_snapshot: AgentSnapshot | None = attrs.field(default=None, init=False)
    """The latest snapshot the follower read."""
    _asked: set[str] = attrs.field(factory=set, init=False)

    @property
    def console(self) -> Console:
        """The renderer's console."""
        return self.renderer.console

    async def snapshot(self) -> AgentSnapshot:
        """Read (and remember) the session's snapshot."""
        self.last_snapshot = await self._through_restarts(lambda: self.sessions.get_agent_snapshot(self.session_id))
        return self.last_snapshot

    async def _through_restarts(self, call: Callable[[], Awaitable[T]]) -> T:
        """Await ``call``, again while the server does not answer, for at most `RECONNECT_WAIT`."""
        deadline = asyncio.get_running_loop().time() + RECONNECT_WAIT.total_seconds()
        while True:
            try:
                return await call()
            except dex.DexServiceError as error:
                if not unreachable(error) or asyncio.get_running_loop().time() >= deadline:
                    raise
            await asyncio.sleep(_RECONNECT_PAUSE)

    async def follow_turn(self, min_turns: int) -> AgentSnapshot:
        """Follow until turn ``min_turns`` (or a later one) is committed, and return the snapshot then."""

        def done(event: AgentEvent) -> bool:
            return event.type in _TURN_ENDS and turn_number_or_zero(event.turn_id) >= min_turns

        return await self.follow(until=done, idle_after_turns=min_turns)

    async def follow_receipt(self, receipt: MessageReceipt, *, turns_before: int) -> AgentSnapshot:
        """Follow until the turn the receipt's message started is committed, and return the snapshot then.

        The turn is found by the receipt (`AgentSessionClient.find_turn`), so
        messages queued by others cannot make it stop early; ``turns_before``
        (the turn count read before the message was sent) only bounds the
        fallback that stops on an idle snapshot when events were lost.
        """
        turn_id: str | None = None
        async with contextlib.aclosing(self.events(idle_after_turns=turns_before + 1)) as events:
            async for event in events:
                if event.type is not AgentEventType.TURN_COMMITTED:
                    continue
                if turn_id is None:
                    turn_id = await self.sessions.find_turn(receipt)
                if turn_id is not None and event.turn_id == turn_id:
                    break
        self.renderer.flush()
        return await self.snapshot()

    async def follow(
        self,
        *,
        until: Callable[[AgentEvent], bool] | None = None,
        idle_after_turns: int | None = None,
    ) -> AgentSnapshot:
        """Follow events until ``until`` holds for one, or the session is idle.

        Args:
            until: stop after drawing an event it accepts.
            idle_after_turns: also stop when a snapshot (read while no event
                arrives) shows no running turn, no pending approval and at
                least this many turns; ``None`` never stops on that.
        """
        async with contextlib.aclosing(self.events(idle_after_turns=idle_after_turns)) as events:
            async for event in events:
                if until is not None and until(event):
                    break
        self.renderer.flush()
        return await self.snapshot()

    async def events(self, *, idle_after_turns: int | None = None) -> AsyncGenerator[AgentEvent, None]:
        """Yield each event after it was drawn (and its approval answered)."""
        while True:
            message = await self._next(idle_after_turns)
            if message is None:
                return
            self.resume_token = message.resume_token
            await self.handle(message.event)
            yield message.event
            if idle_after_turns is not None and message.event.type in _TURN_ENDS:
                # The end of the session's latest turn: stop now if nothing else is going on.
                snapshot = await self.snapshot()
                latest = snapshot.state is not None and snapshot.state.turn_count <= turn_number_or_zero(
                    message.event.turn_id
                )
                if latest and is_idle(snapshot, min_turns=idle_after_turns):
                    return

    async def _next(self, idle_after_turns: int | None) -> AgentEventMessage | None:
        """Wait for the next event; ``None`` once the session is idle (when asked to stop then).

        Between reads the snapshot is checked, and on a terminal a spinner says what the session waits for.
        """
        spinner: Status | None = None
        try:
            while True:
                try:
                    return await self._through_restarts(
                        lambda: self.sessions.read_agent_event(self.session_id, self.resume_token, long_poll=self.poll)
                    )
                except dex.LongPollTimeoutError:
                    pass
                snapshot = await self.snapshot()
                if idle_after_turns is not None and is_idle(snapshot, min_turns=idle_after_turns):
                    return None
                unasked = [
                    i
                    for i in snapshot.pending_interrupts
                    if i.interrupt_id not in self._asked and i.kind is InterruptKind.APPROVAL
                ]
                if unasked and self.approver is not None:
                    # Its event was lost or is still to come: the snapshot is the truth.
                    if spinner is not None:
                        spinner.stop()
                        spinner = None
                    for interrupt in unasked:
                        await self.answer(ApprovalRequest.of(self.session_id, interrupt))
                    continue
                if spinner is not None:
                    spinner.update(_waiting_for(snapshot))
                elif self.renderer.can_show_spinner():
                    spinner = self.console.status(_waiting_for(snapshot), spinner="dots")
                    spinner.start()
        finally:
            if spinner is not None:
                spinner.stop()

    async def handle(self, event: AgentEvent) -> None:
        """Look up what ``event`` leaves out, draw it, and answer its approval if it asks for one."""
        extras = await self._extras(event)
        self.renderer.handle(event, extras)
        if (
            event.type is AgentEventType.INTERRUPT_RAISED
            and extras.interrupt is not None
            and extras.interrupt.kind is InterruptKind.APPROVAL
        ):
            await self.answer(ApprovalRequest.of(self.session_id, extras.interrupt))
        if self.on_event is not None:
            self.on_event(event)

    async def answer(self, request: ApprovalRequest) -> None:
        """Ask the approver about ``request`` and send its answer."""
        if self.approver is None or request.interrupt_id in self._asked:
            return
        self._asked.add(request.interrupt_id)
        self.renderer.flush()
        decision = await self.approver(request)
        if decision is None:
            return
        accepted = await self.sessions.resolve_interrupt(
            self.session_id,
            request.interrupt_id,
            approved=decision.approved,
            rejection_message=None if decision.approved else decision.rejection_message,
            approver=self.answered_by,
            # An approval is of the call the person was shown: a call that differs is failed, not run.
            call_digest=request.call_digest if decision.approved else None,
        )
        if not accepted:
            self.renderer.line(
                f"the session refused the answer: {request.interrupt_id} is no longer pending", style="red"
            )

    async def _user_text(self, sequence: int) -> str | None:
        """Return the text of message ``sequence``, waiting briefly for the Step that stores it to commit."""
        deadline = asyncio.get_running_loop().time() + _SETTLE_SECONDS
        while True:
            page = await self.sessions.list_agent_messages(self.session_id, after_sequence=sequence - 1, limit=1)
            if page.messages:
                return page.messages[0].text
            if asyncio.get_running_loop().time() >= deadline:
                return None
            await asyncio.sleep(_SETTLE_PAUSE)

    async def _settled(self, ready: Callable[[AgentSnapshot], bool]) -> AgentSnapshot | None:
        """Return the first snapshot ``ready`` accepts, or ``None`` after a short while.

        A Step writes its events while it runs and commits its state when it ends, so
        the snapshot read right after an event can still lack what the event announced.
        """
        deadline = asyncio.get_running_loop().time() + _SETTLE_SECONDS
        while True:
            snapshot = await self.snapshot()
            if ready(snapshot):
                return snapshot
            if asyncio.get_running_loop().time() >= deadline:
                return None
            await asyncio.sleep(_SETTLE_PAUSE)

    async def _extras(self, event: AgentEvent) -> EventExtras:
        turn_id = event.turn_id
        payload = event.payload
        call_id = (
            payload.tool_call_id
            if isinstance(payload, ToolCallDeferredPayload | ToolCallFinishedPayload | InterruptRaisedPayload)
            else None
        )

        def turn_over(snapshot: AgentSnapshot) -> bool:
            return snapshot.state is not None and snapshot.state.active_turn_id != turn_id

        def record(snapshot: AgentSnapshot) -> AgentToolCall | None:
            return next((r for r in snapshot.tool_calls if r.tool_call_id == call_id and r.turn_id == turn_id), None)

        try:
            match payload:
                case TurnStartedPayload(sequence=sequence):
                    if sequence >= 1:
                        return EventExtras(user_text=await self._user_text(sequence))
                case ToolCallDeferredPayload():
                    deferred = await self._settled(lambda s: record(s) is not None or turn_over(s))
                    return EventExtras(tool_call=None if deferred is None else record(deferred))
                case ToolCallFinishedPayload():
                    finished = await self._settled(lambda s: (r := record(s)) is None or r.is_final)
                    return EventExtras(tool_call=None if finished is None else record(finished))
                case InterruptRaisedPayload(interrupt_id=interrupt_id):

                    def pending(snapshot: AgentSnapshot) -> AgentInterrupt | None:
                        return next((i for i in snapshot.pending_interrupts if i.interrupt_id == interrupt_id), None)

                    def known(snapshot: AgentSnapshot) -> bool:
                        r = record(snapshot)
                        waiting = (ToolCallStatus.AWAITING_APPROVAL, ToolCallStatus.AWAITING_RESULT)
                        answered = r is not None and r.status not in waiting
                        return pending(snapshot) is not None or answered or turn_over(snapshot)

                    raised = await self._settled(known)
                    return EventExtras(interrupt=None if raised is None else pending(raised))
                case TurnCommittedPayload():
                    # Written after the commit: the snapshot already holds the turn's messages.
                    committed = await self.snapshot()
                    of_turn = [m for m in committed.messages if m.turn_id == turn_id]
                    return EventExtras(stored_messages=tuple(of_turn[1:]))
                case _:
                    pass
        except dex.DexServiceError:
            # The extras only decorate the event; draw it without them.
            return EventExtras()
        return EventExtras()


def _waiting_for(snapshot: AgentSnapshot) -> str:
    if snapshot.pending_interrupts:
        return "waiting for an approval"
    state = snapshot.state
    if state is None:
        return "waiting for the session to start"
    return f"waiting for the session ({state.status.value.replace('_', ' ')})"
