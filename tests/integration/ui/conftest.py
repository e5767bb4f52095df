from pathlib import Path

import pytest

from dex_agents.cli.shop import CHUNK_DELAY_ENV, STATE_ENV


@pytest.fixture(autouse=True)
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo shop's files under the test's folder; words streamed 10 ms apart, so a stream has parts to drop."""
    path = tmp_path / "shop"
    path.mkdir()
    monkeypatch.setenv(STATE_ENV, str(path))
    monkeypatch.setenv(CHUNK_DELAY_ENV, "0.01")
    return path
