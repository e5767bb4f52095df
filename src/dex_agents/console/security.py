r"""Who may use the console, and how its forms are kept from other sites.

`ConsoleSecurity.for_bind` is the rule of the command line: the console binds
127.0.0.1 by default; any address that is not loopback (``0.0.0.0``, a LAN
address, a host name) needs a token of at least `MIN_TOKEN_BYTES` printable
ASCII characters, or the console refuses to start. The command reads it from
``$DEX_AGENTS_CONSOLE_TOKEN`` (`TOKEN_ENV`) or a file (``--token-file``),
never from its own command line, which every user of the machine can read
(``ps``). With TLS (``--tls-cert`` and ``--tls-key``) the token and the
cookie never cross the network in clear.

`SecurityMiddleware` checks every request, before any page, stream or
form handler runs:

- With a token, every request must carry it: an ``Authorization: Bearer``
  header, the console's cookie, or ``?token=`` on a GET, which sets the
  cookie and redirects to the same page without the token (a path of this
  console only: never ``//host``, ``/\host`` or anything a browser reads as
  another site). The cookie is named after the console's port
  (`cookie_name`), holds an HMAC of the token and that port (never the token),
  is HttpOnly and SameSite=Strict, and under TLS ``Secure`` with the
  ``__Host-`` prefix, so a server on another port of the same host (which
  browsers send every cookie of the host to) gets nothing it can use here.
  Anything else gets 401. Tokens are compared in constant time. A client
  presenting wrong tokens is slowed down (`dex_agents.console.throttle`:
  after five, 429 for a doubling while).
- Without a token (loopback only), the ``Host`` header must name a loopback
  host, so a DNS-rebinding page cannot read the console through a name it
  controls.
- A POST must come from the console's own pages: ``Sec-Fetch-Site``, when
  the browser sends it, must be ``same-origin`` (or ``none``, typed by the
  person), ``Origin``, when sent, must be the console's own origin, and the
  form must carry the CSRF token (`ConsoleSecurity.check_csrf`), which only
  the console's pages know (an HMAC of a random per-process secret).

Every response carries a Content-Security-Policy that allows scripts and
styles only from the console itself (nothing inline), ``X-Frame-Options:
DENY``, a same-origin-only referrer (a ``?token=`` never leaks to another
site; with ``no-referrer`` Chromium would send ``Origin: null`` on the
console's own forms) and ``no-store``.
"""

import hashlib
import hmac
import ipaddress
import os
import secrets
from http.cookies import SimpleCookie
from urllib.parse import quote, unquote

import attrs
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dex_agents.console.throttle import FailedTries

TOKEN_ENV = "DEX_AGENTS_CONSOLE_TOKEN"
"""The environment variable holding the console's token."""

MIN_TOKEN_BYTES = 32
"""The shortest token a console bound beyond loopback accepts."""

TOKEN_COOKIE = "dex_console_token"
"""The start of the cookie's name, which ends with the console's port (`cookie_name`)."""

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)
"""Headers added to every response."""

_PATH_SAFE = "/%!$&'()*+,;=:@-._~"
"""What a redirect's path keeps as it is; anything else (``\\``, a tab, a space) is percent-encoded."""


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


