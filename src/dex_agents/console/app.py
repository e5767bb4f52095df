"""The console's ASGI app: pages, the live event stream (SSE) and the forms, on one `AgentSessionClient`.

Routes (every one behind `SecurityMiddleware`):

============================================  ===================================================================
``GET /``                                     the sessions of the Flow type (`SessionIndex`; ``?fragment=1``: JSON)
``POST /sessions``                            start a session (ID optional, first message optional)
``POST /sessions/open``                       list a session started elsewhere (it must exist)
``GET /sessions/{id}``                        one session: state, a transcript page (``?after=N``), live events
``GET /sessions/{id}/fragments``              the state panel and the latest transcript page, as JSON of HTML
``GET /sessions/{id}/events``                 Server-Sent Events: one ``agent`` event per session event
``POST /sessions/{id}/messages``              send a user message (``delivery``: ``queue``, the default, or ``steer``)
``POST /sessions/{id}/withdraw``              withdraw a waiting user message (``message_id``)
``POST /sessions/{id}/cancel``                cancel the running turn (``reason`` optional)
``POST /sessions/{id}/approvals``             approve or reject (with a reason) one pending call
``GET /approvals``                            every pending approval of every listed session (``?fragment=1``: JSON)
============================================  ===================================================================

The event stream's SSE ``id`` is the event's resume token. A browser that
reconnects sends it back as ``Last-Event-ID``, and the stream goes on right
after that event: nothing is repeated and nothing is skipped (as long as Dex
retains it). The first connection starts where the page left off
(``?from=``): at the newest event when the session was idle, else just
before the running turn's ``turn_started``
(`AgentSessionClient.resume_token_before_turn`), so the running turn's text
streams in whole; events of the turns the page already shows committed are
skipped (``?shown_turns=``).

Forms answer with a redirect (303) to a page, with a fixed notice; a form
that fails its CSRF check gets 403. A cancel when no turn runs, and a
withdraw of a message a turn took already, say so in their notice.
Approvals name the console as approver (``web console``) and bind the
approval to the call digest the page showed, so a call that changed
meanwhile is failed, not run.
"""

import asyncio
import base64
import json
import secrets
from collections.abc import AsyncIterator
from datetime import timedelta
from urllib.parse import parse_qsl, quote

import attrs
import dex
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from dex_agents.application.inputs import id_refusal
from dex_agents.console import html as views
from dex_agents.console.live import live_update, skip_event
from dex_agents.console.security import ConsoleSecurity, SecurityMiddleware
from dex_agents.domain.errors import InvalidInputError
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import MessageDelivery
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.infrastructure.dex.client import AgentSessionClient, SessionUnavailableError
from dex_agents.infrastructure.dex.session_index import SessionIndex

APPROVER = "web console"
"""Who the console says answered an approval."""

PAGE_SIZE = 50
"""Messages on one transcript page."""

EVENT_POLL = timedelta(seconds=10)
"""How long one read of the event stream waits; an SSE comment keeps the connection alive after it."""

RETRY_MS = 1000
"""How soon a browser reconnects a dropped event stream."""

RETRY_AFTER_ERROR_MS = 5000
"""How soon a browser reconnects after Dex failed a read of the event stream."""

CONCURRENT_LOOKUPS = 16
"""Snapshots the Sessions and Approvals pages read from Dex at once (one per listed session)."""

MAX_FORM_BYTES = 1024 * 1024
"""The largest form the console reads."""

NOTICES = {
    "started": "The session started.",
    "sent": "Message sent.",
    "steered": "Message sent to steer the running turn (or to start one, if none runs).",
    "withdrawn": "Message withdrawn.",
    "not-waiting": "That message no longer waits: a turn took it already, or it was withdrawn.",
    "cancel-requested": "Cancel requested: the turn stops at its next safe boundary.",
    "no-turn": "No turn is running: there was nothing to cancel.",
    "blank": "The message was blank: nothing was sent.",
    "approved": "Approved.",
    "rejected": "Rejected.",
    "not-pending": "That approval is no longer pending (answered, expired or withdrawn).",
    "opened": "The session is listed.",
}
"""The fixed notices a redirect may show (by ``?notice=``; nothing else from the URL is shown)."""


