"""`AgentSessionClient`: start, talk to, watch and stop agent sessions from an application.

Everything goes through the Flow's RPCs and its live event Stream; the client
never touches state directly. An RPC to a session that does not exist (or
has ended, where the call needs it running) raises `SessionUnavailableError`,
which is also the SDK's `dex.FlowNotActiveOrNotFoundError`; starting an ID that
exists raises `SessionAlreadyExistsError` (`ensure_session` is the idempotent
start); a call no Worker can serve raises `NoWorkerError` (see
`dex_agents.infrastructure.dex.session_errors`). Every input is checked before anything is sent
(`dex_agents.application.inputs`): a text over the Flow's
``max_input_text_bytes``, with a lone surrogate or NUL, or a malformed ID
raises `InvalidInputError` with the reason, and nothing reaches the session.
Every method checks its session ID first (`dex_agents.application.inputs.session_id_refusal`):
a blank ID, one with a ``/``, a control or bidi character, or (to start) a
character Dex reserves, is refused before anything is sent or recorded.
Steering and cancelling a running turn: `AgentSessionClient.send_user_message`
and ``submit_user_message`` take ``delivery="queue" | "steer"``;
`AgentSessionClient.withdraw_user_message` removes a message no turn has
taken (by its client message ID); `AgentSessionClient.cancel_turn` asks the
running turn to stop at its next safe boundary.
``resolve_interrupt`` and ``cancel_turn`` retry a lock conflict (a Step holding
``PENDING_INTERRUPTS``) for up to 30 seconds: Dex holds a Step's lock through
its retry back-off, and ``AwaitToolApproval``'s five attempts back off
1 + 2 + 4 + 8 s. The query methods
load exactly the ``AGENT_MESSAGES`` instances they return.

Following what was sent, without sleeps or a test helper:

- `AgentSessionClient.submit_user_message` queues a message under a fresh
  ``client_message_id`` and returns a `MessageReceipt`: the ID, the event
  stream position and the message count before the message was queued.
- `AgentSessionClient.wait_for_turn` takes a receipt (or a turn ID) and
  returns the `TurnResult` once the turn's end is committed: ``completed``,
  ``cancelled``, or ``failed`` with its error. It finds the receipt's turn by the ID on the
  turn's stored user message, which needs no counting of queued messages.
- `AgentSessionClient.wait_until_idle` returns the snapshot once no turn runs
  and no message is queued.

Both waits read the committed snapshot, and between reads block on the event
stream (``read_agent_event`` with a long poll) for ``turn_started`` and
``turn_committed``; the latter is written after the turn's state committed, so
the read that follows it sees the end. Events are best effort, so a long poll
that times out (every `RECHECK_INTERVAL`) reads the snapshot anyway.
"""

import asyncio
import collections
import contextlib
import enum
import json
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

import attrs
import dex

from dex_agents.application.inputs import id_refusal, session_id_refusal, text_refusal
from dex_agents.application.rpcs.resolve_interrupt import request_refusal
from dex_agents.application.rpcs.submit_tool_result import raise_for_tool_result_answer
from dex_agents.application.rpcs.submit_tool_result import request_refusal as result_refusal
from dex_agents.domain.errors import InvalidInputError
from dex_agents.domain.events import AgentEvent, AgentEventType, TurnFailedPayload
from dex_agents.domain.interrupts import ResolveInterruptRequest, SubmitToolResultAnswer, SubmitToolResultRequest
from dex_agents.domain.json_values import JsonValue
from dex_agents.domain.limits import InputProblem
from dex_agents.domain.messages import (
    AgentMessage,
    AgentUserMessage,
    MessageDelivery,
    MessageRole,
    message_sequence_key,
)
from dex_agents.domain.session import turn_number
from dex_agents.domain.snapshot import (
    MAX_PAGE_LIMIT,
    AgentMessagesPage,
    AgentSnapshot,
    ListAgentMessagesRequest,
    MessageIndex,
    TurnResult,
    page_sequences,
    snapshot_sequences,
    turn_result,
)
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.turn_control import CancelTurnRequest
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.infrastructure.dex.persistence import AGENT_MESSAGES
from dex_agents.infrastructure.dex.session_errors import NoWorkerError as NoWorkerError
from dex_agents.infrastructure.dex.session_errors import SessionAlreadyExistsError as SessionAlreadyExistsError
from dex_agents.infrastructure.dex.session_errors import SessionUnavailableError as SessionUnavailableError
from dex_agents.infrastructure.dex.session_errors import translated_errors
from dex_agents.infrastructure.dex.session_index import SessionIndex


class _Unset(enum.Enum):
    UNSET = "unset"


_UNSET = _Unset.UNSET


InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")

