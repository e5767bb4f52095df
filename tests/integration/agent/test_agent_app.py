"""`open_agent_app`: the README's five-line application, run as pasted, and what the helper refuses."""

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dex_agents import open_agent_app
from dex_agents.cli.order_agent import build_order_flow
from dex_agents.devserver import DevServer

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[3] / "README.md"
MARKER = "<!-- five-line app: tests/integration/agent/test_agent_app.py runs this block -->"


def readme_block() -> str:
    text = README.read_text()
    found = re.search(re.escape(MARKER) + r"\n```python\n(.*?)```", text, re.DOTALL)
    assert found is not None, "the README's five-line app block"
    return found.group(1)


async def test_the_readmes_five_line_app_runs_as_pasted(tmp_path: Path) -> None:
    block = readme_block()
    lines = block[block.index("async with open_agent_app") :].split("\n\n")[0].splitlines()
    assert len(lines) == 5, lines
    async with DevServer() as fake:
        program = block.replace("127.0.0.1:8801", fake.address)
        state = {"DEX_AGENTS_DEMO_STATE": str(tmp_path), "DEX_AGENTS_DEMO_CHUNK_DELAY": "0"}
        result = await _run(program, state)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "Order 8 (a rain jacket, 89.00 EUR) is shipped."


async def _run(program: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        program,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return subprocess.CompletedProcess([], process.returncode or 0, out.decode(), err.decode())


async def test_open_agent_app_refuses_what_cannot_work_and_an_unreachable_server() -> None:
    flow = build_order_flow()
    with pytest.raises(ValueError, match="at least one Flow"):
        async with open_agent_app([], server_address="127.0.0.1:1"):
            pass
    with pytest.raises(ValueError, match="its own flow_type"):
        async with open_agent_app([flow, build_order_flow()], server_address="127.0.0.1:1"):
            pass
    with pytest.raises(ConnectionError, match=r"cannot reach Dex at 127\.0\.0\.1:1"):
        async with open_agent_app([flow], server_address="127.0.0.1:1"):
            pass


async def test_a_client_only_app_drives_sessions_a_worker_app_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEX_AGENTS_DEMO_STATE", str(tmp_path))
    monkeypatch.setenv("DEX_AGENTS_DEMO_CHUNK_DELAY", "0")
    worker_flow, client_flow = build_order_flow(), build_order_flow()
    async with (
        DevServer() as fake,
        open_agent_app([worker_flow], server_address=fake.address, workers=2) as serving,
        open_agent_app([client_flow], server_address=fake.address, workers=0) as app,
    ):
        assert len(serving.workers) == 2
        assert app.workers == ()
        sessions = app.sessions(client_flow)
        with pytest.raises(ValueError, match="not one of this app's Flows"):
            app.sessions(worker_flow)
        await sessions.start_session("s-1")
        receipt = await sessions.submit_user_message("s-1", "Hello")
        result = await sessions.wait_for_turn("s-1", receipt, timeout=60)
        assert "scripted model" in (result.reply or "")
