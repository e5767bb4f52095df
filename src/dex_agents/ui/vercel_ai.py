"""A session as a Vercel AI SDK chat backend: `vercel_ai_app`, an ASGI app on one `AgentSessionClient`.

The chat ``id`` is the session ID. Endpoints (``A`` is ``api_path``):

- ``POST A`` (``DefaultChatTransport``'s body, only its last message read):
  a user message starts the session when it does not exist (idempotently: an
  existing or concurrently started session is used) and queues its text,
  then streams the turn that message starts, from its start; an assistant
  message's ``approval-responded`` parts answer the session's pending
  approvals (the approval ID is the interrupt ID; a rejection's ``reason`` is
  what the model reads), then the turn streams on from that answer.
- ``GET A/{id}/stream``: while a turn runs or waits for an approval, a replay
  of that whole turn from its ``start``, then its live parts; ``204`` when no
  turn is active (or no session exists). A page that reloads or loses its
  connection rebuilds the message from it: nothing lost, nothing repeated.
- ``GET A/{id}/messages``: the committed turns as ``UIMessage`` JSON
  (`dex_agents.ui._history`), ``404`` when no session has this ID.

Every stream is built from the session's durable event stream (its resume
tokens) by `dex_agents.ui._parts`, so a dropped connection never stops or
changes the turn, and every stream of a turn carries the same message ID.
A stream ends with ``finish`` once the turn's end is committed, or with
``finish`` ``tool-calls`` while every open call waits for an approval.
Refused requests answer ``4xx`` with ``{"error": "..."}`` and start nothing
(`dex_agents.ui._requests`); Dex being unreachable is ``503``.
"""

from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import dex
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from dex_agents.adapters.pydantic_ai.runner import PydanticAIRunner
from dex_agents.application.inputs import id_refusal, text_refusal
from dex_agents.domain.errors import InvalidInputError
from dex_agents.domain.events import AgentEvent, TurnFailedPayload, TurnStartedPayload
from dex_agents.domain.limits import InputProblem
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.session import turn_number
from dex_agents.domain.snapshot import MAX_PAGE_LIMIT
from dex_agents.infrastructure.dex.client import AgentSessionClient, SessionAlreadyExistsError, SessionUnavailableError
from dex_agents.ui._history import assistant_message_id, ui_messages
from dex_agents.ui._parts import (
    ErrorChunk,
    FinishChunk,
    StartChunk,
    ToolApprovalResponseChunk,
    TurnParts,
    encode,
)
from dex_agents.ui._requests import (
    MAX_BODY_BYTES,
    AnswerApprovals,
    ChatRequestError,
    SendText,
    parse_chat_request,
)

APPROVER = "chat"
"""Who the session records as having answered an approval sent through the chat."""

EVENT_POLL = timedelta(seconds=5)
"""How long one read of the event stream waits before a keep-alive comment (and a look at the snapshot)."""

STREAM_HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "cache-control": "no-cache", "x-accel-buffering": "no"}
"""The UI message stream's headers (besides its ``text/event-stream`` type)."""

DONE = "data: [DONE]\n\n"

TurnPicker = Callable[[AgentEvent], bool]
"""Whether an event opens the turn a stream is to show (its ``turn_started``, or a ``turn_failed`` in its place)."""


def vercel_ai_app(sessions: AgentSessionClient, *, api_path: str = "/api/chat") -> Starlette:
    """Return the ASGI app serving ``sessions`` as an AI SDK chat backend under ``api_path``."""
    path = "/" + api_path.strip("/")
    chat = _Chat(sessions)
    return Starlette(
        routes=[
            Route(path, chat.post, methods=["POST"]),
            Route(path + "/{session_id:path}/stream", chat.stream, methods=["GET"]),
            Route(path + "/{session_id:path}/messages", chat.messages, methods=["GET"]),
        ]
    )


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