LOCK_CONFLICT_RETRY = timedelta(seconds=30)
"""How long `AgentSessionClient.resolve_interrupt` retries a lock conflict.

Longer than the back-offs of the Step that takes the lock (``AwaitToolApproval``:
Dex's default 1 s doubling, over its attempts), since Dex keeps the lock through them.
"""

RECHECK_INTERVAL = timedelta(seconds=2)
"""Longest a wait blocks on the event stream before it reads the snapshot again (events are best effort)."""

_LOCK_CONFLICT_PAUSE = 0.05
_LOCK_CONFLICT_MAX_PAUSE = 1.0
_STOP_WAIT = timedelta(seconds=30)
_MAX_LONG_POLL_SECONDS = 60
_SNAPSHOT_TRIES = 5
_KEPT_INDEXES = 1024
"""Sessions whose last message index a client keeps for its next snapshot (least recently read go first)."""
_WAKE_UP = frozenset({AgentEventType.TURN_STARTED, AgentEventType.TURN_COMMITTED})


@attrs.frozen(kw_only=True)
class MessageReceipt:
    """What `AgentSessionClient.submit_user_message` knows of a message it queued."""

    session_id: str
    """The session."""
    client_message_id: str
    """The message's ID; stored on the user message of the turn it starts."""
    accepted: bool
    """Whether the session queued it (``False`` for blank text)."""
    message_count: int
    """Messages stored before it was queued: its turn's messages come after them."""
    resume_token: str
    """The event stream position before it was queued: its turn's events come after it."""


@attrs.frozen(kw_only=True)
class SessionStart:
    """What `AgentSessionClient.ensure_session` found or started."""

    session_id: str
    """The session."""
    run_id: str
    """Dex's run ID of the session's Flow execution."""
    created: bool
    """Whether this call started it (``False``: it existed, and nothing was sent)."""
    running: bool
    """Whether it takes messages (``False``: it has ended; its state stays readable)."""


@attrs.frozen(kw_only=True)
class AgentEventMessage:
    """One live event and the position to resume reading after it."""

    event: AgentEvent
    """The event."""
    resume_token: str
    """Pass to `AgentSessionClient.read_agent_event` to read the next one."""