def token_problem(token: str, *, loopback: bool) -> str | None:
    """Why ``token`` cannot protect a console (``None`` when it can); beyond loopback it must be long."""
    if not token.strip():
        return "the console token is blank"
    if not all("!" <= character <= "~" for character in token):
        return "the console token must be printable ASCII without spaces (it travels in HTTP headers)"
    if not loopback and len(token.encode()) < MIN_TOKEN_BYTES:
        return (
            f"the console token has {len(token.encode())} bytes; a console bound beyond loopback needs at least "
            f"{MIN_TOKEN_BYTES} (for example: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return None


def cookie_name(port: int, *, secure: bool) -> str:
    """The name of the token cookie of the console on ``port`` (``__Host-`` prefixed when ``secure``)."""
    return f"{'__Host-' if secure else ''}{TOKEN_COOKIE}_{port}"


@attrs.frozen(kw_only=True)
class ConsoleSecurity:
    """The console's access rules: the bind address, the token (if any), TLS, the CSRF secret."""

    bind_host: str
    """The address the console listens on, as configured."""
    token: str | None
    """The token every request must carry, or ``None`` (loopback only)."""
    tls: bool = False
    """Whether the console is served over TLS (its token cookie is then ``Secure``)."""
    csrf_secret: bytes = attrs.field(factory=lambda: secrets.token_bytes(32), repr=False)
    """The secret the CSRF token is derived from (new in every process)."""
    failed_tries: FailedTries = attrs.field(factory=FailedTries, repr=False, eq=False)
    """Wrong tokens per client, to slow guessing down."""

    @classmethod
    def for_bind(cls, bind_host: str, token: str | None = None, *, tls: bool = False) -> "ConsoleSecurity":
        """Return the rules for listening on ``bind_host``; ``token`` defaults to ``$DEX_AGENTS_CONSOLE_TOKEN``.

        Raises:
            ConsoleConfigError: ``bind_host`` is not loopback and there is no token, or a token too short for it;
                or the token is blank or not printable ASCII.
        """
        chosen = token if token is not None else os.environ.get(TOKEN_ENV) or None
        loopback = is_loopback(bind_host)
        if chosen is None and not loopback:
            raise ConsoleConfigError(
                f"binding {bind_host} (not loopback) needs a token: set ${TOKEN_ENV} or pass --token-file"
            )
        problem = None if chosen is None else token_problem(chosen, loopback=loopback)
        if problem is not None:
            raise ConsoleConfigError(problem)
        return cls(bind_host=bind_host, token=chosen, tls=tls)

    @property
    def csrf_token(self) -> str:
        """The token every form of the console carries."""
        return hmac.new(self.csrf_secret, b"dex-agents console form", hashlib.sha256).hexdigest()

    def check_csrf(self, submitted: str | None) -> bool:
        """Whether a form's CSRF field is the console's."""
        return submitted is not None and hmac.compare_digest(submitted.encode(), self.csrf_token.encode())

    def cookie_value(self, port: int) -> str | None:
        """What the token cookie of the console on ``port`` holds: an HMAC of the token and the port."""
        if self.token is None:
            return None
        return hmac.new(self.token.encode(), f"dex-agents console cookie {port}".encode(), hashlib.sha256).hexdigest()

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
        if security.token is None:
            if not is_loopback(_host_name(headers.get("host", ""))):
                return 403, "This console answers only on a loopback host name.", []
        else:
            refused = self._token_refusal(scope, headers)
            if refused is not None:
                return refused
        if scope["method"] not in ("GET", "HEAD"):
            fetch_site = headers.get("sec-fetch-site")
            if fetch_site is not None and fetch_site not in ("same-origin", "none"):
                return 403, "Cross-site requests are refused.", []
            origin = headers.get("origin")
            if origin is not None and origin != f"{scope.get('scheme', 'http')}://{headers.get('host', '')}":
                return 403, "Requests from another origin are refused.", []
        return None

    def _token_refusal(
        self, scope: Scope, headers: dict[str, str]
    ) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        security = self.security
        client = str((scope.get("client") or ("?",))[0])
        wait = security.failed_tries.wait_for(client)
        if wait:
            return 429, f"Too many wrong tokens: try again in {wait} s.", [(b"retry-after", str(wait).encode())]
        port = int((scope.get("server") or ("", 0))[1] or 0)
        secure = security.tls or scope.get("scheme") == "https"
        authorization = headers.get("authorization", "")
        if authorization.lower().startswith("bearer "):
            if security.token_matches(authorization[7:].strip()):
                security.failed_tries.succeeded(client)
                return None
            security.failed_tries.failed(client)
            return 401, "The token is wrong.", []
        cookie = _cookie(headers.get("cookie", ""), cookie_name(port, secure=secure))
        expected = security.cookie_value(port)
        if cookie is not None and expected is not None and hmac.compare_digest(cookie, expected):
            return None  # a wrong cookie is a stale one (cookies are HMACs: nobody guesses them), not a guess
        query = scope.get("query_string", b"").decode("latin-1")
        offered = [unquote(value) for name, _, value in (p.partition("=") for p in query.split("&")) if name == "token"]
        if scope["method"] == "GET" and offered:
            if not security.token_matches(offered[0]):
                security.failed_tries.failed(client)
                return 401, "The token is wrong.", []
            security.failed_tries.succeeded(client)
            rest = "&".join(p for p in query.split("&") if p and p.partition("=")[0] != "token")
            location = _same_console_path(scope) + (f"?{quote(rest, safe=_PATH_SAFE + '?')}" if rest else "")
            attributes = "; HttpOnly; SameSite=Strict; Path=/" + ("; Secure" if secure else "")
            set_cookie = f"{cookie_name(port, secure=secure)}={expected}{attributes}"
            return 303, "", [(b"location", location.encode()), (b"set-cookie", set_cookie.encode())]
        return 401, "This console needs its token: open it with ?token=... or send Authorization: Bearer.", []


def _cookie(header: str, name: str) -> str | None:
    cookie = SimpleCookie()
    try:
        cookie.load(header)
    except Exception:  # noqa: BLE001 - a malformed cookie header is only no cookie
        return None
    morsel = cookie.get(name)
    return None if morsel is None else morsel.value


def _same_console_path(scope: Scope) -> str:
    r"""The request's own path, as sent, made a path of this site only.

    Percent-encoded where a browser would read anything else into it (``\``
    as ``/``, a dropped tab), and with exactly one leading ``/``, so it can
    never be read as ``//another.host``.
    """
    raw = scope.get("raw_path") or quote(scope["path"]).encode()
    return "/" + quote(raw.decode("latin-1"), safe=_PATH_SAFE).lstrip("/")


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