@attrs.frozen(kw_only=True)
class ConsoleBackend:
    """What the console talks to: one Flow type's sessions, and the index that lists them."""

    sessions: AgentSessionClient
    """The only way the console reaches Dex."""
    index: SessionIndex
    """Where the sessions of the Flow type are listed."""
    suggested_message: str = ""
    """Pre-filled first message of the start form (the demo's prompt)."""

    @property
    def flow_type(self) -> str:
        """The sessions' Flow type."""
        return self.sessions.flow.get_flow_type()


class FormError(Exception):
    """A form the console refuses (bad CSRF token, too large, malformed)."""


def build_console_app(backend: ConsoleBackend, security: ConsoleSecurity) -> Starlette:
    """Return the console's ASGI app."""
    handlers = _Handlers(backend, security)
    routes = [
        Route("/", handlers.sessions_list),
        Route("/static/console.js", handlers.script),
        Route("/approvals", handlers.approvals),
        Route("/sessions", handlers.start_session, methods=["POST"]),
        Route("/sessions/open", handlers.open_session, methods=["POST"]),
        Route("/sessions/{session_id}", handlers.session),
        Route("/sessions/{session_id}/fragments", handlers.fragments),
        Route("/sessions/{session_id}/events", handlers.events),
        Route("/sessions/{session_id}/messages", handlers.send_message, methods=["POST"]),
        Route("/sessions/{session_id}/approvals", handlers.answer_approval, methods=["POST"]),
        Route("/sessions/{session_id}/withdraw", handlers.withdraw_message, methods=["POST"]),
        Route("/sessions/{session_id}/cancel", handlers.cancel_turn, methods=["POST"]),
    ]
    return Starlette(routes=routes, middleware=[Middleware(SecurityMiddleware, security=security)])


def _notice(request: Request) -> str | None:
    return NOTICES.get(request.query_params.get("notice", ""))


def _safe_return(path: str | None, default: str) -> str:
    """A redirect target inside the console only (no scheme, no other host)."""
    if path and path.startswith("/") and not path.startswith("//") and "\\" not in path:
        return path
    return default


def _session_path(session_id: str) -> str:
    return "/sessions/" + quote(session_id, safe="")


