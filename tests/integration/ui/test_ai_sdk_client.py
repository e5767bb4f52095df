"""The chat backend driven by the real client: the pinned ``ai`` 7.x package's AbstractChat in Node.

One Node process runs every scenario of ``chat_client.mjs`` against one
backend on the demo's order agent: plain chat, an approval, a rejection,
dropped connections resumed with ``resumeStream``, a reloaded page hydrated
from ``…/messages``, and refused bodies. This side then checks what the
session and the shop hold.
"""

import asyncio
import json
from pathlib import Path

import pytest

from dex_agents.cli.order_agent import build_order_flow
from dex_agents.cli.shop import read_refunds
from dex_agents.domain.session import AgentStatus
from tests.integration.ui.support import AI_MODULE, chat_stack, node_command

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("chat_client.mjs")
SCENARIOS = ("plain", "approval", "rejection", "resume", "refused")


async def test_the_ai_sdk_chat_client_drives_sessions_through_every_scenario(shop: Path) -> None:
    async with chat_stack(build_order_flow()) as stack:
        process = await asyncio.create_subprocess_exec(
            *node_command(str(SCRIPT), stack.url, str(AI_MODULE)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 240)
        results = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
        assert process.returncode == 0, f"{results}\n{err.decode()[-3000:]}"
        assert [result["scenario"] for result in results] == list(SCENARIOS)
        assert all(result["ok"] for result in results)

        # Approved refunds ran once each (chat-approve, chat-resume-approval); the rejected ones never ran.
        assert len(read_refunds(shop)) == 2
        for session_id in ("chat-approve", "chat-reject", "chat-resume", "chat-resume-approval"):
            snapshot = await stack.sessions.get_agent_snapshot(session_id)
            assert snapshot.state is not None
            assert snapshot.state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
            assert snapshot.state.last_turn_error is None
        # The reloaded page's turn still waits for its approval: the dropped and resumed streams changed nothing.
        reload = await stack.sessions.get_agent_snapshot("chat-reload")
        assert [interrupt.tool_name for interrupt in reload.pending_interrupts] == ["refund_order"]
