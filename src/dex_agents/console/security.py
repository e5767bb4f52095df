"""Who may use the console, and how its forms are kept from other sites.

`ConsoleSecurity.for_bind` is the rule of the command line: the console binds
127.0.0.1 by default; any address that is not loopback (``0.0.0.0``, a LAN
address, a host name) needs a token, from ``--token`` or
``$DEX_AGENTS_CONSOLE_TOKEN`` (`TOKEN_ENV`), or the console refuses to start.

`SecurityMiddleware` checks every request, before any page, stream or
form handler runs:

- With a token, every request must carry it: an ``Authorization: Bearer``
  header, the ``dex_console_token`` cookie, or ``?token=`` on a GET, which
  sets the cookie (HttpOnly, SameSite=Strict) and redirects to the same URL
  without the token. Anything else gets 401. Tokens are compared in constant
  time.
- Without a token (loopback only), the ``Host`` header must name a loopback
  host, so a DNS-rebinding page cannot read the console through a name it
  controls.
- A POST must come from the console's own pages: ``Sec-Fetch-Site``, when
  the browser sends it, must be ``same-origin`` (or ``none``, typed by the
  person), ``Origin``, when sent, must be the console's own origin, and the
  form must carry the CSRF token (`ConsoleSecurity.check_csrf`), which only
  the console's pages know (an HMAC of a random per-process secret).

Every response carries a Content-Security-Policy that allows scripts only
from the console itself (no inline script), ``X-Frame-Options: DENY``, a
same-origin-only referrer (a ``?token=`` never leaks to another site; with
``no-referrer`` Chromium would send ``Origin: null`` on the console's own
forms) and ``no-store``.
"""

import hashlib
import hmac
import ipaddress
import os
import secrets
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

import attrs
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_ENV = "DEX_AGENTS_CONSOLE_TOKEN"
"""The environment variable holding the console's token (``--token`` wins)."""

TOKEN_COOKIE = "dex_console_token"
"""The cookie that carries the token after a ``?token=`` visit."""

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)
"""Headers added to every response."""


class ConsoleConfigError(ValueError):
    """The console's settings are unsafe or malformed (for example a public bind without a token)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name, maybe in brackets) is this machine's loopback."""
    bare = host.strip("[]").lower()
    if bare == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The host of a ``Host`` header, without its port."""
    if host_header.startswith("["):
        return host_header[: host_header.find("]") + 1]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


@attrs.frozen(kw_only=True)
class ConsoleSecurity:
    """The console's access rules: the bind address, the token (if any) and the CSRF secret."""

    bind_host: str
    """The address the console listens on, as configured."""
    token: str | None
    """The token every request must carry, or ``None`` (loopback only)."""
    csrf_secret: bytes = attrs.field(factory=lambda: secrets.token_bytes(32), repr=False)
    """The secret the CSRF token is derived from (new in every process)."""

    @classmethod
    def for_bind(cls, bind_host: str, token: str | None = None) -> "ConsoleSecurity":
        """Return the rules for listening on ``bind_host``; ``token`` defaults to ``$DEX_AGENTS_CONSOLE_TOKEN``.

        Raises:
            ConsoleConfigError: ``bind_host`` is not loopback and there is no token, or the token is blank.
        """
        chosen = token if token is not None else os.environ.get(TOKEN_ENV) or None
        if chosen is not None and not chosen.strip():
            raise ConsoleConfigError("the console token is blank")
        if chosen is None and not is_loopback(bind_host):
            raise ConsoleConfigError(
                f"binding {bind_host} (not loopback) needs a token: pass --token or set ${TOKEN_ENV}"
            )
        return cls(bind_host=bind_host, token=chosen)

    @property
    def csrf_token(self) -> str:
        """The token every form of the console carries."""
        return hmac.new(self.csrf_secret, b"dex-agents console form", hashlib.sha256).hexdigest()

    def check_csrf(self, submitted: str | None) -> bool:
        """Whether a form's CSRF field is the console's."""
        return submitted is not None and hmac.compare_digest(submitted.encode(), self.csrf_token.encode())

    @property
    def cookie_value(self) -> str | None:
        """What the token cookie holds: a digest of the token (cookie-safe text, and not the token itself)."""
        if self.token is None:
            return None
        return hmac.new(self.token.encode(), b"dex-agents console cookie", hashlib.sha256).hexdigest()

    def token_matches(self, candidate: str | None) -> bool:
        """Whether ``candidate`` is the token (constant time)."""
        return (
            self.token is not None
            and candidate is not None
            and hmac.compare_digest(candidate.encode(), self.token.encode())
        )


class SecurityMiddleware:
    """Checks the token, the Host and cross-site POSTs of every request (`ConsoleSecurity`)."""

    def __init__(self, app: ASGIApp, security: ConsoleSecurity) -> None:
        self.app = app
        self.security = security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request, then hand it on with the security headers added to its response."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, text, extra = refusal
            await _respond(send, status, text, extra)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        security = self.security
        method = scope["method"]
        if security.token is None:
            if not is_loopback(_host_name(headers.get("host", ""))):
                return 403, "This console answers only on a loopback host name.", []
        elif not self._has_token(headers):
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            if method == "GET" and security.token_matches(query.get("token")):
                rest = urlencode([(k, v) for k, v in parse_qsl(scope["query_string"].decode()) if k != "token"])
                location = scope["path"] + (f"?{rest}" if rest else "")
                cookie = f"{TOKEN_COOKIE}={security.cookie_value}; HttpOnly; SameSite=Strict; Path=/"
                return 303, "", [(b"location", location.encode()), (b"set-cookie", cookie.encode())]
            return 401, "This console needs its token: open it with ?token=... or send Authorization: Bearer.", []
        if method not in ("GET", "HEAD"):
            fetch_site = headers.get("sec-fetch-site")
            if fetch_site is not None and fetch_site not in ("same-origin", "none"):
                return 403, "Cross-site requests are refused.", []
            origin = headers.get("origin")
            if origin is not None and origin != f"{scope.get('scheme', 'http')}://{headers.get('host', '')}":
                return 403, "Requests from another origin are refused.", []
        return None

    def _has_token(self, headers: dict[str, str]) -> bool:
        authorization = headers.get("authorization", "")
        if authorization.lower().startswith("bearer ") and self.security.token_matches(authorization[7:].strip()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed cookie header is only no token
            return False
        morsel = cookie.get(TOKEN_COOKIE)
        expected = self.security.cookie_value
        return morsel is not None and expected is not None and hmac.compare_digest(morsel.value, expected)


async def _respond(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]]) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *extra,
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
