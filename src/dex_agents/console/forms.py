"""The console's forms: start or list a session, send, withdraw, cancel, approve or reject, submit a result.

Every form must carry the console's CSRF token (else 403) and is parsed
strictly (`dex_agents.console.inputs.read_form`): its fields reach the client
exactly as sent, so the client's checks refuse what they refuse (a lone
surrogate, a NUL, an invalid ID) instead of the console storing something
else. A form answers with a redirect (303) to a page, with a fixed notice. A
cancel when no turn runs, and a withdraw of a message a turn took already, say
so in their notice. Redirects go only to the console's own pages: the
session's (its ID quoted as one path segment) or the Approvals page; a
``return_to`` naming anything else is ignored.

A result form (a call waiting for its result from outside) sends its JSON
field as the result, or its error field as the error; JSON that does not
parse is refused (400) before anything is sent, and a call that no longer
waits for a result says so in the notice.

Approvals name the console as approver (`APPROVER`) and bind the approval to
the call digest the page showed, so a call that changed meanwhile is failed,
not run.
"""

import json
import secrets

import dex
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from dex_agents.console.context import ConsoleContext, RefusalError
from dex_agents.console.html import session_path
from dex_agents.console.inputs import read_form
from dex_agents.domain.errors import ToolResultRefusedError
from dex_agents.domain.messages import MessageDelivery

APPROVER = "web console"
"""Who the console says answered an approval."""

APPROVALS_PAGE = "/approvals"
"""Where an answer given on the Approvals page returns."""


def _redirect(path: str, notice: str) -> RedirectResponse:
    return RedirectResponse(f"{path}?notice={notice}", status_code=303)


class Forms:
    """The POST handlers."""

    def __init__(self, context: ConsoleContext) -> None:
        self.context = context
        self.sessions = context.sessions

    async def _form(self, request: Request) -> dict[str, str]:
        fields = await read_form(request)
        if not self.context.security.check_csrf(fields.get("csrf")):
            raise RefusalError(
                403, "Refused", "the form's CSRF token is missing or stale: reload the page and try again"
            )
        return fields

    async def _own(self, request: Request, title: str) -> str:
        return await self.context.own_session(request.path_params["session_id"], title=title)

    async def start_session(self, request: Request) -> Response:
        """Start a session (a new ID when the form gives none), listed in the index first."""
        form = await self._form(request)
        session_id = form.get("session_id", "") or f"session-{secrets.token_hex(4)}"
        message = form.get("message", "")
        try:
            await self.sessions.start_session(session_id, message if message.strip() else None)
        except dex.FlowAlreadyStartedError:
            if await self.context.flow_type_of(session_id) != self.context.flow_type:
                # The client listed it before starting it: a Flow of another type is not one of ours to list.
                await self.context.index.aforget(self.context.flow_type, session_id)
            raise RefusalError(
                409, "Not started", f"A session (or another Flow) with the ID {session_id!r} exists."
            ) from None
        return _redirect(session_path(session_id), "started")

    async def open_session(self, request: Request) -> Response:
        """List a session started elsewhere: it must exist and be of the console's Flow type."""
        form = await self._form(request)
        session_id = await self.context.own_session(form.get("session_id", ""), title="Not listed")
        await self.context.index.arecord(self.context.flow_type, session_id)
        return _redirect(session_path(session_id), "opened")

    async def send_message(self, request: Request) -> Response:
        """Send a user message, queued (the default) or steering the running turn."""
        form = await self._form(request)
        session_id = await self._own(request, "Not sent")
        delivery = form.get("delivery") or MessageDelivery.QUEUE.value
        if delivery not in {d.value for d in MessageDelivery}:
            raise RefusalError(400, "Not sent", "the form's delivery must be queue or steer")
        accepted = await self.sessions.send_user_message(session_id, form.get("text", ""), delivery=delivery)
        notice = ("steered" if delivery == MessageDelivery.STEER.value else "sent") if accepted else "blank"
        return _redirect(session_path(session_id), notice)

    async def withdraw_message(self, request: Request) -> Response:
        """Withdraw a waiting user message."""
        form = await self._form(request)
        session_id = await self._own(request, "Not withdrawn")
        withdrawn = await self.sessions.withdraw_user_message(session_id, form.get("message_id", ""))
        return _redirect(session_path(session_id), "withdrawn" if withdrawn else "not-waiting")

    async def cancel_turn(self, request: Request) -> Response:
        """Cancel the running turn, with the form's reason."""
        form = await self._form(request)
        session_id = await self._own(request, "Not cancelled")
        reason = form.get("reason", "")
        cancelled = await self.sessions.cancel_turn(session_id, reason if reason.strip() else None)
        return _redirect(session_path(session_id), "cancel-requested" if cancelled else "no-turn")

    async def answer_approval(self, request: Request) -> Response:
        """Approve or reject one pending call, bound to the digest the page showed."""
        form = await self._form(request)
        session_id = await self._own(request, "Not answered")
        decision = form.get("decision")
        if decision not in ("approve", "reject"):
            raise RefusalError(400, "Not answered", "the form must say approve or reject")
        approved = decision == "approve"
        reason = form.get("reason", "")
        accepted = await self.sessions.resolve_interrupt(
            session_id,
            form.get("interrupt_id", ""),
            approved=approved,
            rejection_message=None if approved or not reason.strip() else reason,
            approver=APPROVER,
            call_digest=form.get("call_digest") or None,
        )
        back = APPROVALS_PAGE if form.get("return_to") == APPROVALS_PAGE else session_path(session_id)
        return _redirect(back, ("approved" if approved else "rejected") if accepted else "not-pending")

    async def submit_result(self, request: Request) -> Response:
        """Give a call waiting for its result from outside its result (the JSON field) or an error."""
        form = await self._form(request)
        session_id = await self._own(request, "Not submitted")
        tool_call_id = form.get("tool_call_id", "")
        error, text = form.get("error", ""), form.get("result", "")
        back = APPROVALS_PAGE if form.get("return_to") == APPROVALS_PAGE else session_path(session_id)
        try:
            if error.strip():
                await self.sessions.submit_tool_result(session_id, tool_call_id, error=error)
            else:
                try:
                    value = json.loads(text)
                except ValueError:
                    raise RefusalError(
                        400, "Not submitted", "the result must be JSON (a string needs quotes)"
                    ) from None
                await self.sessions.submit_tool_result(session_id, tool_call_id, result=value)
        except ToolResultRefusedError:
            return _redirect(back, "result-not-waiting")
        return _redirect(back, "result-sent")
