"""``GET /sessions/{id}/events``: a session's live events as Server-Sent Events.

The event stream's SSE ``id`` is the event's resume token. A browser that
reconnects sends it back as ``Last-Event-ID``, and the stream goes on right
after that event: nothing is repeated and nothing is skipped (as long as Dex
retains it). The first connection starts where the page left off
(``?from=``): at the newest event when the session was idle, else just
before the running turn's ``turn_started``
(`AgentSessionClient.resume_token_before_turn`), so the running turn's text
streams in whole; events of the turns the page already shows committed are
skipped (``?shown_turns=``).

Everything is checked before the stream starts (the session is one of the
console's, ``shown_turns`` is a whole number): a request that fails gets its
status (400, 404), which an ``EventSource`` does not retry. Once streaming, a
failure ends the stream with a ``problem`` event, on which the page's script
closes it (no reconnect loop): a session that is gone, a resume token Dex
calls malformed, or anything unexpected. Only Dex being unreachable asks the
browser to come back, after `RETRY_AFTER_ERROR_MS`.
"""

import base64
import json
import logging
from collections.abc import AsyncIterator
from datetime import timedelta

import dex
import grpc  # type: ignore[import-untyped]
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from dex_agents.console.context import ConsoleContext
from dex_agents.console.inputs import query, whole_number
from dex_agents.console.live import live_update, skip_event

EVENT_POLL = timedelta(seconds=10)
"""How long one read of the event stream waits; an SSE comment keeps the connection alive after it."""

RETRY_MS = 1000
"""How soon a browser reconnects a dropped event stream."""

RETRY_AFTER_ERROR_MS = 5000
"""How soon a browser reconnects after Dex failed a read of the event stream."""

_CLIENT_ERRORS = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION})
"""Dex's answers to a read that will never succeed as asked (a malformed resume token, say)."""

_log = logging.getLogger(__name__)


def encode_event_id(resume_token: str) -> str:
    """The SSE ``id`` of the event a resume token follows (base64url: an SSE id may hold no line break)."""
    return base64.urlsafe_b64encode(resume_token.encode()).decode("ascii")


def decode_event_id(event_id: str) -> str:
    """The resume token of an SSE ``id`` (`encode_event_id`); a malformed one reads from the oldest event."""
    try:
        return base64.urlsafe_b64decode(event_id.encode("ascii")).decode()
    except (ValueError, UnicodeError):
        return ""


def _problem(message: str) -> str:
    detail = json.dumps({"error": " ".join(message.split())[:300]})
    return f"event: problem\ndata: {detail}\n\n"


class EventStream:
    """The events handler."""

    def __init__(self, context: ConsoleContext) -> None:
        self.context = context
        self.sessions = context.sessions

    async def events(self, request: Request) -> Response:
        """The session's event stream, checked before it starts."""
        session_id = await self.context.own_session(request.path_params["session_id"])
        params = query(request)
        shown_turns = whole_number(params.get("shown_turns"), name="shown_turns") or 0
        last_event_id = request.headers.get("last-event-id")
        resume_token = decode_event_id(last_event_id) if last_event_id else params.get("from", "")
        return StreamingResponse(
            self._stream(session_id, resume_token, shown_turns),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},
        )

    async def _stream(self, session_id: str, resume_token: str, shown_turns: int) -> AsyncIterator[str]:
        yield f"retry: {RETRY_MS}\n\n"
        while True:
            try:
                message = await self.sessions.read_agent_event(session_id, resume_token, long_poll=EVENT_POLL)
            except dex.LongPollTimeoutError:
                yield ": waiting\n\n"
                continue
            except dex.FlowNotActiveOrNotFoundError as error:
                yield _problem(str(error))
                return
            except dex.DexServiceError as error:
                if error.code in _CLIENT_ERRORS:
                    yield _problem(f"Dex refused to read the events: {error.detail}")
                    return
                # Dex is unreachable for now: the browser reconnects from its last event, a little later.
                yield f"retry: {RETRY_AFTER_ERROR_MS}\n\n"
                return
            except Exception as error:  # noqa: BLE001 - a stream that dies here would be reconnected every second
                _log.exception("the event stream of session %r failed", session_id)
                yield _problem(f"the console failed to read the events ({type(error).__name__})")
                return
            resume_token = message.resume_token
            if skip_event(message.event, shown_turns=shown_turns):
                continue
            data = json.dumps(live_update(message.event), ensure_ascii=True)
            yield f"id: {encode_event_id(resume_token)}\nevent: agent\ndata: {data}\n\n"
