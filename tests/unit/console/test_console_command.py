"""``dex-agents console`` refuses unsafe or incomplete settings before it starts anything."""

import socket
from pathlib import Path

import pytest

from dex_agents.cli.app import main
from dex_agents.console.security import TOKEN_ENV
from tests.unit.test_lean_core import run_without


def test_the_console_needs_a_server_and_a_flow_or_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["console"]) == 2
    assert "give --server HOST:PORT and --flow MODULE:FLOW_FACTORY, or --demo" in capsys.readouterr().err


def test_the_demo_takes_no_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["console", "--demo", "--server", "127.0.0.1:8801"]) == 2
    assert "--demo runs its own dev server" in capsys.readouterr().err


def test_a_public_bind_without_a_token_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert main(["console", "--demo", "--host", "0.0.0.0"]) == 2
    assert "binding 0.0.0.0 (not loopback) needs a token" in capsys.readouterr().err


def test_without_the_console_extra_the_command_says_which_extra_to_install() -> None:
    result = run_without(
        ("starlette", "uvicorn"),
        """
        from dex_agents.cli.app import main

        raise SystemExit(main(["console", "--demo"]))
        """,
    )
    assert result.returncode == 1, result.stderr
    assert "the console needs the console extra: pip install 'dex-agents[console]'" in result.stderr


def test_the_token_flag_is_refused_because_every_user_can_read_a_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["console", "--demo", "--token", "t" * 40]) == 2
    err = capsys.readouterr().err
    assert "--token is deprecated" in err
    assert "ps" in err
    assert "--token-file" in err


def test_a_public_bind_refuses_a_token_shorter_than_32_bytes_from_the_environment_or_a_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "short")
    assert main(["console", "--demo", "--host", "0.0.0.0"]) == 2
    assert "needs at least 32" in capsys.readouterr().err
    monkeypatch.delenv(TOKEN_ENV)
    token_file = tmp_path / "token"
    token_file.write_text("also-short\n")
    assert main(["console", "--demo", "--host", "0.0.0.0", "--token-file", str(token_file)]) == 2
    assert "needs at least 32" in capsys.readouterr().err
    token_file.write_text("\n")
    assert main(["console", "--demo", "--host", "0.0.0.0", "--token-file", str(token_file)]) == 2
    assert "is empty" in capsys.readouterr().err
    assert main(["console", "--demo", "--token-file", str(tmp_path / "missing")]) == 2
    assert "cannot read the token file" in capsys.readouterr().err


def test_tls_needs_a_certificate_and_its_key_that_load(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("not a certificate")
    assert main(["console", "--demo", "--tls-cert", str(cert)]) == 2
    assert "--tls-cert and --tls-key go together" in capsys.readouterr().err
    assert main(["console", "--demo", "--tls-cert", str(cert), "--tls-key", str(cert)]) == 2
    assert "do not load" in capsys.readouterr().err


def test_a_busy_port_is_one_line_and_a_token_file_others_can_read_is_warned_about(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("t" * 40)
    token_file.chmod(0o644)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["console", "--demo", "--port", str(port), "--token-file", str(token_file)]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"error: the console cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
    assert f"warning: other users can read the token file {token_file}: chmod 600 it" in captured.out
