"""The console's ASGI app: pages, the live event stream (SSE) and the forms, on one `AgentSessionClient`.

Routes (every one behind `SecurityMiddleware`, then `StrictInputMiddleware`):

============================================  ===================================================================
``GET /``                                     the sessions of the Flow type (`SessionIndex`; ``?fragment=1``: JSON)
``POST /sessions``                            start a session (ID optional, first message optional)
``POST /sessions/open``                       list a session started elsewhere (it must exist, of this Flow type)
``GET /sessions/{id}``                        one session: state, a transcript page (``?after=N``), live events
``GET /sessions/{id}/fragments``              the state panel and the latest transcript page, as JSON of HTML
``GET /sessions/{id}/events``                 Server-Sent Events: one ``agent`` event per session event
``POST /sessions/{id}/messages``              send a user message (``delivery``: ``queue``, the default, or ``steer``)
``POST /sessions/{id}/withdraw``              withdraw a waiting user message (``message_id``)
``POST /sessions/{id}/cancel``                cancel the running turn (``reason`` optional)
``POST /sessions/{id}/approvals``             approve or reject (with a reason) one pending call
``POST /sessions/{id}/results``               the result (JSON) or error of a call waiting for it from outside
``GET /approvals``                            every pending approval of every listed session (``?fragment=1``: JSON)
``GET /static/{name}``                        the page script and stylesheet
============================================  ===================================================================

The console serves only its Flow type: every ``/sessions/{id}`` route, and
the lists, pass `ConsoleContext.own_session`, so a session of another Flow
type on the same Dex is "no such session" (404). The pages are in
`dex_agents.console.pages`, the forms in `dex_agents.console.forms`, the
event stream in `dex_agents.console.stream`. No request gets a 500 for what
it sent: odd paths and parameters are refused (400) before any route
(`dex_agents.console.inputs`), and the client's errors become 400, 404 or 503
(`dex_agents.console.context.guarded`). What still fails unexpectedly answers
500 with the same security headers as every other response.
"""

import logging

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from dex_agents.console.context import ConsoleBackend, ConsoleContext, Handler, guarded
from dex_agents.console.forms import APPROVER, Forms
from dex_agents.console.inputs import StrictInputMiddleware
from dex_agents.console.pages import NOTICES, PAGE_SIZE, Pages
from dex_agents.console.security import SECURITY_HEADERS, ConsoleSecurity, SecurityMiddleware
from dex_agents.console.stream import EventStream, decode_event_id, encode_event_id

__all__ = [
    "APPROVER",
    "NOTICES",
    "PAGE_SIZE",
    "ConsoleBackend",
    "build_console_app",
    "decode_event_id",
    "encode_event_id",
]

_log = logging.getLogger(__name__)


def build_console_app(backend: ConsoleBackend, security: ConsoleSecurity) -> Starlette:
    """Return the console's ASGI app."""
    context = ConsoleContext(backend, security)
    pages, forms, stream = Pages(context), Forms(context), EventStream(context)

    def page(handler: Handler, path: str) -> Route:
        return Route(path, guarded(context, handler))

    def form(handler: Handler, path: str, title: str) -> Route:
        return Route(path, guarded(context, handler, title=title), methods=["POST"])

    routes = [
        page(pages.sessions_list, "/"),
        Route("/static/{name}", guarded(context, pages.static, kind="text")),
        page(pages.approvals, "/approvals"),
        form(forms.start_session, "/sessions", "Not started"),
        form(forms.open_session, "/sessions/open", "Not listed"),
        page(pages.session, "/sessions/{session_id}"),
        Route("/sessions/{session_id}/fragments", guarded(context, pages.fragments, kind="json")),
        Route("/sessions/{session_id}/events", guarded(context, stream.events, kind="text")),
        form(forms.send_message, "/sessions/{session_id}/messages", "Not sent"),
        form(forms.answer_approval, "/sessions/{session_id}/approvals", "Not answered"),
        form(forms.submit_result, "/sessions/{session_id}/results", "Not submitted"),
        form(forms.withdraw_message, "/sessions/{session_id}/withdraw", "Not withdrawn"),
        form(forms.cancel_turn, "/sessions/{session_id}/cancel", "Not cancelled"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(SecurityMiddleware, security=security), Middleware(StrictInputMiddleware)],
        exception_handlers={Exception: _server_error},
    )
    # A trailing slash is a 404, not a redirect to a URL built from the request's Host header.
    app.router.redirect_slashes = False
    return app


async def _server_error(request: Request, error: Exception) -> Response:
    """The 500 of an unexpected failure: one line, and the security headers of every other response."""
    _log.error("the console failed to answer %s %s", request.method, request.url.path, exc_info=error)
    headers = {name.decode(): value.decode() for name, value in SECURITY_HEADERS}
    return PlainTextResponse("The console failed to answer this request.", status_code=500, headers=headers)
