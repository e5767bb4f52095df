"""The conformance probe against a dev server started from the command line."""

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from tests.integration.cli.support import cli_env, command

pytestmark = pytest.mark.integration


@asynccontextmanager
async def devserver_from_the_command_line(config: dict[str, object] | None = None) -> AsyncIterator[str]:
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dex_agents.devserver",
        "--port",
        "0",
        "--config-json",
        json.dumps(config or {}),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdout is not None
    try:
        address = (await asyncio.wait_for(server.stdout.readline(), timeout=30)).decode().strip()
        yield address
    finally:
        server.terminate()
        await server.wait()


async def _probe(*argv: str) -> tuple[int, list[str]]:
    probe = await asyncio.create_subprocess_exec(
        *argv, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    output, _ = await asyncio.wait_for(probe.communicate(), timeout=240)
    assert probe.returncode is not None
    return probe.returncode, output.decode().splitlines()


async def test_dex_agents_conformance_finds_every_checked_assumption_holding_on_devserver() -> None:
    async with devserver_from_the_command_line() as address:
        code, lines = await _probe(*command("conformance", "--server", address))
    verdicts = [line for line in lines if line.startswith(("holds", "differs", "could not be checked"))]
    assert code == 0, "\n".join(lines)
    assert not [line for line in verdicts if line.startswith("differs")]
    holding = [line for line in verdicts if line.startswith("holds")]
    assert len(holding) >= 12, "\n".join(lines)
    for words in ("died before its first output", "lock through its retry back-off", "closed Flow", "blob offload"):
        assert any(words in line for line in holding), words
    for words in ("over 100 KiB", "rejects a write past its capacity", "RpcLockConflictError", "FlowClosingError"):
        assert any(words in line for line in holding), words
    assert any("history has" in line for line in holding)
    # What steering (after a response of one call, too), withdraw and deadlines rely on.
    for words in ("all_of(for_one, at_most(n))", "at_most(n) alone", "deletes one", "first_attempt_at"):
        assert any(words in line for line in holding), words
    assert any("readable through a Client while that Step still runs" in line for line in holding)


async def test_the_probe_exits_non_zero_and_says_what_it_saw_when_an_assumption_differs() -> None:
    lenient: dict[str, object] = {"stream_max_message_bytes": 10_000_000}
    async with devserver_from_the_command_line(lenient) as address:
        code, lines = await _probe(sys.executable, "-m", "dex_agents.testing.conformance", "--server", address)
    assert code == 1
    assert any(line.startswith("differs: a Stream message over 100 KiB") and "accepted" in line for line in lines)