class AgentSessionClient:
    """Drives the sessions of one `AgentSessionFlow` through a Dex `AsyncClient`."""

    def __init__(
        self, client: dex.AsyncClient, flow: AgentSessionFlow, *, session_index: SessionIndex | None = None
    ) -> None:
        """Create a client; with ``session_index``, `start_session` records each session there (for the console)."""
        self._client = client
        self._flow = flow
        self._session_index = session_index
        self._indexes: collections.OrderedDict[str, MessageIndex] = collections.OrderedDict()

    @property
    def flow(self) -> AgentSessionFlow:
        """The sessions' Flow."""
        return self._flow

    async def start_session(
        self,
        session_id: str,
        initial_message: str | None = None,
        *,
        options: dex.StartFlowOptions | None = None,
    ) -> str:
        """Start a session (one Flow execution) and return its run ID.

        A blank or missing ``initial_message`` starts no turn: the session waits
        for `send_user_message`.

        Raises:
            InvalidInputError: the session ID or the first message is refused; nothing was recorded or started.
            SessionIndexError: the client's session index could not record the session; it was not started.
            SessionAlreadyExistsError: a session (or another Flow) has this ID; nothing was started.
                `ensure_session` starts one only when none has the ID.
        """
        _raise_if(session_id_refusal(session_id, starting=True))
        if initial_message is not None:
            _raise_if(
                text_refusal(
                    initial_message,
                    options=self._flow.options,
                    field="initial_message",
                    what="the first message",
                    allow_blank=True,
                )
            )
        start = AgentSessionStartInput(initial_message=initial_message)
        if self._session_index is not None:
            # Before the start: a crash in between leaves a row without a session, never a session without a row.
            await self._session_index.arecord(self._flow.get_flow_type(), session_id)
        with translated_errors(self._flow.get_flow_type()):
            return await self._client.start_flow(self._flow, session_id, start, options or dex.StartFlowOptions())

    async def ensure_session(
        self,
        session_id: str,
        initial_message: str | None = None,
        *,
        options: dex.StartFlowOptions | None = None,
    ) -> "SessionStart":
        """Start the session unless one with this ID exists; the idempotent `start_session`.

        For applications that key sessions by something of their own (a chat
        front-end's conversation ID): call it before every use, from any
        number of processes at once. When no session has the ID it starts one
        as `start_session` does, with ``initial_message`` as its first message.
        When this agent's session has it, nothing is started or sent (not
        ``initial_message`` either: send with `submit_user_message`), and the
        session is returned as it is, ``running`` or ended (an ended session's
        history stays readable; Dex does not start a new session under a used ID).

        Raises:
            InvalidInputError: as `start_session`.
            SessionIndexError: as `start_session`.
            SessionAlreadyExistsError: a Flow of another type has this ID: it cannot be this agent's session.
        """
        try:
            run_id = await self.start_session(session_id, initial_message, options=options)
        except SessionAlreadyExistsError as exists:
            try:
                info = await self.describe_session(session_id)
            except SessionUnavailableError:
                raise exists from None
            if info.flow_type != self._flow.get_flow_type():
                raise SessionAlreadyExistsError(
                    exists.code,
                    exists.sub_status,
                    f"ID {session_id!r} belongs to a Flow of type {info.flow_type!r}, not to a session of "
                    f"{self._flow.get_flow_type()!r}: use another session ID",
                    exists.operation,
                    session_id,
                ) from exists
            return SessionStart(
                session_id=session_id,
                run_id=info.run_id,
                created=False,
                running=info.status is dex.FlowStatus.RUNNING,
            )
        return SessionStart(session_id=session_id, run_id=run_id, created=True, running=True)

    async def send_user_message(
        self, session_id: str, text: str, *, delivery: MessageDelivery | str = MessageDelivery.QUEUE
    ) -> bool:
        """Send a user message; ``False`` for blank text, as the spec says.

        ``delivery="queue"`` (the default, the spec's behaviour): the message
        waits for the running turn to end and starts the next turn.
        ``delivery="steer"``: sent while a turn runs, it joins that turn at its
        next model-call boundary, after every tool result of the model's
        current response (never between a tool call and its result); it is
        kept in order and the turn's next model call sees it, and the event
        ``user_message_steered`` says where it landed. If that turn ends before
        such a boundary (its model answered without tools, it failed or was
        cancelled), the message starts the next turn, before queued ones.
        Sent while no turn runs, it starts a turn as a queued message does.
        The message gets a fresh client message ID (`AgentUserMessage.message_id`
        in the snapshot's ``queued_messages``), which `withdraw_user_message` takes.

        Raises:
            InvalidInputError: the text is refused (too large, a lone surrogate, NUL) or the session ID is
                malformed; nothing was sent.
            ValueError: ``delivery`` is neither ``"queue"`` nor ``"steer"``.
            SessionUnavailableError: no session has this ID, or it has ended.
        """
        how = MessageDelivery(delivery)
        if not self._check_user_message(session_id, text):
            return False
        # A fresh client message ID, so the message can be found in the snapshot's queue and withdrawn.
        message = AgentUserMessage(text=text, client_message_id=uuid.uuid4().hex, delivery=how)
        result = await self._call(self._flow.send_user_message, session_id, message)
        return bool(result)

    async def withdraw_user_message(self, session_id: str, message_id: str) -> bool:
        """Remove a message that waits for a turn; ``True`` when it was removed.

        ``message_id`` is the message's client message ID: the
        ``client_message_id`` of the `MessageReceipt` `submit_user_message`
        returned (or the one passed to it). The snapshot lists waiting
        messages (`AgentSnapshot.queued_messages`) with theirs. ``False`` when
        no waiting message has it: a turn took it already (a queued message
        that started a turn, a steered one the running turn took), it was
        withdrawn, or it was never sent. `send_user_message` gives each message
        a fresh ID too (read it from the snapshot's ``queued_messages``).
        ``True`` means the message will never run: a turn that takes it at the
        same moment makes the withdrawal fail as a whole (``False``), never both.

        Raises:
            InvalidInputError: the session ID or the message ID is malformed; nothing was sent.
            SessionUnavailableError: no session has this ID, or it has ended.
        """
        self._check_session_id(session_id)
        _raise_if(id_refusal(message_id, field="message_id", what="the message ID"))
        try:
            result = await self._call(self._flow.withdraw_user_message, session_id, message_id)
        except dex.ChannelMessageNotFoundError:
            # A turn took the message after the RPC read the queue and before it committed the
            # deletion: the RPC is transactional, so Dex refused the whole commit. Nothing was removed.
            return False
        return bool(result)

    async def cancel_turn(self, session_id: str, reason: str | None = None) -> bool:
        """Ask the running turn to stop at its next safe boundary; ``False`` when no turn runs.

        The request is durable (it survives a Worker crash, and takes effect
        once). Pending approvals of the turn are answered ``rejected`` with the
        reason at once; a tool call that has not started ends ``cancelled``
        without running; a tool already running finishes and its result is
        kept (a write is never abandoned half-way without a record); no further
        model call runs. The turn then ends with ``turn_cancelled`` and a note
        in its history listing the tool calls that finished, so the next
        turn's model knows what happened and what ran; steered messages a
        model call of the turn saw are stored with it, before the note, and
        those it had not shown the model start the next turn.

        A cancel that arrives while a model call (``RunModel``) runs takes
        effect when that call returns: the call is not interrupted. If its
        answer is final, the turn completes with it (nothing was left to
        stop); if it asked for tools, they are cancelled before they run.
        A lock conflict with a running Step is retried for 30 seconds, like
        `resolve_interrupt`.

        Raises:
            InvalidInputError: the reason is refused (too large, a lone surrogate, NUL) or the session ID is
                malformed; nothing was sent.
            SessionUnavailableError: no session has this ID, or it has ended.
            dex.RpcLockConflictError: the conflict outlasted the retries.
        """
        self._check_session_id(session_id)
        if reason is not None:
            _raise_if(
                text_refusal(
                    reason, options=self._flow.options, field="reason", what="the cancel reason", allow_blank=True
                )
            )
        request = CancelTurnRequest(reason=reason)
        accepted = await self._call_through_lock_conflicts(self._flow.cancel_turn, session_id, request)
        return bool(accepted)

    async def submit_user_message(
        self,
        session_id: str,
        text: str,
        *,
        client_message_id: str | None = None,
        delivery: MessageDelivery | str = MessageDelivery.QUEUE,
    ) -> MessageReceipt:
        """Send a user message like `send_user_message`, and return a receipt to follow it.

        ``client_message_id`` defaults to a fresh UUID; it ends up on the stored
        user message of the turn the message starts, and it is the ID
        `withdraw_user_message` takes. ``delivery`` is as for
        `send_user_message` (a steered message that joins a running turn
        starts no turn of its own: `wait_for_turn` with its receipt does not
        find one). A blank text gets a receipt that is not ``accepted``, and
        nothing is sent.

        Raises:
            InvalidInputError: as `send_user_message`; nothing was sent.
        """
        how = MessageDelivery(delivery)
        message_id = client_message_id or uuid.uuid4().hex
        if client_message_id is not None:
            _raise_if(id_refusal(client_message_id, field="client_message_id", what="the client message ID"))
        if not self._check_user_message(session_id, text):
            return MessageReceipt(
                session_id=session_id, client_message_id=message_id, accepted=False, message_count=0, resume_token=""
            )
        resume_token = await self.latest_resume_token(session_id)
        count = await self.get_message_count(session_id)
        result = await self._call(
            self._flow.send_user_message,
            session_id,
            AgentUserMessage(text=text, client_message_id=message_id, delivery=how),
        )
        return MessageReceipt(
            session_id=session_id,
            client_message_id=message_id,
            accepted=bool(result),
            message_count=count,
            resume_token=resume_token,
        )

    async def find_turn(self, receipt: MessageReceipt) -> str | None:
        """Return the turn the receipt's message started, or ``None`` while it has not started."""
        found = await self._find_turn(receipt, receipt.message_count)
        return None if found is None else found.turn_id

    async def _find_turn(self, receipt: MessageReceipt, after_sequence: int) -> AgentMessage | None:
        cursor: int | None = after_sequence
        while cursor is not None:
            page = await self.list_agent_messages(receipt.session_id, after_sequence=cursor, limit=MAX_PAGE_LIMIT)
            for message in page.messages:
                if message.role is MessageRole.USER and message.client_message_id == receipt.client_message_id:
                    return message
            cursor = page.next_after_sequence
        return None

    async def wait_for_turn(
        self, session_id: str, turn: str | MessageReceipt, *, timeout: float | timedelta
    ) -> TurnResult:
        """Wait until the turn's end is committed, and return how it ended.

        Args:
            session_id: the session.
            turn: a turn ID (``turn-<n>``) or the receipt of a message (its turn).
            timeout: seconds (or a duration) to wait at most.

        Raises:
            ValueError: the receipt is of a message the session refused, or of another session.
            TimeoutError: the turn did not end in time.
        """
        if isinstance(turn, MessageReceipt):
            if not turn.accepted or turn.session_id != session_id:
                raise ValueError(f"the receipt of {turn.client_message_id!r} starts no turn of {session_id!r}")
            receipt: MessageReceipt | None = turn
            turn_id: str | None = None
            resume_token = turn.resume_token  # the turn's events all come after it
        else:
            turn_number(turn)  # refuses what is not a turn ID
            receipt, turn_id = None, turn
            # Taken before the first read: whatever that read misses is written after this position.
            resume_token = await self.latest_resume_token(session_id)
        deadline = time.monotonic() + _seconds(timeout)
        errors: dict[str, str] = {}
        first: AgentMessage | None = None
        while True:
            if receipt is not None and first is None:
                first = await self._find_turn(receipt, receipt.message_count)
                turn_id = None if first is None else first.turn_id
            if turn_id is not None:
                result = await self._turn_result(session_id, turn_id, first, errors.get(turn_id))
                if result is not None:
                    return result
            resume_token = await self._wait_for_news(session_id, resume_token, deadline, errors, turn_id or "a turn")

    async def _turn_result(
        self, session_id: str, turn_id: str, first: AgentMessage | None, error_hint: str | None
    ) -> TurnResult | None:
        snapshot = await self.get_agent_snapshot(session_id)
        result = turn_result(snapshot, turn_id, error_hint=error_hint)
        if result is None or first is None or (result.messages and result.messages[0].sequence == first.sequence):
            return result
        # The turn's messages left the snapshot (it keeps the latest 200): read them from its user message.
        page = await self.list_agent_messages(session_id, after_sequence=first.sequence - 1, limit=MAX_PAGE_LIMIT)
        return turn_result(snapshot, turn_id, messages=page.messages, error_hint=error_hint)

    async def wait_until_idle(self, session_id: str, *, timeout: float | timedelta) -> AgentSnapshot:
        """Wait until the session runs no turn and has no queued message, and return that snapshot.

        It reads the committed state, so for the few milliseconds between the
        session taking a queued message and committing its new turn it looks
        idle; to wait for a message you sent, use `wait_for_turn` with its receipt.

        Raises:
            TimeoutError: the session was not idle in time.
        """
        deadline = time.monotonic() + _seconds(timeout)
        resume_token = await self.latest_resume_token(session_id)
        while True:
            snapshot = await self.get_agent_snapshot(session_id)
            if snapshot.is_idle:
                return snapshot
            resume_token = await self._wait_for_news(session_id, resume_token, deadline, {}, "the session to be idle")

    async def _wait_for_news(
        self, session_id: str, resume_token: str, deadline: float, errors: dict[str, str], what: str
    ) -> str:
        """Read events after ``resume_token`` until one that can change a wait's answer, or a recheck is due.

        Returns the token to read on from. Records each ``turn_failed`` error by turn in ``errors``.

        Raises:
            TimeoutError: ``deadline`` passed.
        """
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{session_id}: timed out waiting for {what}")
            # Dex long-polls in whole seconds: at least one, and the wait itself ends at the deadline.
            poll = timedelta(seconds=max(1, int(min(left, RECHECK_INTERVAL.total_seconds()))))
            try:
                message = await asyncio.wait_for(
                    self.read_agent_event(session_id, resume_token, long_poll=poll),
                    None if math.isinf(left) else left,
                )
            except dex.LongPollTimeoutError:
                return resume_token
            except TimeoutError:
                raise TimeoutError(f"{session_id}: timed out waiting for {what}") from None
            resume_token = message.resume_token
            event = message.event
            if isinstance(event.payload, TurnFailedPayload) and event.turn_id is not None:
                errors[event.turn_id] = event.payload.error
            if event.type in _WAKE_UP:
                return resume_token

    async def describe_session(self, session_id: str) -> dex.FlowInfo:
        """Return what Dex says of the session's current or latest run: its Flow type, run ID, status, start.

        Raises:
            InvalidInputError: the session ID is refused.
            SessionUnavailableError: no session (no Flow of any type) has this ID.
        """
        self._check_session_id(session_id)
        try:
            return await self._client.describe_flow(session_id)
        except dex.FlowNotFoundError as error:
            raise SessionUnavailableError(
                error.code, error.sub_status, f"session {session_id!r} does not exist", error.operation, session_id
            ) from error

    async def latest_resume_token(self, session_id: str) -> str:
        """Return the position after the newest retained event (``""`` when there is none).

        Reading from it with `read_agent_event` yields only events written later.
        """
        self._check_session_id(session_id)
        page = await self._client.list_stream_messages(session_id, self._flow.events_stream, 1)
        return page.messages[0].resume_token if page.messages else ""

    async def resume_token_before_turn(self, session_id: str, turn_id: str, *, max_events: int = 5000) -> str:
        """Return the position just before the turn's ``turn_started`` event, to read the whole turn from.

        Pages back from the newest retained event (newest first, 100 at a time),
        so a UI that opens a running turn reads that turn's events, not the whole
        session's. ``""`` (the oldest retained event) when the turn's start is no
        longer retained; the oldest position looked at when it is not within
        ``max_events`` events.
        """
        self._check_session_id(session_id)
        before = ""
        oldest = ""
        seen = 0
        while seen < max_events:
            page = await self._client.list_stream_messages(session_id, self._flow.events_stream, 100, before)
            messages = list(page.messages)
            for index, message in enumerate(messages):
                event: AgentEvent = message.value
                if event.type is AgentEventType.TURN_STARTED and event.turn_id == turn_id:
                    if index + 1 < len(messages):
                        return messages[index + 1].resume_token
                    if not page.next_page_token:
                        return ""
                    older = await self._client.list_stream_messages(
                        session_id, self._flow.events_stream, 1, page.next_page_token
                    )
                    return older.messages[0].resume_token if older.messages else ""
            seen += len(messages)
            if messages:
                oldest = messages[-1].resume_token
            if not page.next_page_token or not messages:
                return ""
            before = page.next_page_token
        return oldest

    async def latest_event_time(self, session_id: str) -> datetime | None:
        """Return when the newest retained event was written (``None`` when there is none): the last activity."""
        self._check_session_id(session_id)
        page = await self._client.list_stream_messages(session_id, self._flow.events_stream, 1)
        return page.messages[0].created_time if page.messages else None

    async def resolve_interrupt(
        self,
        session_id: str,
        interrupt_id: str,
        *,
        approved: bool,
        rejection_message: str | None = None,
        approver: str | None = None,
        call_digest: str | None = None,
    ) -> bool:
        """Answer a pending approval; ``False`` when it is not pending (answered, cancelled, or expired).

        An approval expires on the engine's clock: its deadline is a Dex Timer
        measured by the server, and no Worker clock is asked.

        ``approver`` names who answered; the call's record, its stored
        `ToolOutcome` and the ``interrupt_resolved`` event keep it.
        ``call_digest`` is the pending interrupt's ``call_digest`` as the
        approver saw it: a call whose digest differs is failed, not run
        (``None`` binds the approval to the interrupt's digest). A lock
        conflict with a running Step (which keeps its lock through its retry
        back-off) is retried for 30 seconds, pausing 50 ms doubling to 1 s,
        then raised.

        Raises:
            InvalidInputError: the interrupt ID or the rejection message is refused; nothing was sent.
            dex.RpcLockConflictError: the conflict outlasted the retries.
        """
        self._check_session_id(session_id)
        request = ResolveInterruptRequest(
            interrupt_id=interrupt_id,
            approved=approved,
            rejection_message=rejection_message,
            approver=approver,
            call_digest=call_digest,
        )
        _raise_if(request_refusal(request, self._flow.options))
        accepted = await self._call_through_lock_conflicts(self._flow.resolve_interrupt, session_id, request)
        return bool(accepted)

    async def submit_tool_result(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        result: JsonValue | _Unset = _UNSET,
        error: str | None = None,
    ) -> None:
        """Give a call waiting for its result from outside (a pending ``tool_result`` interrupt) its result.

        Exactly one of ``result`` (any JSON value: what the model sees as the tool's return value, as
        ``DeferredToolResults(calls={id: result})`` gives it in a plain Pydantic AI run) and ``error`` (the
        model sees it as Pydantic AI's retry feedback, as ``ModelRetry(error)`` would). A call waits for
        its result when its tool is an external tool (``ExternalToolset``) or raised ``CallDeferred``; the
        snapshot lists it in ``pending_interrupts`` with kind ``tool_result``, and ``interrupt_raised`` says
        so. A lock conflict is retried as for `resolve_interrupt`, and a call about to wait (its interrupt
        not raised yet) is tried again for the same 30 seconds.

        Raises:
            InvalidInputError: the ID is refused, neither or both of ``result`` and ``error`` were given,
                ``result`` has no JSON form, or either is over ``max_tool_output_bytes``; nothing was sent.
            UnknownToolCallError: the active turn has no such call.
            ToolResultAlreadySubmittedError: the call has its result (submitted, expired or cancelled).
            NotAwaitingToolResultError: the call waits for approval, or runs its own tool.
            dex.RpcLockConflictError: the conflict outlasted the retries.
        """
        self._check_session_id(session_id)
        request = _tool_result_request(tool_call_id, result, error)
        _raise_if(result_refusal(request, self._flow.options))
        give_up = time.monotonic() + LOCK_CONFLICT_RETRY.total_seconds()
        pause = _LOCK_CONFLICT_PAUSE
        while True:
            answer = SubmitToolResultAnswer(
                await self._call_through_lock_conflicts(self._flow.submit_tool_result, session_id, request)
            )
            if answer is not SubmitToolResultAnswer.NOT_YET_WAITING or time.monotonic() >= give_up:
                break
            await asyncio.sleep(pause)
            pause = min(pause * 2, _LOCK_CONFLICT_MAX_PAUSE)
        raise_for_tool_result_answer(answer, tool_call_id)

    async def get_agent_snapshot(self, session_id: str) -> AgentSnapshot:
        """Return the session's snapshot (works for a stopped session too).

        Reads the snapshot with exactly the messages of the session's message
        index loaded (the latest 200 that fit in 2 MiB); if the snapshot's own
        message count differs (messages were added in between), reads again with its index. The
        index is the one the last snapshot of this session showed, kept by this
        client (one RPC when nothing changed since), else read first with the
        ``get_agent_message_index`` RPC.
        """
        self._check_session_id(session_id)
        index = self._indexes.get(session_id)
        if index is None:
            index = await self.get_message_index(session_id)
        snapshot = await self._snapshot(session_id, index)
        for _ in range(_SNAPSHOT_TRIES):
            latest = MessageIndex.of(snapshot.state)
            if latest.message_count == index.message_count:
                break
            index = latest
            snapshot = await self._snapshot(session_id, index)
        self._indexes[session_id] = MessageIndex.of(snapshot.state)
        self._indexes.move_to_end(session_id)
        while len(self._indexes) > _KEPT_INDEXES:
            self._indexes.popitem(last=False)
        return snapshot

    async def _snapshot(self, session_id: str, index: MessageIndex) -> AgentSnapshot:
        sequences = snapshot_sequences(index.message_count, large_messages=index.large_messages)
        loads = tuple(AGENT_MESSAGES.load(message_sequence_key(n)) for n in sequences)
        return await self._query(
            self._flow.get_agent_snapshot,
            session_id,
            options=dex.RPCInvokeOptions(load_attribute_map_instances=loads),
        )

    async def get_message_count(self, session_id: str) -> int:
        """Return how many messages the session stored."""
        count: int = await self._query(self._flow.get_agent_message_count, session_id)
        return count

    async def get_message_index(self, session_id: str) -> MessageIndex:
        """Return how many messages the session stored, and the sizes of its large ones."""
        return await self._query(self._flow.get_agent_message_index, session_id)

    async def list_agent_messages(
        self, session_id: str, *, after_sequence: int = 0, limit: int = 50
    ) -> AgentMessagesPage:
        """Return stored messages after ``after_sequence``, oldest first.

        ``limit`` is clamped to 1..200, and a page ends early rather than hold
        over 2 MiB of messages (it always holds at least one when there is one):
        follow ``next_after_sequence`` until it is ``None``.
        """
        self._check_session_id(session_id)
        index = await self.get_message_index(session_id)
        sequences, _ = page_sequences(
            after_sequence=after_sequence,
            limit=limit,
            message_count=index.message_count,
            large_messages=index.large_messages,
        )
        if not sequences:
            return AgentMessagesPage(messages=(), next_after_sequence=None)
        loads = tuple(AGENT_MESSAGES.load(message_sequence_key(n)) for n in sequences)
        return await self._call(
            self._flow.list_agent_messages,
            session_id,
            ListAgentMessagesRequest(after_sequence=after_sequence, limit=len(sequences)),
            options=dex.RPCInvokeOptions(load_attribute_map_instances=loads),
        )

    async def read_agent_event(
        self, session_id: str, resume_token: str = "", *, long_poll: timedelta | None = None
    ) -> AgentEventMessage:
        """Wait for the next live event after ``resume_token`` ("" for the oldest retained).

        ``long_poll`` is rounded up to whole seconds (Dex waits in whole seconds, at most 60).

        Raises:
            dex.LongPollTimeoutError: nothing arrived within ``long_poll`` (a server-side wait).
            InvalidInputError: the session ID is refused.
            ValueError: ``long_poll`` is not more than 0 and at most 60 s.
        """
        self._check_session_id(session_id)
        poll = None if long_poll is None else timedelta(seconds=_long_poll_seconds(long_poll))
        message = await self._client.read_stream(session_id, self._flow.events_stream, resume_token, poll)
        return AgentEventMessage(event=message.value, resume_token=message.resume_token)

    def _check_user_message(self, session_id: str, text: str) -> bool:
        """Return whether ``text`` may be sent (``False`` for blank); raise `InvalidInputError` for a refused one."""
        self._check_session_id(session_id)
        refused = text_refusal(text, options=self._flow.options, field="text", what="the user message")
        if refused is not None and refused.problem is InputProblem.BLANK:
            return False
        _raise_if(refused)
        return True

    @staticmethod
    def _check_session_id(session_id: str) -> None:
        _raise_if(session_id_refusal(session_id))

    async def _call_through_lock_conflicts(
        self,
        rpc: Callable[[dex.Context, InputT], Awaitable[dex.RPCResult[OutputT]]],
        session_id: str,
        request: InputT,
    ) -> OutputT:
        """Invoke a locking RPC, retrying lock conflicts (backing off) for `LOCK_CONFLICT_RETRY`, then re-raising."""
        give_up = time.monotonic() + LOCK_CONFLICT_RETRY.total_seconds()
        pause = _LOCK_CONFLICT_PAUSE
        while True:
            try:
                return await self._call(rpc, session_id, request)
            except dex.RpcLockConflictError:
                if time.monotonic() >= give_up:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, _LOCK_CONFLICT_MAX_PAUSE)

    async def _call(
        self,
        rpc: Callable[[dex.Context, InputT], Awaitable[dex.RPCResult[OutputT]]],
        session_id: str,
        request: InputT,
        *,
        options: dex.RPCInvokeOptions | None = None,
    ) -> OutputT:
        """Invoke an RPC that takes an input (the SDK types RPCs as sync functions; ours are async).

        A session that is closing (``FlowClosingError``) is waited for until it has
        closed, then the call is made once more, so the caller sees what a stopped
        session answers (`SessionUnavailableError` for a write).
        """
        self._check_session_id(session_id)
        with translated_errors(self._flow.get_flow_type()):
            try:
                result = await self._client.invoke_rpc(
                    cast(Any, rpc), session_id, request, options=options or dex.RPCInvokeOptions()
                )
            except dex.FlowClosingError:
                await self._closed(session_id)
                result = await self._client.invoke_rpc(
                    cast(Any, rpc), session_id, request, options=options or dex.RPCInvokeOptions()
                )
        return cast(OutputT, result)

    async def _closed(self, session_id: str) -> None:
        """Wait until the session's Flow has closed (after a stop, the close is asynchronous)."""
        while True:
            try:
                await self._client.wait_for_flow(session_id, timeout=_STOP_WAIT)
            except dex.LongPollTimeoutError:
                continue
            return

    async def _query(
        self,
        rpc: Callable[[dex.Context], Awaitable[dex.RPCResult[OutputT]]],
        session_id: str,
        *,
        options: dex.RPCInvokeOptions | None = None,
    ) -> OutputT:
        """Invoke an RPC without input."""
        self._check_session_id(session_id)
        with translated_errors(self._flow.get_flow_type()):
            result = await self._client.invoke_rpc(
                cast(Any, rpc), session_id, options=options or dex.RPCInvokeOptions()
            )
        return cast(OutputT, result)

    async def stop_session(self, session_id: str, reason: str | None = None) -> None:
        """Stop the session and wait until it is closed; its state stays readable through the query methods.

        Dex treats a CANCEL as a signal: the Flow closes asynchronously and, while it
        closes, requests get ``FlowClosingError``. A session that is already closing
        (someone else stopped it) counts as stopped; either way this returns once the
        Flow has closed, so calls after it see a stopped session.
        """
        self._check_session_id(session_id)
        with contextlib.suppress(dex.FlowClosingError):
            await self._client.stop_flow(session_id, dex.StopFlowOptions(type=dex.StopType.CANCEL, reason=reason))
        await self._closed(session_id)


