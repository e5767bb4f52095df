"""`dex-agents dev-server`: the dev server on a port until Ctrl-C."""

import asyncio
import io
import re
import signal
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from dex_agents import AgentSessionFlow
from dex_agents.cli.engine import open_engine
from dex_agents.infrastructure.dex.container import free_loopback_address
from dex_agents.testing import ScriptedRunner, session_is_idle, wait_for_agent_snapshot
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


async def _start(*args: str) -> tuple[asyncio.subprocess.Process, list[str]]:
    """Start ``dex-agents dev-server ARGS`` and return it with its first two lines (address, data)."""
    server = await asyncio.create_subprocess_exec(
        *command("dev-server", *args), env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert server.stdout is not None
    lines = [(await asyncio.wait_for(server.stdout.readline(), timeout=60)).decode() for _ in range(2)]
    if not lines[0].startswith("dev server serving on"):
        server.kill()
        _, errors = await server.communicate()
        raise AssertionError(f"{lines} {errors.decode()}")
    return server, lines


async def _kill(server: asyncio.subprocess.Process) -> None:
    if server.returncode is None:
        server.kill()
        await server.wait()


async def test_dev_server_keeps_sessions_in_its_data_dir_across_a_sigkill_and_rebinds_its_port_at_once(
    tmp_path: Path,
) -> None:
    port = free_loopback_address().rpartition(":")[2]
    address = f"127.0.0.1:{port}"
    data = tmp_path / "data"
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="Kept")
    server, lines = await _start("--port", port, "--data", str(data))
    try:
        assert lines[0] == f"dev server serving on {address}\n"
        assert f"data in {data}" in lines[1]
        async with open_engine(address, [flow], Console(file=io.StringIO())) as engine, engine.worker():
            sessions = engine.sessions(flow)
            await sessions.start_session("kept", "hello")
            await wait_for_agent_snapshot(sessions, "kept", session_is_idle, description="the turn to end")
            await _kill(server)
            server, lines = await _start("--port", port, "--data", str(data))  # the same port, at once
            assert "1 runs read back" in lines[1]
            snapshot = await wait_for_agent_snapshot(
                sessions,
                "kept",
                session_is_idle,
                description="the session after the restart",
                timeout=60,
                across_restarts=True,
            )
            assert snapshot.state is not None
            assert snapshot.state.turn_count == 1
    finally:
        await _kill(server)


async def test_dev_server_keeps_its_data_per_port_under_the_state_dir_by_default_and_nothing_in_memory(
    tmp_path: Path, state_home: Path
) -> None:
    port = free_loopback_address().rpartition(":")[2]
    server, lines = await _start("--port", port)
    await _kill(server)
    default = state_home / "dex-agents" / "dev" / port
    assert f"data in {default}" in lines[1]
    assert (default / "dev.sqlite3").exists()
    server, lines = await _start("--port", port, "--in-memory")
    await _kill(server)
    assert "in memory (--in-memory): every session is gone when it stops" in lines[1]


async def test_dev_server_refuses_a_data_dir_another_one_uses_and_both_data_choices_at_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server, _ = await _start("--port", "0", "--data", str(data))
    try:
        second = await asyncio.create_subprocess_exec(
            *command("dev-server", "--port", "0", "--data", str(data)),
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        _, errors = await asyncio.wait_for(second.communicate(), timeout=60)
    finally:
        await _kill(server)
    assert second.returncode == 1
    assert f"another dev server uses the data dir {data} (pid {server.pid})" in " ".join(errors.decode().split())
    both = await asyncio.create_subprocess_exec(
        *command("dev-server", "--data", str(data), "--in-memory"), env=cli_env(), stderr=subprocess.PIPE
    )
    _, errors = await asyncio.wait_for(both.communicate(), timeout=60)
    assert both.returncode != 0
    assert "--data and --in-memory exclude each other" in errors.decode()
