"""``dex-agents console`` as the command runs it: against a Dex server with ``--flow``, and ``--demo``."""

import asyncio
import contextlib
import io
import ipaddress
import logging
import logging.config
import re
import ssl
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.types import Receive, Scope, Send

from dex_agents.cli.demo import PROMPT
from dex_agents.console.server import LOG_CONFIG, TlsFiles, run_console, serve_console
from dex_agents.testing.devserver import DevServer
from tests.integration.console.support import RawResponse, raw_request, running_command

pytestmark = pytest.mark.integration


def running_console(**settings: object) -> contextlib.AbstractAsyncContextManager[tuple[str, io.StringIO]]:
    return running_command(run_console, **settings)


def running_demo_console(**settings: object) -> contextlib.AbstractAsyncContextManager[tuple[str, io.StringIO]]:
    """The console on the built-in demo (no server, no flow, no Worker of its own) on a free local port.

    ``settings`` add to those or override them.
    """
    demo: dict[str, object] = {
        "server": None,
        "flow_target": None,
        "demo": True,
        "host": "127.0.0.1",
        "port": 0,
        "index_path": None,
        "serve_worker": False,
    }
    return running_console(**{**demo, **settings})


async def test_the_console_serves_the_sessions_of_a_flow_on_a_dex_server(tmp_path: Path) -> None:
    index = tmp_path / "index" / "sessions.sqlite"
    async with (
        DevServer() as fake,
        running_console(
            server=fake.address,
            flow_target="dex_agents.cli.order_agent:build_order_flow",
            demo=False,
            host="127.0.0.1",
            port=0,
            token=None,
            index_path=index,
            serve_worker=True,
        ) as (url, output),
    ):
        page = await raw_request(url, "GET", "/")
        assert page.status == 200
        assert b"Flow type OrderAgent" in page.body
        assert f"dex-agents console: {url}" in output.getvalue()
        assert f"Dex on {fake.address}" in output.getvalue()
    assert index.exists()


async def test_the_demo_console_suggests_the_demo_prompt(tmp_path: Path) -> None:
    async with running_demo_console(token="tok") as (url, output):
        assert (await raw_request(url, "GET", "/")).status == 401
        page = await raw_request(url, "GET", "/", headers={"Authorization": "Bearer tok"})
        assert page.status == 200
        assert PROMPT.encode() in page.body
        assert f"{url}/?token=..." in output.getvalue()


def _self_signed(folder: Path) -> TlsFiles:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    files = TlsFiles(cert=folder / "cert.pem", key=folder / "key.pem")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return files


async def _https_get(url: str, target: str, tls: TlsFiles, headers: dict[str, str] | None = None) -> RawResponse:
    return await raw_request(url, "GET", target, headers=headers, tls=ssl.create_default_context(cafile=str(tls.cert)))


async def test_the_console_serves_https_with_its_token_from_a_file_and_a_secure_cookie(tmp_path: Path) -> None:
    tls = _self_signed(tmp_path)
    token = "a-token-read-from-a-file-0123456789"
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    async with running_demo_console(token_file=token_file, tls=tls) as (url, output):
        assert url.startswith("https://127.0.0.1:")
        assert f"{url}/?token=..." in output.getvalue()
        assert (await _https_get(url, "/", tls)).status == 401
        exchanged = await _https_get(url, f"/?token={token}", tls)
        assert exchanged.status == 303
        cookie = exchanged.headers["set-cookie"]
        port = url.rpartition(":")[2]
        assert cookie.startswith(f"__Host-dex_console_token_{port}=")
        assert "; Secure" in cookie
        assert token not in cookie
        assert (await _https_get(url, "/", tls, {"Cookie": cookie.split(";")[0]})).status == 200
        assert (await _https_get(url, "/", tls, {"Authorization": f"Bearer {token}"})).status == 200
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError)):
            await raw_request(url.replace("https://", "http://"), "GET", "/")  # no plain HTTP on that port


async def test_no_header_can_name_another_client_or_scheme_to_the_console(tmp_path: Path) -> None:
    # Throttling is per client address, and the cookie's Secure flag follows the scheme: neither may be forged.
    async def echo(scope: Scope, receive: Receive, send: Send) -> None:
        body = f"{scope['client'][0]} {scope['scheme']}".encode()
        headers = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async with serve_console(echo, "127.0.0.1", 0) as url:
        forged = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https", "Forwarded": "for=203.0.113.9"}
        answer = await raw_request(url, "GET", "/", headers=forged)
    assert answer.body == b"127.0.0.1 http"


def test_what_the_console_logs_shows_control_characters_visibly() -> None:
    try:
        raise RuntimeError("session '\x1b]0;PWNED\x07' failed")
    except RuntimeError:
        record = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "GET /sessions/\x1b[2J", None, None)
        record.exc_info = sys.exc_info()
    formatter = logging.config.DictConfigurator(LOG_CONFIG).configure_formatter(
        LOG_CONFIG["formatters"]["visible"]  # type: ignore[index]
    )
    shown = formatter.format(record)
    assert "\x1b" not in shown
    assert "GET /sessions/␛[2J" in shown
    assert "session '␛]0;PWNED␇' failed" in shown


async def test_the_demo_console_keeps_its_sessions_in_its_data_dir_and_lists_them_after_a_restart(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "demo-data"
    async with running_demo_console(token=None, data_dir=data_dir) as (url, output):
        page = await raw_request(url, "GET", "/")
        match = re.search(r'name="csrf" value="([0-9a-f]+)"', page.body.decode())
        assert match is not None
        form = urlencode({"csrf": match.group(1), "session_id": "kept-1", "message": ""}).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": url, "Sec-Fetch-Site": "same-origin"}
        assert (await raw_request(url, "POST", "/sessions", headers=headers, body=form)).status == 303
        assert f"sessions kept in {tmp_path / 'demo-data'}" in output.getvalue()
    async with running_demo_console(token=None, data_dir=data_dir) as (url, _):
        listed = await raw_request(url, "GET", "/")
        assert b"kept-1" in listed.body, "the restarted demo lists the session it kept"
        session = await raw_request(url, "GET", "/sessions/kept-1")
        assert session.status == 200
