"""The console's access rules on a bare ASGI app: tokens, the cookie, guessing slowed down, redirects, strict input."""

import asyncio

import pytest
from starlette.types import Message, Receive, Scope, Send

from dex_agents.console.inputs import BadRequestError, StrictInputMiddleware, whole_number
from dex_agents.console.security import (
    MIN_TOKEN_BYTES,
    TOKEN_ENV,
    ConsoleConfigError,
    ConsoleSecurity,
    SecurityMiddleware,
    cookie_name,
)
from dex_agents.console.throttle import FREE_TRIES, FailedTries

TOKEN = "T" * 16 + "0123456789abcdef"
"""A token long enough for a public bind."""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": scope["path"].encode()})


async def _call(
    app: object,
    method: str,
    raw_path: bytes,
    query: bytes = b"",
    *,
    client: str = "10.0.0.1",
    scheme: str = "http",
    port: int = 8810,
    **headers: str,
) -> tuple[int, dict[bytes, bytes], bytes]:
    sent: list[Message] = []

    async def receive() -> Message:
        await asyncio.sleep(0)
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": "http",
        "method": method,
        "path": raw_path.decode("latin-1"),
        "raw_path": raw_path,
        "query_string": query,
        "scheme": scheme,
        "server": ("127.0.0.1", port),
        "client": (client, 40000),
        "headers": [
            (k.replace("_", "-").encode(), v.encode()) for k, v in {"host": f"127.0.0.1:{port}", **headers}.items()
        ],
    }
    await app(scope, receive, send)  # type: ignore[operator]
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body


def _guarded(security: ConsoleSecurity) -> SecurityMiddleware:
    return SecurityMiddleware(StrictInputMiddleware(_ok), security)


def test_a_public_bind_needs_a_token_of_32_printable_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert ConsoleSecurity.for_bind("127.0.0.1").token is None
    assert ConsoleSecurity.for_bind("127.0.0.1", token="short").token == "short"  # loopback: any token helps
    with pytest.raises(ConsoleConfigError, match="needs a token"):
        ConsoleSecurity.for_bind("0.0.0.0")
    with pytest.raises(ConsoleConfigError, match="blank"):
        ConsoleSecurity.for_bind("0.0.0.0", token="  ")
    for weak in ("t", "x" * (MIN_TOKEN_BYTES - 1)):
        with pytest.raises(ConsoleConfigError, match="needs at least 32"):
            ConsoleSecurity.for_bind("0.0.0.0", token=weak)
    with pytest.raises(ConsoleConfigError, match="printable ASCII"):
        ConsoleSecurity.for_bind("0.0.0.0", token="é" * 32)
    with pytest.raises(ConsoleConfigError, match="printable ASCII"):
        ConsoleSecurity.for_bind("192.168.1.2", token="a b" * 16)
    assert ConsoleSecurity.for_bind("0.0.0.0", token=TOKEN).token == TOKEN
    monkeypatch.setenv(TOKEN_ENV, "e" * 40)
    assert ConsoleSecurity.for_bind("example.org").token == "e" * 40
    monkeypatch.setenv(TOKEN_ENV, "short")
    with pytest.raises(ConsoleConfigError, match="needs at least 32"):
        ConsoleSecurity.for_bind("0.0.0.0")


async def test_with_a_token_every_request_must_carry_it_and_the_cookie_is_bound_to_the_port() -> None:
    security = ConsoleSecurity.for_bind("0.0.0.0", token=TOKEN)
    app = _guarded(security)
    assert (await _call(app, "GET", b"/"))[0] == 401
    assert (await _call(app, "GET", b"/", authorization=f"Bearer {TOKEN}"))[0] == 200
    assert (await _call(app, "GET", b"/", cookie=f"{cookie_name(8810, secure=False)}={TOKEN}"))[0] == 401

    status, headers, _ = await _call(app, "GET", b"/sessions/a", b"token=" + TOKEN.encode() + b"&after=3")
    assert status == 303
    assert headers[b"location"] == b"/sessions/a?after=3"
    cookie = headers[b"set-cookie"].decode()
    assert TOKEN not in cookie
    assert cookie.startswith("dex_console_token_8810=")
    for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
        assert attribute in cookie
    assert "Secure" not in cookie
    value = cookie.split(";")[0]
    assert (await _call(app, "GET", b"/", cookie=value))[0] == 200
    # Another console's port: neither the name nor the value is its own.
    assert (await _call(app, "GET", b"/", port=8811, cookie=value))[0] == 401
    other_name = value.replace("_8810=", "_8811=")
    assert (await _call(app, "GET", b"/", port=8811, cookie=other_name))[0] == 401
    assert (await _call(app, "POST", b"/sessions", b"token=" + TOKEN.encode()))[0] == 401  # never on a POST


