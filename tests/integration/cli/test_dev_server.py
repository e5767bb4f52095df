"""`dex-agents dev-server`: the dev server on a port until Ctrl-C."""

import asyncio
import io
import re
import signal
import subprocess

import pytest
from rich.console import Console

from dex_agents import AgentSessionFlow
from dex_agents.cli.engine import open_engine
from dex_agents.testing import ScriptedRunner
from tests.integration.cli.support import cli_env, command

pytestmark = pytest.mark.integration


async def test_dev_server_prints_its_address_serves_clients_and_stops_on_ctrl_c() -> None:
    server = await asyncio.create_subprocess_exec(
        *command("dev-server", "--port", "0"),
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdout is not None
    try:
        first = (await asyncio.wait_for(server.stdout.readline(), timeout=30)).decode()
        match = re.fullmatch(r"dev server serving on (127\.0\.0\.1:\d+)\n", first)
        assert match is not None, first
        flow = AgentSessionFlow(ScriptedRunner(), flow_type="Probe")
        async with open_engine(match.group(1), [flow], Console(file=io.StringIO())) as engine:
            assert await engine.client.health_check()
        server.send_signal(signal.SIGINT)
        rest, errors = await asyncio.wait_for(server.communicate(), timeout=30)
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
    assert server.returncode == 0, errors
    assert "stopping the dev server" in rest.decode()