def _tool_result_request(tool_call_id: str, result: "JsonValue | _Unset", error: str | None) -> SubmitToolResultRequest:
    """The request of `AgentSessionClient.submit_tool_result`, with ``result`` as JSON text.

    Raises:
        InvalidInputError: ``result`` has no JSON form.
    """
    if result is _UNSET:
        return SubmitToolResultRequest(tool_call_id=tool_call_id, error=error)
    try:
        text = json.dumps(result, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as cause:
        raise InvalidInputError(
            f"refused: the tool result has no JSON form ({cause})", problem=InputProblem.NOT_JSON, field="result"
        ) from cause
    return SubmitToolResultRequest(tool_call_id=tool_call_id, result=text, error=error)


def _raise_if(refused: InvalidInputError | None) -> None:
    if refused is not None:
        raise refused


def _seconds(timeout: float | timedelta) -> float:
    """A wait's timeout in seconds: a non-negative number or duration (``math.inf``: no limit).

    Raises:
        TypeError: it is neither a number nor a `timedelta`.
        ValueError: it is negative or not a number.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float | timedelta):
        raise TypeError(f"timeout must be seconds (a number) or a timedelta, got {timeout!r}")
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"timeout must be zero or more seconds, got {timeout!r}")
    return seconds


def _long_poll_seconds(long_poll: timedelta) -> int:
    """A long poll in the whole seconds Dex waits in (rounded up).

    Raises:
        TypeError: it is not a `timedelta`.
        ValueError: it is not positive, or longer than Dex waits.
    """
    if not isinstance(long_poll, timedelta):
        raise TypeError(f"long_poll must be a timedelta, got {long_poll!r}")
    seconds = long_poll.total_seconds()
    if not 0 < seconds <= _MAX_LONG_POLL_SECONDS:
        raise ValueError(f"long_poll must be more than 0 and at most {_MAX_LONG_POLL_SECONDS} s, got {long_poll!r}")
    return math.ceil(seconds)
