import pytest

from dex_agents.cli import main


def test_demo_says_how_to_run_the_tests(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    assert "make check" in capsys.readouterr().out
