from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.cli.support import OrderStack, order_stack
from tests.integration.stacks import shop_fixture

shop = shop_fixture("0")


@pytest.fixture
async def stack(shop: Path) -> AsyncIterator[OrderStack]:
    async with order_stack(shop) as running:
        yield running
