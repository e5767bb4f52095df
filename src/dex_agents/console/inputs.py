"""What the console reads from a request, read strictly: refused when odd, never altered.

`StrictInputMiddleware` runs before any route, so the rules hold for every
route and every parameter at once:

- The path is decoded from the raw bytes of the request, segment by segment,
  as strict UTF-8. A segment that is not UTF-8 (the bytes of a lone surrogate,
  say) is refused, never turned into U+FFFD; a segment that decodes to a
  ``/`` (``%2F``) is refused too, so ``/sessions/x%2Fevents`` can never reach
  session ``x``'s event stream (a session ID never holds a ``/``).
- The query string is parsed as strictly (`parse_urlencoded`), so every
  query parameter a handler reads is exactly what was sent.

Both answer 400 with one line. Forms are parsed with the same
`parse_urlencoded` (`read_form`); whole numbers in parameters are ASCII
digits only and bounded (`whole_number`: ``"²"`` is not a number, whatever
`str.isdigit` says).
"""

from urllib.parse import unquote_to_bytes

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

MAX_FORM_BYTES = 1024 * 1024
"""The largest form the console reads."""

MAX_NUMBER = 2**31 - 1
"""The largest whole number a parameter may hold."""


class BadRequestError(Exception):
    """A request the console refuses (400, or ``status``), with one line saying why."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def _decode(raw: bytes, what: str) -> str:
    try:
        return unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadRequestError(f"{what} is not UTF-8 text (a lone surrogate is not Unicode text): refused") from error


def decode_path(raw_path: bytes) -> str:
    """Return the path of ``raw_path`` decoded strictly.

    Raises:
        BadRequestError: a segment is not UTF-8, or holds an encoded ``/``.
    """
    segments = [_decode(segment, "the URL's path") for segment in raw_path.split(b"/")]
    if any("/" in segment for segment in segments):
        raise BadRequestError("a segment of the URL's path holds an encoded /: no session ID holds one")
    return "/".join(segments)


def parse_urlencoded(raw: bytes, *, what: str = "the query string") -> dict[str, str]:
    """Return the fields of a query string or form body (the first of repeated names), decoded strictly.

    Raises:
        BadRequestError: a name or value is not UTF-8 text.
    """
    fields: dict[str, str] = {}
    for pair in raw.split(b"&"):
        if not pair:
            continue
        name, _, value = pair.partition(b"=")
        key = _decode(name.replace(b"+", b" "), what)
        decoded = _decode(value.replace(b"+", b" "), what)
        fields.setdefault(key, decoded)
    return fields


def whole_number(value: str | None, *, name: str) -> int | None:
    """Return the parameter ``name`` as a whole number, ``None`` when absent or empty.

    Raises:
        BadRequestError: it is not 1 to 10 ASCII digits up to `MAX_NUMBER`.
    """
    if value is None or value == "":
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 10 or int(value) > MAX_NUMBER:
        raise BadRequestError(f"?{name}= must be a whole number from 0 to {MAX_NUMBER}")
    return int(value)


def query(request: Request) -> dict[str, str]:
    """The request's query parameters (strict; `StrictInputMiddleware` refused what does not parse)."""
    return parse_urlencoded(request.scope.get("query_string", b""))


async def read_form(request: Request) -> dict[str, str]:
    """Return the posted form's fields.

    Raises:
        BadRequestError: the form is larger than `MAX_FORM_BYTES` (413) or not UTF-8 text.
    """
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise BadRequestError("the form is too large", status=413)
    return parse_urlencoded(bytes(body), what="the form")


class StrictInputMiddleware:
    """Refuses, before any route, a request whose path or query string does not decode strictly (400)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the path and the query string; hand the request on with its path decoded strictly."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            raw_path = scope.get("raw_path")
            path = decode_path(raw_path) if raw_path else scope["path"]
            parse_urlencoded(scope.get("query_string", b""))
        except BadRequestError as error:
            body = (error.message + "\n").encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": error.status,
                    "headers": [
                        (b"content-type", b"text/plain; charset=utf-8"),
                        (b"content-length", b"%d" % len(body)),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app({**scope, "path": path}, receive, send)
