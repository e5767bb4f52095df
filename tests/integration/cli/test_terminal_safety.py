"""What the command line prints of hostile model and tool text is visible text, and its approvals are bound and named.

The commands run in-process through click's runner (in a thread: they run
their own event loop), against the dev server and a Worker in this test's loop.
"""

import asyncio
import getpass
import io
from collections.abc import AsyncIterator

import pytest
from click.testing import CliRunner, Result
from rich.console import Console

from dex_agents import AgentSessionClient, AgentSnapshot
from dex_agents.cli.app import cli, main
from dex_agents.cli.engine import Engine, open_engine
from dex_agents.domain.tools import ToolCallStatus
from dex_agents.testing import session_is_idle, wait_for_agent_snapshot
from tests.integration.cli.hostile_agent import RAW, build_hostile_flow

pytestmark = pytest.mark.integration

HOSTILE_FLOW = "tests.integration.cli.hostile_agent:build_hostile_flow"
APPROVAL = "turn-1.call-1"


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    flow = build_hostile_flow()
    async with open_engine(None, [flow], Console(file=io.StringIO())) as running, running.worker():
        running.hostile = running.sessions(flow)  # type: ignore[attr-defined]
        yield running


def _sessions(engine: Engine) -> AgentSessionClient:
    sessions: AgentSessionClient = engine.hostile  # type: ignore[attr-defined]
    return sessions


async def _invoke(*args: str, stdin: str = "") -> Result:
    def invoke() -> Result:
        return CliRunner().invoke(cli, list(args), input=stdin, standalone_mode=False, catch_exceptions=False)

    return await asyncio.wait_for(asyncio.to_thread(invoke), 60)


async def _waiting(sessions: AgentSessionClient, session_id: str) -> AgentSnapshot:
    await sessions.start_session(session_id, "go")
    return await wait_for_agent_snapshot(
        sessions, session_id, lambda s: s if s.pending_interrupts else None, description="the publish approval"
    )


def _assert_visible(text: str, *, streamed: bool = True) -> None:
    for raw in RAW:
        assert raw not in text, f"{raw!r} reached the terminal"
    assert "HIDDEN" in text
    if streamed:
        assert "␛]0;PWNED" in text  # the model's text: shown, not run
        assert "\\x9b31mC1" in text
        assert "\\u202edesrever" in text


async def _outcome(sessions: AgentSessionClient, session_id: str) -> tuple[str | None, ToolCallStatus]:
    snapshot = await wait_for_agent_snapshot(sessions, session_id, session_is_idle, description="the turn's end")
    outcome = next(o for m in snapshot.messages for o in m.tool_outcomes if o.tool_name == "publish")
    return outcome.approver, outcome.status


async def test_watch_shows_escape_sequences_visibly_and_its_approval_names_the_approver_and_binds_the_call(
    engine: Engine,
) -> None:
    sessions = _sessions(engine)
    await _waiting(sessions, "watched")
    result = await _invoke(
        *("watch", "watched", "--server", engine.address, "--flow", HOSTILE_FLOW, "--until-idle"),
        *("--approver", "alice \x1b[31m"),
        stdin=f"approve turn-9.call-9\napprove {APPROVAL}\n",
    )
    assert result.return_value == 0, result.stderr
    _assert_visible(result.stdout + result.stderr)
    # An approval watch never printed is not sent: the person has not seen what it would let run.
    assert "error: approval 'turn-9.call-9' was not shown here, so it is not sent" in result.stdout
    assert f"pending approval {APPROVAL}: publish" in result.stdout  # printed whole when the watch began
    assert f"✓ approved ({APPROVAL}) · by alice ␛[31m" in result.stdout
    assert await _outcome(sessions, "watched") == ("alice \x1b[31m", ToolCallStatus.SUCCEEDED)


async def test_chat_shows_escape_sequences_visibly_and_its_prompt_approval_names_the_os_user(engine: Engine) -> None:
    result = await _invoke("chat", HOSTILE_FLOW, "--session", "chatted", stdin="go\ny\n/quit\n")
    assert result.return_value == 0, result.stderr
    _assert_visible(result.stdout + result.stderr)
    assert f"✓ approved ({APPROVAL}) · by {getpass.getuser()}" in result.stdout


async def test_approve_prints_the_call_it_binds_to_and_a_digest_of_another_call_fails_it(engine: Engine) -> None:
    sessions = _sessions(engine)
    await _waiting(sessions, "approved")
    server = ("--server", engine.address, "--flow", HOSTILE_FLOW)
    result = await _invoke("approve", "approved", APPROVAL, *server)
    assert result.return_value == 0, result.stderr
    _assert_visible(result.stdout, streamed=False)  # JSON arguments: their controls are JSON escapes already
    assert f"approving {APPROVAL}: publish" in result.stdout
    assert await _outcome(sessions, "approved") == (getpass.getuser(), ToolCallStatus.SUCCEEDED)

    await _waiting(sessions, "elsewhere")
    other = "sha256:" + "0" * 64
    result = await _invoke("approve", "elsewhere", APPROVAL, *server, "--approver", "bob", "--call-digest", other)
    assert result.return_value == 0, result.stderr
    assert await _outcome(sessions, "elsewhere") == ("bob", ToolCallStatus.FAILED)  # not the call bob was shown

    await _waiting(sessions, "rejected")
    result = await _invoke("reject", "rejected", APPROVAL, "no \x1b]0;x\x07", *server, "--approver", "carol")
    assert result.return_value == 0, result.stderr
    assert await _outcome(sessions, "rejected") == ("carol", ToolCallStatus.REJECTED)
    assert main(["approve", "x", APPROVAL, *server, "--approver", " "]) == 2  # refused before anything runs
