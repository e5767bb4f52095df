from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dex_agents.cli.shop import CHUNK_DELAY_ENV, STATE_ENV
from tests.integration.cli.support import OrderStack, order_stack


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "shop"
    path.mkdir()
    monkeypatch.setenv(STATE_ENV, str(path))
    monkeypatch.setenv(CHUNK_DELAY_ENV, "0")
    return path


@pytest.fixture
async def stack(shop: Path) -> AsyncIterator[OrderStack]:
    async with order_stack(shop) as running:
        yield running