class _Chat:
    def __init__(self, sessions: AgentSessionClient) -> None:
        self.sessions = sessions
        self.pydantic_ai = isinstance(sessions.flow.runner, PydanticAIRunner)

    # -- POST -------------------------------------------------------------------------------------------------------

    async def post(self, request: Request) -> Response:
        try:
            body = await _read_body(request)
            chat_request = parse_chat_request(body)
            if isinstance(chat_request, SendText):
                stream = await self._send_text(chat_request)
            else:
                stream = await self._answer(chat_request)
        except ChatRequestError as error:
            return _error(error.status, error.message)
        except InvalidInputError as error:
            return _error(400, str(error))
        except dex.DexServiceError as error:
            return _error(503, f"Dex did not answer: {' '.join(str(error).split())[:300]}")
        return _streaming(stream)

    async def _send_text(self, request: SendText) -> AsyncIterator[str]:
        options = self.sessions.flow.options
        refused = id_refusal(request.session_id, field="id", what="the session ID") or text_refusal(
            request.text, options=options, field="text", what="the user message"
        )
        if refused is not None:
            raise ChatRequestError(413 if refused.problem is InputProblem.TOO_LARGE else 400, str(refused))
        message_id = request.message_id
        if message_id is not None and id_refusal(message_id, field="messageId", what="the message ID") is not None:
            message_id = None
        try:
            await self.sessions.ensure_session(request.session_id)  # an existing or concurrently started one is used
        except SessionAlreadyExistsError as error:  # the ID belongs to a Flow of another type
            raise ChatRequestError(409, str(error)) from None
        try:
            receipt = await self.sessions.submit_user_message(
                request.session_id, request.text, client_message_id=message_id
            )
        except SessionUnavailableError:
            raise ChatRequestError(409, f"session {request.session_id!r} has ended: it takes no messages") from None
        if not receipt.accepted:
            raise ChatRequestError(400, "the session refused the message (blank)")
        wanted = receipt.client_message_id

        def ours(event: AgentEvent) -> bool:
            payload = event.payload
            return isinstance(payload, TurnStartedPayload | TurnFailedPayload) and payload.client_message_id == wanted

        return self._turn_stream(request.session_id, receipt.resume_token, pick=ours)

    async def _answer(self, request: AnswerApprovals) -> AsyncIterator[str]:
        session_id = request.session_id
        if id_refusal(session_id, field="id", what="the session ID") is not None:
            raise ChatRequestError(400, "the session ID must be 1 to 256 characters of text without NUL")
        try:
            snapshot = await self.sessions.get_agent_snapshot(session_id)
        except SessionUnavailableError:
            raise ChatRequestError(404, f"no session has the ID {session_id!r}") from None
        pending = {interrupt.interrupt_id: interrupt for interrupt in snapshot.pending_interrupts}
        for answer in request.answers:
            if answer.approval_id not in pending:
                raise ChatRequestError(
                    409, f"approval {answer.approval_id!r} is not pending (answered, expired or withdrawn)"
                )
        turn_id = pending[request.answers[0].approval_id].turn_id
        start = await self.sessions.resume_token_before_turn(session_id, turn_id)
        answered: set[str] = set()
        for answer in request.answers:
            accepted = await self.sessions.resolve_interrupt(
                session_id,
                answer.approval_id,
                approved=answer.approved,
                rejection_message=None if answer.approved else answer.reason,
                approver=APPROVER,
            )
            if accepted:
                answered.add(answer.approval_id)
        if not answered:
            raise ChatRequestError(409, "the approvals were answered elsewhere first: none is pending now")
        return self._turn_stream(session_id, start, turn_id=turn_id, answered=frozenset(answered))

    # -- GET --------------------------------------------------------------------------------------------------------

    async def stream(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        if id_refusal(session_id, field="id", what="the session ID") is not None:
            return Response(status_code=204)
        try:
            latest = await self.sessions.latest_resume_token(session_id)
            snapshot = await self.sessions.get_agent_snapshot(session_id)
            state = snapshot.state
            if state is not None and state.active_turn_id is not None:
                start = await self.sessions.resume_token_before_turn(session_id, state.active_turn_id)
                return _streaming(self._turn_stream(session_id, start, turn_id=state.active_turn_id))
        except SessionUnavailableError:
            return Response(status_code=204)
        except dex.DexServiceError as error:
            return _error(503, f"Dex did not answer: {' '.join(str(error).split())[:300]}")
        if snapshot.queued_message_count:  # a message waits to start the next turn: show that turn
            return _streaming(self._turn_stream(session_id, latest, pick=_any_turn_start))
        return Response(status_code=204)

    async def messages(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        if id_refusal(session_id, field="id", what="the session ID") is not None:
            return _error(404, "no session has this ID (it is not a valid session ID)")
        stored: list[AgentMessage] = []
        cursor: int | None = 0
        try:
            while cursor is not None:
                page = await self.sessions.list_agent_messages(session_id, after_sequence=cursor, limit=MAX_PAGE_LIMIT)
                stored.extend(page.messages)
                cursor = page.next_after_sequence
        except SessionUnavailableError:
            return _error(404, f"no session has the ID {session_id!r}")
        except dex.DexServiceError as error:
            return _error(503, f"Dex did not answer: {' '.join(str(error).split())[:300]}")
        return JSONResponse(ui_messages(stored, pydantic_ai=self.pydantic_ai))

    # -- the stream -------------------------------------------------------------------------------------------------

    async def _turn_stream(
        self,
        session_id: str,
        start: str,
        *,
        turn_id: str | None = None,
        pick: TurnPicker | None = None,
        answered: frozenset[str] = frozenset(),
    ) -> AsyncIterator[str]:
        """Stream one turn's chunks from the events after ``start``.

        The turn is ``turn_id``, or the one whose first event ``pick`` accepts.
        With ``answered``, nothing is sent before the first of those approvals'
        ``tool-approval-response`` (the page has the message up to it).
        """
        parts = None if turn_id is None else TurnParts(turn_id)
        if parts is not None:
            yield encode(StartChunk(message_id=assistant_message_id(parts.turn_id)))
        emitting = not answered
        token = start
        while parts is None or not parts.finished:
            try:
                message = await self.sessions.read_agent_event(session_id, token, long_poll=EVENT_POLL)
            except dex.LongPollTimeoutError:
                yield ": waiting\n\n"
                if parts is not None and emitting and await self._turn_is_over(session_id, parts.turn_id):
                    yield encode(FinishChunk(finish_reason="stop"))  # its end's events were lost: the state says so
                    break
                continue
            except dex.DexServiceError as error:
                yield encode(_error_chunk(f"the session's event stream failed: {error}"))
                break
            token = message.resume_token
            event = message.event
            if parts is None:
                if pick is None or event.turn_id is None or not pick(event):
                    continue
                parts = TurnParts(event.turn_id)
                yield encode(StartChunk(message_id=assistant_message_id(parts.turn_id)))
            for chunk in parts.feed(event):
                if not emitting and isinstance(chunk, ToolApprovalResponseChunk) and chunk.approval_id in answered:
                    emitting = True
                if emitting:
                    yield encode(chunk)
            if (
                emitting
                and not parts.finished
                and parts.waiting_for_approval
                and await self._caught_up(session_id, token)
            ):
                for chunk in parts.close_step():
                    yield encode(chunk)
                yield encode(FinishChunk(finish_reason="tool-calls"))
                break
        yield DONE

    async def _caught_up(self, session_id: str, token: str) -> bool:
        """Whether ``token`` is the newest event's position (a replay has reached the present)."""
        return await self.sessions.latest_resume_token(session_id) == token

    async def _turn_is_over(self, session_id: str, turn_id: str) -> bool:
        snapshot = await self.sessions.get_agent_snapshot(session_id)
        state = snapshot.state
        return state is not None and state.active_turn_id != turn_id and state.turn_count >= turn_number(turn_id)


def _any_turn_start(event: AgentEvent) -> bool:
    return isinstance(event.payload, TurnStartedPayload | TurnFailedPayload)


def _error_chunk(text: str) -> ErrorChunk:
    return ErrorChunk(error_text=" ".join(text.split())[:500])


def _streaming(stream: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(stream, media_type="text/event-stream", headers=STREAM_HEADERS)


async def _read_body(request: Request) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise ChatRequestError(413, f"the body is over {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > MAX_BODY_BYTES:
            raise ChatRequestError(413, f"the body is over {MAX_BODY_BYTES} bytes")
    return bytes(body)