class _Handlers:
    def __init__(self, backend: ConsoleBackend, security: ConsoleSecurity) -> None:
        self.backend = backend
        self.security = security
        self.sessions = backend.sessions
        self._lookups = asyncio.Semaphore(CONCURRENT_LOOKUPS)

    # -- helpers ----------------------------------------------------------------------------------------------------

    def _html(self, content: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(content, status_code=status)

    def _error(self, title: str, message: str, status: int) -> HTMLResponse:
        return self._html(views.error_page(title, message, flow_type=self.backend.flow_type), status)

    async def _form(self, request: Request) -> dict[str, str]:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise FormError("the form is too large")
        try:
            fields = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
        except UnicodeDecodeError as error:
            raise FormError("the form is not UTF-8") from error
        if not self.security.check_csrf(fields.get("csrf")):
            raise FormError("the form's CSRF token is missing or stale: reload the page and try again")
        return fields

    async def _snapshot(self, session_id: str) -> AgentSnapshot:
        async with self._lookups:
            return await self.sessions.get_agent_snapshot(session_id)

    # -- pages --------------------------------------------------------------------------------------------------------

    async def script(self, request: Request) -> Response:
        return Response(views.CONSOLE_JS, media_type="text/javascript")

    async def sessions_list(self, request: Request) -> Response:
        listed = self.backend.index.sessions(self.backend.flow_type)
        rows = await asyncio.gather(*(self._row(entry.session_id) for entry in listed))
        if request.query_params.get("fragment"):
            return JSONResponse({"html": views.sessions_table(rows)})
        return self._html(
            views.sessions_page(
                rows,
                csrf=self.security.csrf_token,
                flow_type=self.backend.flow_type,
                suggested_message=self.backend.suggested_message,
                notice=_notice(request),
            )
        )

    async def _row(self, session_id: str) -> views.SessionRow:
        try:
            snapshot = await self._snapshot(session_id)
            async with self._lookups:
                last = await self.sessions.latest_event_time(session_id)
        except SessionUnavailableError:
            return views.SessionRow(
                session_id=session_id,
                status="unavailable",
                turn_count=None,
                pending_approvals=None,
                last_activity=None,
                error="no such session (never started, or gone)",
            )
        except dex.DexServiceError as error:
            return views.SessionRow(
                session_id=session_id,
                status="unknown",
                turn_count=None,
                pending_approvals=None,
                last_activity=None,
                error=" ".join(str(error).split())[:300],
            )
        state = snapshot.state
        return views.SessionRow(
            session_id=session_id,
            status="starting" if state is None else state.status.value.replace("_", " "),
            turn_count=0 if state is None else state.turn_count,
            pending_approvals=len(snapshot.pending_interrupts),
            last_activity=last,
            error=None if state is None else state.last_turn_error,
        )

    async def approvals(self, request: Request) -> Response:
        listed = self.backend.index.sessions(self.backend.flow_type)

        async def pending_of(session_id: str) -> list[tuple[str, AgentInterrupt]]:
            try:
                snapshot = await self._snapshot(session_id)
            except dex.DexServiceError:
                return []
            return [(session_id, interrupt) for interrupt in snapshot.pending_interrupts]

        found = await asyncio.gather(*(pending_of(entry.session_id) for entry in listed))
        pending = sorted((item for items in found for item in items), key=lambda item: item[1].raised_at)
        if request.query_params.get("fragment"):
            return JSONResponse({"html": views.approval_list(pending, csrf=self.security.csrf_token)})
        return self._html(
            views.approvals_page(
                pending, csrf=self.security.csrf_token, flow_type=self.backend.flow_type, notice=_notice(request)
            )
        )

    async def session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            # The position first: whatever the snapshot below misses was written after it.
            latest_token = await self.sessions.latest_resume_token(session_id)
            snapshot = await self._snapshot(session_id)
            after_param = request.query_params.get("after")
            explicit = after_param is not None and after_param.isdigit()
            count = 0 if snapshot.state is None else snapshot.state.message_count
            after = int(after_param) if explicit and after_param is not None else max(0, count - PAGE_SIZE)
            page = await self.sessions.list_agent_messages(session_id, after_sequence=after, limit=PAGE_SIZE)
        except SessionUnavailableError:
            return self._error("No such session", f"There is no session {session_id!r}.", 404)
        except InvalidInputError as error:
            return self._error("Bad session ID", str(error), 400)
        state = snapshot.state
        if state is None:
            live = views.LiveStart(resume_token="", shown_turns=0)
        elif state.active_turn_id is not None:
            # The running turn from its start (its text so far streams in again); older turns' events are skipped.
            start = await self.sessions.resume_token_before_turn(session_id, state.active_turn_id)
            live = views.LiveStart(resume_token=start, shown_turns=state.turn_count - 1)
        else:
            live = views.LiveStart(resume_token=latest_token, shown_turns=state.turn_count)
        messages = views.transcript(
            session_id, page.messages, after=after, next_after=page.next_after_sequence, page_size=PAGE_SIZE
        )
        return self._html(
            views.session_page(
                session_id,
                snapshot,
                messages=messages,
                # The default view is the newest page even when its read ended early (a turn committed between
                # the message index and the page): the page's refresh then reads the newest page again.
                latest=not explicit or page.next_after_sequence is None,
                live=live,
                csrf=self.security.csrf_token,
                flow_type=self.backend.flow_type,
                notice=_notice(request),
            )
        )

    async def fragments(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            snapshot = await self._snapshot(session_id)
            count = 0 if snapshot.state is None else snapshot.state.message_count
            after = max(0, count - PAGE_SIZE)
            page = await self.sessions.list_agent_messages(session_id, after_sequence=after, limit=PAGE_SIZE)
        except SessionUnavailableError:
            return JSONResponse({"error": "no such session"}, status_code=404)
        except InvalidInputError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return JSONResponse(
            {
                "panel": views.panel(session_id, snapshot, csrf=self.security.csrf_token),
                "transcript": views.transcript(
                    session_id, page.messages, after=after, next_after=page.next_after_sequence, page_size=PAGE_SIZE
                ),
            }
        )

    async def events(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        last_event_id = request.headers.get("last-event-id")
        resume_token = decode_event_id(last_event_id) if last_event_id else request.query_params.get("from", "")
        shown = request.query_params.get("shown_turns", "0")
        shown_turns = int(shown) if shown.isdigit() else 0
        refused = id_refusal(session_id, field="session_id", what="the session ID")
        if refused is not None:
            return PlainTextResponse(str(refused), status_code=400)
        return StreamingResponse(
            self._event_stream(session_id, resume_token, shown_turns),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},
        )

    async def _event_stream(self, session_id: str, resume_token: str, shown_turns: int) -> AsyncIterator[str]:
        yield f"retry: {RETRY_MS}\n\n"
        while True:
            try:
                message = await self.sessions.read_agent_event(session_id, resume_token, long_poll=EVENT_POLL)
            except dex.LongPollTimeoutError:
                yield ": waiting\n\n"
                continue
            except dex.FlowNotActiveOrNotFoundError as error:
                # The page's script closes the stream on ``problem``: no reconnect loop against a missing session.
                detail = json.dumps({"error": " ".join(str(error).split())[:300]})
                yield f"event: problem\ndata: {detail}\n\n"
                return
            except dex.DexServiceError:
                # Dex is unreachable for now: the browser reconnects from its last event, a little later.
                yield f"retry: {RETRY_AFTER_ERROR_MS}\n\n"
                return
            resume_token = message.resume_token
            if skip_event(message.event, shown_turns=shown_turns):
                continue
            data = json.dumps(live_update(message.event), ensure_ascii=True)
            yield f"id: {encode_event_id(resume_token)}\nevent: agent\ndata: {data}\n\n"

    # -- forms --------------------------------------------------------------------------------------------------------

    async def start_session(self, request: Request) -> Response:
        try:
            form = await self._form(request)
        except FormError as error:
            return self._error("Refused", str(error), 403)
        session_id = form.get("session_id", "").strip() or f"session-{secrets.token_hex(4)}"
        message = form.get("message", "")
        try:
            await self.sessions.start_session(session_id, message if message.strip() else None)
        except InvalidInputError as error:
            return self._error("Not started", str(error), 400)
        except dex.FlowAlreadyStartedError:
            return self._error("Not started", f"A session {session_id!r} exists already.", 409)
        return RedirectResponse(_session_path(session_id) + "?notice=started", status_code=303)

    async def open_session(self, request: Request) -> Response:
        try:
            form = await self._form(request)
        except FormError as error:
            return self._error("Refused", str(error), 403)
        session_id = form.get("session_id", "").strip()
        try:
            await self.sessions.get_message_count(session_id)
        except InvalidInputError as error:
            return self._error("Not listed", str(error), 400)
        except SessionUnavailableError:
            return self._error("Not listed", f"There is no session {session_id!r}.", 404)
        self.backend.index.record(self.backend.flow_type, session_id)
        return RedirectResponse(_session_path(session_id) + "?notice=opened", status_code=303)

    async def send_message(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            form = await self._form(request)
        except FormError as error:
            return self._error("Refused", str(error), 403)
        delivery = form.get("delivery") or MessageDelivery.QUEUE.value
        if delivery not in {d.value for d in MessageDelivery}:
            return self._error("Not sent", "the form's delivery must be queue or steer", 400)
        try:
            accepted = await self.sessions.send_user_message(session_id, form.get("text", ""), delivery=delivery)
        except InvalidInputError as error:
            return self._error("Not sent", str(error), 400)
        except SessionUnavailableError:
            return self._error("Not sent", f"The session {session_id!r} does not exist or has ended.", 404)
        notice = ("steered" if delivery == MessageDelivery.STEER.value else "sent") if accepted else "blank"
        return RedirectResponse(_session_path(session_id) + "?notice=" + notice, 303)

    async def withdraw_message(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            form = await self._form(request)
        except FormError as error:
            return self._error("Refused", str(error), 403)
        try:
            withdrawn = await self.sessions.withdraw_user_message(session_id, form.get("message_id", ""))
        except InvalidInputError as error:
            return self._error("Not withdrawn", str(error), 400)
        except SessionUnavailableError:
            return self._error("Not withdrawn", f"The session {session_id!r} does not exist or has ended.", 404)
        return RedirectResponse(
            _session_path(session_id) + ("?notice=withdrawn" if withdrawn else "?notice=not-waiting"), 303
        )

    async def cancel_turn(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            form = await self._form(request)
        except FormError as error:
            return self._error("Refused", str(error), 403)
        reason = form.get("reason", "").strip()
        try:
            cancelled = await self.sessions.cancel_turn(session_id, reason or None)
        except InvalidInputError as error:
            return self._error("Not cancelled", str(error), 400)
        except SessionUnavailableError:
            return self._error("Not cancelled", f"The session {session_id!r} does not exist or has ended.", 404)
        except dex.RpcLockConflictError:
            return self._error("Not cancelled", "The session stayed busy: try again in a moment.", 503)
        return RedirectResponse(
            _session_path(session_id) + ("?notice=cancel-requested" if cancelled else "?notice=no-turn"), 303
        )

    async def answer_approval(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            form = await self._form(request)
        except FormError as error:
            return self._error("Refused", str(error), 403)
        decision = form.get("decision")
        if decision not in ("approve", "reject"):
            return self._error("Not answered", "the form must say approve or reject", 400)
        approved = decision == "approve"
        reason = form.get("reason", "").strip()
        try:
            accepted = await self.sessions.resolve_interrupt(
                session_id,
                form.get("interrupt_id", ""),
                approved=approved,
                rejection_message=None if approved or not reason else reason,
                approver=APPROVER,
                call_digest=form.get("call_digest") or None,
            )
        except InvalidInputError as error:
            return self._error("Not answered", str(error), 400)
        except SessionUnavailableError:
            return self._error("Not answered", f"The session {session_id!r} does not exist or has ended.", 404)
        back = _safe_return(form.get("return_to"), _session_path(session_id))
        notice = ("approved" if approved else "rejected") if accepted else "not-pending"
        separator = "&" if "?" in back else "?"
        return RedirectResponse(f"{back}{separator}notice={notice}", status_code=303)


def encode_event_id(resume_token: str) -> str:
    """The SSE ``id`` of the event a resume token follows (base64url: an SSE id may hold no line break)."""
    return base64.urlsafe_b64encode(resume_token.encode()).decode("ascii")


def decode_event_id(event_id: str) -> str:
    """The resume token of an SSE ``id`` (`encode_event_id`); a malformed one reads from the oldest event."""
    try:
        return base64.urlsafe_b64decode(event_id.encode("ascii")).decode()
    except (ValueError, UnicodeError):
        return ""
