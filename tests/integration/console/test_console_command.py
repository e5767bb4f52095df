"""``dex-agents console`` as the command runs it: against a Dex server with ``--flow``, and ``--demo``."""

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dex_agents.cli.demo import PROMPT
from dex_agents.console.server import run_console
from dex_agents.testing.devserver import DevServer
from tests.integration.console.support import raw_request

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def running_console(**settings: object) -> AsyncIterator[tuple[str, io.StringIO]]:
    output = io.StringIO()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        run_console(Console(file=output, width=200), ready=ready.set_result, **settings)  # type: ignore[arg-type]
    )
    try:
        waiters: set[asyncio.Future[Any]] = {task, ready}
        done, _ = await asyncio.wait(waiters, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()
        assert ready in done, "the console did not start in time"
        yield ready.result(), output
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


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
    async with running_console(
        server=None,
        flow_target=None,
        demo=True,
        host="127.0.0.1",
        port=0,
        token="tok",
        index_path=None,
        serve_worker=False,
    ) as (url, output):
        assert (await raw_request(url, "GET", "/")).status == 401
        page = await raw_request(url, "GET", "/", headers={"Authorization": "Bearer tok"})
        assert page.status == 200
        assert PROMPT.encode() in page.body
        assert f"{url}/?token=..." in output.getvalue()
