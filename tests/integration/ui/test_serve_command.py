"""``dex-agents serve`` as the command runs it: ``--demo`` serves the order agent's sessions (and a page)."""

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dex_agents.cli.errors import UsageError
from dex_agents.cli.serve import run_serve
from tests.integration.console.support import raw_request, running_command
from tests.integration.ui.support import EXAMPLE

pytestmark = pytest.mark.integration


def running_serve(**settings: object) -> contextlib.AbstractAsyncContextManager[tuple[str, io.StringIO]]:
    return running_command(run_serve, **settings)


def sse_parts(body: bytes) -> list[dict[str, Any]]:
    lines = [line.removeprefix("data: ") for line in body.decode().splitlines() if line.startswith("data: {")]
    return [json.loads(line) for line in lines]


async def test_serve_demo_answers_a_chat_message_and_hydrates_it(shop: Path) -> None:
    settings = {"server": None, "flow_target": None, "demo": True, "port": 0, "api_path": "/api/chat"}
    async with running_serve(**settings, static=EXAMPLE, serve_worker=False) as (url, output):
        assert f"dex-agents serve: {url}/api/chat" in output.getvalue()
        message = {"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
        body = json.dumps({"id": "serve-1", "trigger": "submit-message", "messages": [message]}).encode()
        answer = await raw_request(url, "POST", "/api/chat", headers={"Content-Type": "application/json"}, body=body)
        assert answer.status == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        assert answer.headers["x-vercel-ai-ui-message-stream"] == "v1"
        parts = sse_parts(answer.body)
        assert parts[0] == {"type": "start", "messageId": "assistant-turn-1"}
        assert parts[-1] == {"type": "finish", "finishReason": "stop"}
        assert "data: [DONE]" in answer.body.decode()
        hydrated = await raw_request(url, "GET", "/api/chat/serve-1/messages")
        assert [m["id"] for m in json.loads(hydrated.body)] == ["m-1", "assistant-turn-1"]
        page = await raw_request(url, "GET", "/")
        assert page.status == 200
        assert b"dex-agents chat" in page.body


async def test_serve_needs_demo_or_a_server_and_a_flow() -> None:
    with pytest.raises(UsageError, match="--demo"):
        await run_serve(
            Console(file=io.StringIO()),
            server=None,
            flow_target=None,
            demo=False,
            port=0,
            api_path="/api/chat",
            static=None,
            serve_worker=False,
        )
