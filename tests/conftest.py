"""Fixtures of every test: nothing a test runs keeps state in the user's own state dir."""

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$XDG_STATE_HOME`` in a fresh temporary dir (the dev server's and the console's default data go there)."""
    path = tmp_path_factory.mktemp("state-home")
    monkeypatch.setenv("XDG_STATE_HOME", str(path))
    return path