async def test_under_tls_the_cookie_is_secure_and_host_prefixed() -> None:
    security = ConsoleSecurity.for_bind("0.0.0.0", token=TOKEN, tls=True)
    status, headers, _ = await _call(_guarded(security), "GET", b"/", b"token=" + TOKEN.encode(), scheme="https")
    assert status == 303
    cookie = headers[b"set-cookie"].decode()
    assert cookie.startswith("__Host-dex_console_token_8810=")
    assert "; Secure" in cookie
    value = cookie.split(";")[0]
    assert (await _call(_guarded(security), "GET", b"/", scheme="https", cookie=value))[0] == 200


@pytest.mark.parametrize(
    "raw_path",
    [
        b"/%5Cevil.example/",
        b"//evil.example/",
        b"/%2F%2Fevil.example/",
        b"/%09/evil.example/",
        b"///evil.example",
        b"/\\evil.example/",
        b"/\t/evil.example",
    ],
)
async def test_the_token_exchange_redirects_only_inside_the_console(raw_path: bytes) -> None:
    security = ConsoleSecurity.for_bind("0.0.0.0", token=TOKEN)
    status, headers, _ = await _call(_guarded(security), "GET", raw_path, b"token=" + TOKEN.encode())
    assert status == 303
    location = headers[b"location"].decode()
    assert location.startswith("/")
    assert not location.startswith(("//", "/\\"))
    assert all(character not in location for character in "\\\t\r\n ")


async def test_wrong_tokens_are_slowed_down_per_client_and_a_right_one_resets_the_count() -> None:
    clock = Clock()
    security = ConsoleSecurity(bind_host="0.0.0.0", token=TOKEN, failed_tries=FailedTries(clock))
    app = _guarded(security)
    for _ in range(FREE_TRIES):
        assert (await _call(app, "GET", b"/", authorization="Bearer guess"))[0] == 401
    assert (await _call(app, "GET", b"/", b"token=guess"))[0] == 401  # one more: now blocked for a while
    status, headers, _ = await _call(app, "GET", b"/", authorization=f"Bearer {TOKEN}")
    assert status == 429  # even the right token waits: guessing in parallel gains nothing
    assert int(headers[b"retry-after"]) >= 1
    assert (await _call(app, "GET", b"/", client="10.0.0.2", authorization=f"Bearer {TOKEN}"))[0] == 200
    clock.now += 1.5
    assert (await _call(app, "GET", b"/", authorization="Bearer guess"))[0] == 401
    blocked = await _call(app, "GET", b"/", authorization="Bearer guess")
    assert blocked[0] == 429
    assert int(blocked[1][b"retry-after"]) == 2  # the block doubles
    clock.now += 2.5
    assert (await _call(app, "GET", b"/", authorization=f"Bearer {TOKEN}"))[0] == 200
    assert (await _call(app, "GET", b"/", authorization="Bearer guess"))[0] == 401  # counted afresh
    # A stale cookie (a restarted console's) is no guess: it never blocks its browser.
    for _ in range(FREE_TRIES * 3):
        assert (await _call(app, "GET", b"/", client="10.0.0.3", cookie=f"{cookie_name(8810, secure=False)}=x"))[
            0
        ] == 401
    assert (await _call(app, "GET", b"/", client="10.0.0.3", authorization=f"Bearer {TOKEN}"))[0] == 200


@pytest.mark.parametrize(
    ("raw_path", "query"),
    [
        (b"/sessions/%ED%A0%80", b""),  # a lone surrogate's bytes
        (b"/sessions/%FF", b""),
        (b"/sessions/x%2Fevents", b""),  # an encoded / never splits into another route
        (b"/sessions/x", b"after=%ED%A0%80"),
        (b"/", b"notice=%C3"),
    ],
)
async def test_a_path_or_query_that_does_not_decode_strictly_is_refused_before_any_route(
    raw_path: bytes, query: bytes
) -> None:
    status, headers, body = await _call(_guarded(ConsoleSecurity.for_bind("127.0.0.1")), "GET", raw_path, query)
    assert status == 400
    assert body.strip()
    assert headers[b"x-frame-options"] == b"DENY"


async def test_a_path_reaches_the_routes_exactly_as_sent() -> None:
    status, _, body = await _call(_guarded(ConsoleSecurity.for_bind("127.0.0.1")), "GET", b"/sessions/a%3Fb%20%C3%A9")
    assert (status, body.decode()) == (200, "/sessions/a?b é")


@pytest.mark.parametrize("value", ["²", "-1", "1.5", "1e3", "٣", "99999999999", "0x10", " 1"])
def test_a_whole_number_parameter_is_ascii_digits_only(value: str) -> None:
    with pytest.raises(BadRequestError, match="whole number"):
        whole_number(value, name="after")


def test_a_whole_number_parameter_may_be_absent() -> None:
    assert whole_number(None, name="after") is None
    assert whole_number("", name="after") is None
    assert whole_number("42", name="after") == 42
