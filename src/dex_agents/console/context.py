"""What every console handler shares: the backend, the security rules, and the gate a session ID passes.

`ConsoleContext.own_session` is the one way a handler gets a session: the ID
must be a valid session ID (`dex_agents.application.inputs.session_id_refusal`)
and Dex must say its Flow is of the console's Flow type
(`AgentSessionClient.describe_session`). A session of another Flow type is
"no such session", exactly like one that does not exist, so a console started
for one agent neither shows nor answers another's sessions. The Sessions and
Approvals pages, which look at every listed session every few seconds, may use
an answer up to `TYPE_CACHE_TTL` old; every other route asks Dex afresh.

`RefusalError` is what a handler raises to answer with an error; `guarded` turns it,
and the errors the client raises, into the page (or JSON, or text) and status
they deserve, so no input reaches a 500.
"""

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Literal

import attrs
import dex
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from dex_agents.application.inputs import session_id_refusal
from dex_agents.console import html as views
from dex_agents.console.inputs import BadRequestError
from dex_agents.console.security import ConsoleSecurity
from dex_agents.domain.errors import InvalidInputError
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.infrastructure.dex.client import AgentSessionClient, SessionUnavailableError
from dex_agents.infrastructure.dex.session_index import SessionIndex, SessionIndexError

CONCURRENT_LOOKUPS = 16
"""Snapshots the Sessions and Approvals pages read from Dex at once (one per listed session)."""

TYPE_CACHE_TTL = timedelta(seconds=10)
"""How old an answer to "is this session of the console's Flow type?" the list pages may use."""

_TYPE_CACHE_SIZE = 4096

Kind = Literal["html", "json", "text"]
"""How a handler answers an error: a page, JSON (``{"error": ...}``), or one line of text."""


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
        """The sessions' Flow type: the only one the console serves."""
        return self.sessions.flow.get_flow_type()


class RefusalError(Exception):
    """An answer other than the page asked for: a status, a title and one line for the person."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.title = title
        self.message = message


def no_such_session(session_id: str, title: str = "No such session") -> RefusalError:
    """The 404 of a session that does not exist, has ended, or is of another Flow type."""
    return RefusalError(404, title, f"There is no session {session_id!r}.")


class ConsoleContext:
    """The backend, the security rules, and the session gate, shared by every handler."""

    def __init__(self, backend: ConsoleBackend, security: ConsoleSecurity) -> None:
        self.backend = backend
        self.security = security
        self.sessions = backend.sessions
        self.index = backend.index
        self.flow_type = backend.flow_type
        self.lookups = asyncio.Semaphore(CONCURRENT_LOOKUPS)
        self._types: collections.OrderedDict[str, tuple[str | None, float]] = collections.OrderedDict()

    async def own_session(self, session_id: str, *, title: str = "No such session", cached: bool = False) -> str:
        """Return ``session_id`` once it is a valid ID of a session of the console's Flow type.

        Raises:
            RefusalError: 400 for an invalid ID, 404 for no session of this Flow type.
        """
        refused = session_id_refusal(session_id)
        if refused is not None:
            raise RefusalError(400, "Bad session ID", str(refused))
        if await self.flow_type_of(session_id, cached=cached) != self.flow_type:
            raise no_such_session(session_id, title)
        return session_id

    async def flow_type_of(self, session_id: str, *, cached: bool = False) -> str | None:
        """The Flow type of the session's Flow, ``None`` when there is none (Dex's other errors propagate)."""
        now = time.monotonic()
        if (
            cached
            and (hit := self._types.get(session_id)) is not None
            and now - hit[1] < TYPE_CACHE_TTL.total_seconds()
        ):
            return hit[0]
        async with self.lookups:
            try:
                found: str | None = (await self.sessions.describe_session(session_id)).flow_type
            except SessionUnavailableError:
                found = None
        self._types[session_id] = (found, now)
        self._types.move_to_end(session_id)
        while len(self._types) > _TYPE_CACHE_SIZE:
            self._types.popitem(last=False)
        return found

    async def snapshot(self, session_id: str) -> AgentSnapshot:
        """The session's snapshot, at most `CONCURRENT_LOOKUPS` reads at once."""
        async with self.lookups:
            return await self.sessions.get_agent_snapshot(session_id)

    def error(self, title: str, message: str, status: int, kind: Kind = "html") -> Response:
        """The error answer of one handler."""
        match kind:
            case "html":
                return HTMLResponse(views.error_page(title, message, flow_type=self.flow_type), status_code=status)
            case "json":
                return JSONResponse({"error": message}, status_code=status)
            case "text":
                return PlainTextResponse(message, status_code=status)


Handler = Callable[[Request], Awaitable[Response]]


def guarded(context: ConsoleContext, handler: Handler, *, kind: Kind = "html", title: str = "Refused") -> Handler:
    """Wrap ``handler`` so that refusals and the client's errors become answers with the right status.

    ``title`` heads the error page of a form's failure ("Not sent").
    """

    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except RefusalError as refusal:
            return context.error(refusal.title, refusal.message, refusal.status, kind)
        except BadRequestError as error:
            return context.error(title, error.message, error.status, kind)
        except InvalidInputError as error:
            return context.error(title, str(error), 400, kind)
        except SessionUnavailableError as error:
            session = error.flow_id or request.path_params.get("session_id", "")
            return context.error(title, f"The session {session!r} does not exist or has ended.", 404, kind)
        except SessionIndexError as error:
            return context.error(title, f"{error} (nothing was changed)", 503, kind)
        except dex.RpcLockConflictError:
            return context.error(title, "The session stayed busy: try again in a moment.", 503, kind)
        except dex.DexServiceError as error:
            return context.error(title, f"Dex failed: {' '.join(error.detail.split())[:300]}", 502, kind)

    return answer
