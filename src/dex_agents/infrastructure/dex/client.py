"""`AgentSessionClient`: start, talk to, watch and stop agent sessions from an application.

Everything goes through the Flow's RPCs and its live event Stream; the client
never touches state directly. An RPC to a session that does not exist (or
has ended, where the call needs it running) raises `SessionUnavailableError`,
which is also the SDK's `dex.FlowNotActiveOrNotFoundError`; starting an ID that
exists raises `SessionAlreadyExistsError` (`ensure_session` is the idempotent
start); a call no Worker can serve raises `NoWorkerError` (see
`dex_agents.infrastructure.dex.session_errors`), after it waited
`NO_WORKER_WAIT` (30 s) for a Worker that restarts. Every input is checked before anything is sent
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

`AgentSessionClient` keeps the commands that start, talk to and stop a
session; it is put together from private modules, one concept each:
``_client_rpc`` (invoking RPCs: error translation, waiting out a closing
session, lock-conflict retries), ``_client_queries`` (the snapshot and the
message index it keeps per session, counts, pages), ``_client_events`` (event
Stream reads and positions), ``_client_waits`` (`MessageReceipt` and the two
waits) and ``_client_answers`` (approvals and external tool results). Import
everything from this module.
"""

import collections
import contextlib
import uuid
from datetime import timedelta

import attrs
import dex

from dex_agents.application.inputs import id_refusal, session_id_refusal, text_refusal
from dex_agents.domain.limits import InputProblem
from dex_agents.domain.messages import AgentUserMessage, MessageDelivery
from dex_agents.domain.snapshot import MessageIndex
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.turn_control import CancelTurnRequest
from dex_agents.infrastructure.dex._client_answers import SessionAnswers
from dex_agents.infrastructure.dex._client_events import AgentEventMessage as AgentEventMessage
from dex_agents.infrastructure.dex._client_rpc import LOCK_CONFLICT_RETRY as LOCK_CONFLICT_RETRY
from dex_agents.infrastructure.dex._client_rpc import NO_WORKER_WAIT as NO_WORKER_WAIT
from dex_agents.infrastructure.dex._client_rpc import raise_if
from dex_agents.infrastructure.dex._client_waits import RECHECK_INTERVAL as RECHECK_INTERVAL
from dex_agents.infrastructure.dex._client_waits import MessageReceipt as MessageReceipt
from dex_agents.infrastructure.dex._client_waits import SessionWaits
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.infrastructure.dex.session_errors import NoWorkerError as NoWorkerError
from dex_agents.infrastructure.dex.session_errors import SessionAlreadyExistsError as SessionAlreadyExistsError
from dex_agents.infrastructure.dex.session_errors import SessionUnavailableError as SessionUnavailableError
from dex_agents.infrastructure.dex.session_errors import translated_errors
from dex_agents.infrastructure.dex.session_index import SessionIndex


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


class AgentSessionClient(SessionWaits, SessionAnswers):
    """Drives the sessions of one `AgentSessionFlow` through a Dex `AsyncClient`."""

    def __init__(
        self,
        client: dex.AsyncClient,
        flow: AgentSessionFlow,
        *,
        session_index: SessionIndex | None = None,
        no_worker_wait: timedelta = NO_WORKER_WAIT,
    ) -> None:
        """Create a client.

        With ``session_index``, `start_session` records each session there (for the
        console). ``no_worker_wait`` is how long a call keeps asking while Dex answers
        that no Worker is available (a Worker restarting), before it raises `NoWorkerError`.

        Raises:
            ValueError: ``no_worker_wait`` is negative.
        """
        if no_worker_wait < timedelta(0):
            raise ValueError(f"no_worker_wait must not be negative, got {no_worker_wait}")
        self._client = client
        self._flow = flow
        self._no_worker_wait = no_worker_wait
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
        raise_if(session_id_refusal(session_id, starting=True))
        if initial_message is not None:
            raise_if(
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
        raise_if(id_refusal(message_id, field="message_id", what="the message ID"))
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
            raise_if(
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
            raise_if(id_refusal(client_message_id, field="client_message_id", what="the client message ID"))
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

    def _check_user_message(self, session_id: str, text: str) -> bool:
        """Return whether ``text`` may be sent (``False`` for blank); raise `InvalidInputError` for a refused one."""
        self._check_session_id(session_id)
        refused = text_refusal(text, options=self._flow.options, field="text", what="the user message")
        if refused is not None and refused.problem is InputProblem.BLANK:
            return False
        raise_if(refused)
        return True

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
