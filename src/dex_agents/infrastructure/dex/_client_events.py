"""The client's reads of a session's live event Stream: the next event, positions to read from, the last activity."""

import math
from datetime import datetime, timedelta

import attrs
import dex

from dex_agents.domain.events import AgentEvent, AgentEventType
from dex_agents.infrastructure.dex._client_rpc import SessionRpc
from dex_agents.infrastructure.dex.session_errors import NoWorkerError as NoWorkerError
from dex_agents.infrastructure.dex.session_errors import SessionAlreadyExistsError as SessionAlreadyExistsError
from dex_agents.infrastructure.dex.session_errors import SessionUnavailableError as SessionUnavailableError

_MAX_LONG_POLL_SECONDS = 60


@attrs.frozen(kw_only=True)
class AgentEventMessage:
    """One live event and the position to resume reading after it."""

    event: AgentEvent
    """The event."""
    resume_token: str
    """Pass to `AgentSessionClient.read_agent_event` to read the next one."""


class SessionEvents(SessionRpc):
    """Reads of a session's event Stream, and what Dex says of its run."""

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
