"""``dex-agents console`` refuses unsafe or incomplete settings before it starts anything."""

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
