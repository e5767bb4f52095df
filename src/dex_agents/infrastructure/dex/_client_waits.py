"""The client's waits: for the turn a message started (`MessageReceipt`) or a turn ID, and for an idle session.

Both waits read the committed snapshot. Between reads, a wait for a known turn
(``turn-<n>``) blocks on one ``wait_for_attribute_match`` until ``TURNS_ENDED``
is at least ``n``: that Attribute commits with the turn's end, so the snapshot
read that follows sees it, and the wait reads none of the turn's live events.
Otherwise (the turn a receipt's message starts is not known yet, the session is
idle-waited, the session is stopped, or the server does not serve
``WaitForAttribute``) the wait blocks on the event stream
(``read_agent_event`` with a long poll) for ``turn_started`` and
``turn_committed``; the latter is written after the turn's state committed, so
the read that follows it sees the end. Events are best effort and an Attribute
wait may miss a session written by an earlier release, so every wait that
times out (every `RECHECK_INTERVAL`) reads the snapshot anyway.
"""

import asyncio
import math
import time
from datetime import timedelta

import attrs
import dex
import grpc  # type: ignore[import-untyped]

from dex_agents.domain.events import AgentEventType, TurnFailedPayload
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.session import turn_number
from dex_agents.domain.snapshot import MAX_PAGE_LIMIT, AgentSnapshot, TurnResult, turn_result
from dex_agents.infrastructure.dex._client_events import SessionEvents
from dex_agents.infrastructure.dex._client_queries import SessionQueries
from dex_agents.infrastructure.dex.persistence import TURNS_ENDED
from dex_agents.infrastructure.dex.session_errors import NoWorkerError as NoWorkerError
from dex_agents.infrastructure.dex.session_errors import SessionAlreadyExistsError as SessionAlreadyExistsError
from dex_agents.infrastructure.dex.session_errors import SessionUnavailableError as SessionUnavailableError

RECHECK_INTERVAL = timedelta(seconds=2)
"""Longest a wait blocks on the event stream before it reads the snapshot again (events are best effort)."""
_WAKE_UP = frozenset({AgentEventType.TURN_STARTED, AgentEventType.TURN_COMMITTED})
_NOT_SERVED = frozenset({grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INVALID_ARGUMENT})
"""How a server that does not serve SDK 1.23's ``WaitForAttribute`` (or its match form) refuses it."""


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


class SessionWaits(SessionQueries, SessionEvents):
    """Waits that read the snapshot, and block on ``TURNS_ENDED`` or the event Stream between reads."""

    _attribute_waits: bool = True
    """Whether the server serves ``WaitForAttribute`` (cleared at its first refusal)."""

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
        deadline = time.monotonic() + timeout_seconds(timeout)
        errors: dict[str, str] = {}
        first: AgentMessage | None = None
        # A known turn waits for its end first: a turn that ended already costs one Attribute read.
        ended = turn_id is not None and await self._wait_for_turn_end(session_id, turn_id, deadline)
        while True:
            if receipt is not None and first is None:
                first = await self._find_turn(receipt, receipt.message_count)
                turn_id = None if first is None else first.turn_id
            if turn_id is not None:
                result = await self._turn_result(session_id, turn_id, first, errors.get(turn_id))
                if result is not None:
                    return result
                if not ended:  # the Attribute wait answered nothing yet: ask it
                    ended = await self._wait_for_turn_end(session_id, turn_id, deadline)
                    if ended:
                        continue
            ended = False
            resume_token = await self._wait_for_news(session_id, resume_token, deadline, errors, turn_id or "a turn")

    async def wait_for_turn_end(self, session_id: str, turn_id: str, *, timeout: float | timedelta) -> None:
        """Wait until the end of ``turn_id`` (``turn-<n>``) is committed, reading nothing else.

        The cheap form of `wait_for_turn` for a caller that reads the outcome later (or not at all):
        one ``WaitForAttribute`` long poll on ``TURNS_ENDED`` where the server serves it, else
        `wait_for_turn` itself.

        Raises:
            ValueError: ``turn_id`` is not a turn ID.
            TimeoutError: the turn did not end in time.
        """
        turn_number(turn_id)  # refuses what is not a turn ID
        deadline = time.monotonic() + timeout_seconds(timeout)
        while self._attribute_waits:
            if await self._wait_for_turn_end(session_id, turn_id, deadline):
                return
            # Cannot tell (a stopped session, a session of an earlier release, a recheck): ask the snapshot.
            if turn_result(await self.get_agent_snapshot(session_id), turn_id) is not None:
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{session_id}: timed out waiting for {turn_id}")
            if (await self.describe_session(session_id)).status is not dex.FlowStatus.RUNNING:
                break  # a stopped session: `wait_for_turn` waits on what it can still read
        await self.wait_for_turn(session_id, turn_id, timeout=max(0.0, deadline - time.monotonic()))

    async def _wait_for_turn_end(self, session_id: str, turn_id: str, deadline: float) -> bool:
        """Block until ``TURNS_ENDED`` says ``turn_id`` ended; ``False`` when this wait cannot tell.

        ``False``: the server does not serve the wait, the session is stopped (its Flow is not active),
        `RECHECK_INTERVAL` passed, or ``deadline`` has passed already (a ``timeout`` of 0 still reads the
        snapshot once); the caller then reads the snapshot and waits on events.

        Raises:
            TimeoutError: ``deadline`` passed during the wait.
        """
        left = deadline - time.monotonic()
        if not self._attribute_waits or left <= 0:
            return False
        # Whole seconds, at least one (the SDK's unit); the wait itself ends at the deadline.
        budget = timedelta(seconds=max(1, math.ceil(min(left, RECHECK_INTERVAL.total_seconds()))))
        wait = self._client.wait_for_attribute_match(
            session_id,
            TURNS_ENDED,
            dex.AttributeMatch.greater_than_or_equal(turn_number(turn_id)),
            dex.WaitForAttributeOptions(request_timeout=budget),
        )
        try:
            await asyncio.wait_for(wait, None if math.isinf(left) else left)
        except (dex.RequestTimeoutError, dex.FlowNotActiveOrNotFoundError):
            return False
        except TimeoutError:
            raise TimeoutError(f"{session_id}: timed out waiting for {turn_id}") from None
        except dex.DexServiceError as error:
            if error.code not in _NOT_SERVED:
                raise
            self._attribute_waits = False
            return False
        return True

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
        deadline = time.monotonic() + timeout_seconds(timeout)
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


def timeout_seconds(timeout: float | timedelta) -> float:
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
