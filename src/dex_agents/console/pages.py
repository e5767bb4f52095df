"""The console's pages: Sessions, Approvals, one session, its fragments, and the static files.

The Sessions page shows the newest `LISTED` sessions of the index (and says
how many more there are); the Approvals page looks at *every* listed session,
so no pending approval drops off it because its session is old. Both show
only sessions of the console's Flow type (`ConsoleContext.own_session`): a
listed ID whose Flow is of another type is shown as unavailable, and its
approvals are not shown.
"""

import asyncio
from importlib import resources

import dex
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from dex_agents.console import html as views
from dex_agents.console.context import ConsoleContext, RefusalError, no_such_session
from dex_agents.console.inputs import query, whole_number
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.infrastructure.dex.client import SessionUnavailableError

PAGE_SIZE = 50
"""Messages on one transcript page."""

LISTED = 200
"""Sessions on the Sessions page (the newest of the index)."""

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
    "result-sent": "Result submitted.",
    "result-not-waiting": "That call no longer waits for a result (answered, expired or cancelled), or never did.",
}
"""The fixed notices a redirect may show (by ``?notice=``; nothing else from the URL is shown)."""

STATIC = {
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
"""The files under ``static/`` the console serves, and their media types."""

_UNAVAILABLE = "no such session (never started, or gone)"


def _unread(session_id: str, status: str, error: str) -> views.SessionRow:
    """The row of a listed session whose state could not be read."""
    return views.SessionRow(
        session_id=session_id, status=status, turn_count=None, pending_approvals=None, last_activity=None, error=error
    )


def _notice(request: Request) -> str | None:
    return NOTICES.get(query(request).get("notice", ""))


class Pages:
    """The GET handlers."""

    def __init__(self, context: ConsoleContext) -> None:
        self.context = context
        self.sessions = context.sessions
        self._static = {name: resources.files(__package__).joinpath("static", name).read_bytes() for name in STATIC}

    async def static(self, request: Request) -> Response:
        """One of the console's static files."""
        name = request.path_params["name"]
        if name not in STATIC:
            raise RefusalError(404, "Not found", "There is no such file.")
        return Response(self._static[name], media_type=STATIC[name])

    async def sessions_list(self, request: Request) -> Response:
        """The Sessions page (or, with ``?fragment=1``, its table as JSON)."""
        context = self.context
        listed = await context.index.asessions(context.flow_type, limit=LISTED)
        total = await context.index.acount(context.flow_type) if len(listed) >= LISTED else len(listed)
        rows = await asyncio.gather(*(self._row(entry.session_id) for entry in listed))
        if query(request).get("fragment"):
            return JSONResponse({"html": views.sessions_table(rows, total=total)})
        return HTMLResponse(
            views.sessions_page(
                rows,
                total=total,
                csrf=context.security.csrf_token,
                flow_type=context.flow_type,
                suggested_message=context.backend.suggested_message,
                notice=_notice(request),
            )
        )

    async def _row(self, session_id: str) -> views.SessionRow:
        context = self.context
        try:
            await context.own_session(session_id, cached=True)
            snapshot = await context.snapshot(session_id)
            async with context.lookups:
                last = await self.sessions.latest_event_time(session_id)
        except (RefusalError, SessionUnavailableError):
            return _unread(session_id, "unavailable", _UNAVAILABLE)
        except dex.DexServiceError as error:
            return _unread(session_id, "unknown", " ".join(str(error).split())[:300])
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
        """The Approvals page (or, with ``?fragment=1``, its list as JSON)."""
        context = self.context
        listed = await context.index.asessions(context.flow_type, limit=None)

        async def pending_of(session_id: str) -> list[tuple[str, AgentInterrupt]]:
            try:
                await context.own_session(session_id, cached=True)
                snapshot = await context.snapshot(session_id)
            except (RefusalError, dex.DexServiceError):
                return []
            return [(session_id, interrupt) for interrupt in snapshot.pending_interrupts]

        found = await asyncio.gather(*(pending_of(entry.session_id) for entry in listed))
        pending = sorted((item for items in found for item in items), key=lambda item: item[1].raised_at)
        csrf = context.security.csrf_token
        if query(request).get("fragment"):
            return JSONResponse({"html": views.approval_list(pending, csrf=csrf)})
        return HTMLResponse(
            views.approvals_page(pending, csrf=csrf, flow_type=context.flow_type, notice=_notice(request))
        )

    async def session(self, request: Request) -> Response:
        """One session's page."""
        context = self.context
        session_id = await context.own_session(request.path_params["session_id"])
        asked = whole_number(query(request).get("after"), name="after")
        try:
            # The position first: whatever the snapshot below misses was written after it.
            latest_token = await self.sessions.latest_resume_token(session_id)
            snapshot = await context.snapshot(session_id)
            count = 0 if snapshot.state is None else snapshot.state.message_count
            after = max(0, count - PAGE_SIZE) if asked is None else asked
            page = await self.sessions.list_agent_messages(session_id, after_sequence=after, limit=PAGE_SIZE)
        except SessionUnavailableError:
            raise no_such_session(session_id) from None
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
        return HTMLResponse(
            views.session_page(
                session_id,
                snapshot,
                messages=messages,
                # The default view is the newest page even when its read ended early (a turn committed between
                # the message index and the page): the page's refresh then reads the newest page again.
                latest=asked is None or page.next_after_sequence is None,
                live=live,
                csrf=context.security.csrf_token,
                flow_type=context.flow_type,
                notice=_notice(request),
            )
        )

    async def fragments(self, request: Request) -> Response:
        """The session's state panel and newest transcript page, as JSON of HTML."""
        context = self.context
        session_id = await context.own_session(request.path_params["session_id"])
        try:
            snapshot = await context.snapshot(session_id)
            count = 0 if snapshot.state is None else snapshot.state.message_count
            after = max(0, count - PAGE_SIZE)
            page = await self.sessions.list_agent_messages(session_id, after_sequence=after, limit=PAGE_SIZE)
        except SessionUnavailableError:
            raise no_such_session(session_id) from None
        return JSONResponse(
            {
                "panel": views.panel(session_id, snapshot, csrf=context.security.csrf_token),
                "transcript": views.transcript(
                    session_id, page.messages, after=after, next_after=page.next_after_sequence, page_size=PAGE_SIZE
                ),
            }
        )
