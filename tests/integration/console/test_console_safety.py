"""The console as an attacker sees it, through its ASGI app: its own Flow type only, no 500, nothing altered."""

import asyncio
import re
import sqlite3
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from dex_agents.cli.demo import PROMPT
from dex_agents.cli.order_agent import build_order_flow
from dex_agents.domain.errors import DexAgentsError, InvalidInputError
from dex_agents.infrastructure.dex.client import AgentSessionClient, SessionUnavailableError
from dex_agents.infrastructure.dex.session_index import SessionIndex
from dex_agents.testing.probes import wait_until
from tests.integration.console.page_agent import build_page_flow
from tests.integration.console.support import AppStack, AsgiResponse, app_stack, asgi_request

pytestmark = pytest.mark.integration

FORM = {"Content-Type": "application/x-www-form-urlencoded"}

SECURITY_HEADERS = ("content-security-policy", "x-frame-options", "x-content-type-options", "cache-control")


async def _pending(sessions: AgentSessionClient, session_id: str) -> bool:
    return bool((await sessions.get_agent_snapshot(session_id)).pending_interrupts)


async def _csrf(stack: AppStack) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', (await asgi_request(stack.app, "GET", "/")).text)
    assert match is not None
    return match.group(1)


async def _post(stack: AppStack, target: str, fields: dict[str, str] | bytes) -> AsgiResponse:
    body = fields if isinstance(fields, bytes) else urlencode(fields).encode()
    return await asgi_request(stack.app, "POST", target, headers=FORM, body=body)


async def test_a_console_serves_only_the_sessions_of_its_flow_type(tmp_path: Path) -> None:
    async with app_stack(build_page_flow(), build_order_flow(), tmp_path) as stack:
        await stack.others.start_session("order-1", PROMPT)
        await wait_until("the refund's approval", lambda: _pending(stack.others, "order-1"), timeout=60)
        interrupt = (await stack.others.get_agent_snapshot("order-1")).pending_interrupts[0]
        await stack.sessions.start_session("page-1")
        stack.index.record("PageAgent", "order-1")  # what a client of the wrong Flow could have listed
        csrf = await _csrf(stack)

        assert (await asgi_request(stack.app, "GET", "/sessions/page-1")).status == 200
        for target in ("/sessions/order-1", "/sessions/order-1/fragments", "/sessions/order-1/events?from="):
            answer = await asgi_request(stack.app, "GET", target, until=b"\n")
            assert answer.status == 404, target
            assert "refund" not in answer.text
        answer_fields = {
            "csrf": csrf,
            "interrupt_id": interrupt.interrupt_id,
            "call_digest": interrupt.call_digest or "",
            "decision": "approve",
        }
        forms = {
            "approvals": answer_fields,
            "messages": {"csrf": csrf, "text": "hello"},
            "cancel": {"csrf": csrf},
            "withdraw": {"csrf": csrf, "message_id": "m-1"},
        }
        for route, fields in forms.items():
            assert (await _post(stack, f"/sessions/order-1/{route}", fields)).status == 404, route
        after = await stack.others.get_agent_snapshot("order-1")
        assert [i.interrupt_id for i in after.pending_interrupts] == [interrupt.interrupt_id]
        assert after.queued_message_count == 0
        assert (await _post(stack, "/sessions/open", {"csrf": csrf, "session_id": "order-1"})).status == 404

        listed = (await asgi_request(stack.app, "GET", "/")).text
        assert re.search(r'data-session="order-1">.*?<td class="status">unavailable</td>', listed)
        approvals = (await asgi_request(stack.app, "GET", "/approvals")).text
        assert "order-1" not in approvals
        assert "refund_order" not in approvals

        # Starting over another Flow's ID is refused, and the row the client wrote first is taken back.
        assert (await _post(stack, "/sessions", {"csrf": csrf, "session_id": "order-1"})).status == 409
        assert [entry.session_id for entry in stack.index.sessions("PageAgent")] == ["page-1"]


ODD_TARGETS = [
    ("/sessions/%20", 400),
    ("/sessions/%09", 400),
    ("/sessions/%09/fragments", 400),
    ("/sessions/%09/events", 400),
    ("/sessions/%00", 400),
    ("/sessions/%E2%80%AEevil", 400),
    ("/sessions/%1B%5B2J", 400),
    ("/sessions/%ED%A0%80", 400),
    ("/sessions/%FF%FE", 400),
    ("/sessions/x%2Fevents", 400),
    ("/sessions/" + "x" * 600, 400),
    ("/sessions/page-1?after=%C2%B2", 400),
    ("/sessions/page-1?after=-1", 400),
    ("/sessions/page-1?after=99999999999999999999", 400),
    ("/sessions/page-1?after=", 200),
    ("/sessions/page-1?after=7", 200),
    ("/sessions/page-1/events?shown_turns=%C2%B2", 400),
    ("/sessions/page-1/events?shown_turns=1e9", 400),
    ("/sessions/page-1?notice=%ED%A0%80", 400),
    ("/?fragment=%FF", 400),
    ("/approvals?fragment=1", 200),
    ("/static/console.js", 200),
    ("/static/..%2Fapp.py", 400),
    ("/static/nope.js", 404),
    ("/sessions/", 404),
    ("/sessions/open", 404),
    ("/sessions/no-such-session", 404),
    ("/sessions/no-such-session/fragments", 404),
    ("/sessions/no-such-session/events", 404),
    ("/sessions/a/b/c", 404),
    ("/nope", 404),
]


async def test_no_odd_url_answers_500_and_every_answer_carries_the_security_headers(tmp_path: Path) -> None:
    async with app_stack(build_page_flow(), build_order_flow(), tmp_path) as stack:
        await stack.sessions.start_session("page-1")
        csrf = await _csrf(stack)
        for target, status in ODD_TARGETS:
            answer = await asgi_request(stack.app, "GET", target, until=b"\n\n")
            assert answer.status == status, (target, answer.status, answer.text)
            for header in SECURITY_HEADERS:
                assert header in answer.headers, (target, header)
        for route in ("messages", "cancel", "withdraw", "approvals"):
            assert (await _post(stack, f"/sessions/%09/{route}", {"csrf": csrf})).status == 400
            assert (await _post(stack, f"/sessions/%ED%A0%80/{route}", {"csrf": csrf})).status == 400
        assert (await _post(stack, "/sessions/page-1/messages", b"csrf=" + csrf.encode() + b"&text=%FF")).status == 400
        assert (await _post(stack, "/sessions/page-1/messages", b"csrf=x&text=" + b"a" * 1_100_000)).status == 413

        # A resume token Dex calls malformed ends the stream with one problem event (no reconnect loop).
        stream = await asgi_request(stack.app, "GET", "/sessions/page-1/events?from=garbage", until=b"problem")
        assert stream.status == 200
        assert b"event: problem" in stream.body

        async def broken(session_id: str) -> str:
            raise RuntimeError("an unexpected failure")

        stack.sessions.latest_resume_token = broken  # type: ignore[method-assign]
        failed = await asgi_request(stack.app, "GET", "/sessions/page-1")
        assert failed.status == 500
        assert "unexpected failure" not in failed.text
        for header in SECURITY_HEADERS:
            assert header in failed.headers


async def test_forms_reach_the_session_as_sent_and_a_lone_surrogate_is_refused_not_replaced(tmp_path: Path) -> None:
    async with app_stack(build_page_flow(), build_order_flow(), tmp_path) as stack:
        csrf = await _csrf(stack)
        surrogate = b"%ED%A0%80"
        refused = await _post(stack, "/sessions", b"csrf=" + csrf.encode() + b"&session_id=s" + surrogate)
        assert refused.status == 400
        assert stack.index.sessions("PageAgent") == ()
        started = await _post(stack, "/sessions", {"csrf": csrf, "session_id": "page-1", "message": "Fetch the page."})
        assert started.status == 303
        await wait_until("the publish approval", lambda: _pending(stack.sessions, "page-1"), timeout=60)
        for body in (b"&text=" + surrogate, b"&text=x%00y", b"&text=ok" + surrogate):
            answer = await _post(stack, "/sessions/page-1/messages", b"csrf=" + csrf.encode() + body)
            assert answer.status == 400, body
        assert (await stack.sessions.get_agent_snapshot("page-1")).queued_message_count == 0
        reason = await _post(
            stack,
            "/sessions/page-1/approvals",
            b"csrf=" + csrf.encode() + b"&decision=reject&interrupt_id=turn-1.call-2&reason=no" + surrogate,
        )
        assert reason.status == 400
        assert await _pending(stack.sessions, "page-1")
        sent = await _post(stack, "/sessions/page-1/messages", {"csrf": csrf, "text": "  two spaces each side  "})
        assert sent.status == 303
        queued = (await stack.sessions.get_agent_snapshot("page-1")).queued_messages
        assert [message.text for message in queued] == ["  two spaces each side  "]


REFUSED_SESSION_IDS = [
    "",
    " ",
    "\t",
    "\n",
    "x/events",
    "a/b",
    " lead",
    "trail ",
    "a\u202eb",
    "x\x1b[2J",
    "a\x00b",
    "a\ud800b",
    "x" * 513,
    "a\u2028b",
    "\u200b",
]


async def _refused(call: object, session_id: str) -> bool:
    try:
        await call(session_id)  # type: ignore[operator]
    except InvalidInputError as error:
        return error.field == "session_id"
    return False


async def test_session_ids_are_checked_by_the_client_and_quoted_in_every_url(tmp_path: Path) -> None:
    async with app_stack(build_page_flow(), build_order_flow(), tmp_path) as stack:
        sessions = stack.sessions
        for session_id in [*REFUSED_SESSION_IDS, "a$b", "a:b"]:
            with pytest.raises(InvalidInputError) as refused:
                await sessions.start_session(session_id, "Fetch the page.")
            assert isinstance(refused.value, DexAgentsError)
            assert refused.value.field == "session_id"
        assert stack.index.sessions("PageAgent") == ()  # nothing recorded
        calls = {
            "read_agent_event": lambda sid: sessions.read_agent_event(sid, "", long_poll=timedelta(seconds=1)),
            "latest_resume_token": sessions.latest_resume_token,
            "latest_event_time": sessions.latest_event_time,
            "resume_token_before_turn": lambda sid: sessions.resume_token_before_turn(sid, "turn-1"),
            "get_agent_snapshot": sessions.get_agent_snapshot,
            "get_message_count": sessions.get_message_count,
            "get_message_index": sessions.get_message_index,
            "list_agent_messages": sessions.list_agent_messages,
            "describe_session": sessions.describe_session,
            "send_user_message": lambda sid: sessions.send_user_message(sid, "hi"),
            "submit_user_message": lambda sid: sessions.submit_user_message(sid, "hi"),
            "withdraw_user_message": lambda sid: sessions.withdraw_user_message(sid, "m-1"),
            "cancel_turn": sessions.cancel_turn,
            "resolve_interrupt": lambda sid: sessions.resolve_interrupt(sid, "turn-1.call-1", approved=True),
            "wait_until_idle": lambda sid: sessions.wait_until_idle(sid, timeout=1),
            "stop_session": sessions.stop_session,
        }
        for name, call in calls.items():
            for session_id in REFUSED_SESSION_IDS:
                assert await _refused(call, session_id), f"{name}({session_id!r}) was not refused"
        with pytest.raises(SessionUnavailableError):
            await sessions.describe_session("never-started")

        odd = "a?b#c d&e=%41"
        await sessions.start_session(odd, "Fetch the page.")
        await wait_until("the publish approval", lambda: _pending(sessions, odd), timeout=60)
        quoted = quote(odd, safe="")
        listed = (await asgi_request(stack.app, "GET", "/")).text
        assert f'href="/sessions/{quoted}"' in listed
        page = await asgi_request(stack.app, "GET", f"/sessions/{quoted}")
        assert page.status == 200
        assert f'action="/sessions/{quoted}/approvals"' in page.text
        assert f'action="/sessions/{quoted}/messages"' in page.text
        assert f'data-events="/sessions/{quoted}/events?' in page.text
        assert f'data-fragments="/sessions/{quoted}/fragments"' in page.text
        match = re.search(r'name="return_to" value="([^"]+)"', page.text)
        assert match is not None
        assert match.group(1) == f"/sessions/{quoted}"
        interrupt = (await sessions.get_agent_snapshot(odd)).pending_interrupts[0]
        fields = {
            "csrf": await _csrf(stack),
            "interrupt_id": interrupt.interrupt_id,
            "call_digest": interrupt.call_digest or "",
            "decision": "approve",
            "return_to": match.group(1),
        }
        approved = await _post(stack, f"/sessions/{quoted}/approvals", fields)
        assert approved.headers["location"] == f"/sessions/{quoted}?notice=approved"
        for evil in ("//evil.example/", "/\t/evil.example", "/\\evil.example", "https://evil.example/"):
            fields["return_to"] = evil
            answered = await _post(stack, f"/sessions/{quoted}/approvals", fields)
            assert answered.headers["location"] == f"/sessions/{quoted}?notice=not-pending"

        stack.index.record("PageAgent", "x/events")  # listed by an older version that took any ID
        listed = (await asgi_request(stack.app, "GET", "/")).text
        assert 'href="/sessions/x%2Fevents"' in listed
        assert (await asgi_request(stack.app, "GET", "/sessions/x%2Fevents")).status == 400


async def test_the_approvals_page_finds_every_pending_approval_however_many_sessions_are_listed(
    tmp_path: Path,
) -> None:
    async with app_stack(build_page_flow(), build_order_flow(), tmp_path) as stack:
        await stack.sessions.start_session("old-1", "Fetch the page.")
        await wait_until("the publish approval", lambda: _pending(stack.sessions, "old-1"), timeout=60)
        for number in range(210):
            stack.index.record("PageAgent", f"newer-{number}")  # listed after it, never started
        approvals = (await asgi_request(stack.app, "GET", "/approvals")).text
        assert 'href="/sessions/old-1"' in approvals
        listed = (await asgi_request(stack.app, "GET", "/")).text
        assert "The newest 200 of 211 listed sessions" in listed
        assert 'data-session="old-1"' not in listed


async def test_a_locked_index_refuses_a_start_cleanly_while_the_console_keeps_answering(tmp_path: Path) -> None:
    path = tmp_path / "index" / "sessions.sqlite"
    index = SessionIndex(path, busy_timeout=timedelta(seconds=0.5))
    async with app_stack(build_page_flow(), build_order_flow(), tmp_path, index=index) as stack:
        csrf = await _csrf(stack)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        try:
            start = asyncio.create_task(_post(stack, "/sessions", {"csrf": csrf, "session_id": "s-1"}))
            await asyncio.sleep(0.05)
            script = await asgi_request(stack.app, "GET", "/static/console.js")
            assert script.status == 200
            assert not start.done()  # the script did not wait for the index
            listed = await asgi_request(stack.app, "GET", "/")  # readers of a WAL file do not wait for a writer
            assert listed.status == 200
            refused = await start
            assert refused.status == 503
            assert "locked" in refused.text
        finally:
            other.execute("ROLLBACK")
            other.close()
        with pytest.raises(SessionUnavailableError):
            await stack.sessions.describe_session("s-1")  # recorded first, so never started

        # Deleted while the console runs: the next row goes to a new, private file at the same path.
        for leftover in path.parent.iterdir():
            leftover.unlink()
        assert (await _post(stack, "/sessions", {"csrf": csrf, "session_id": "s-2"})).status == 303
        check = sqlite3.connect(path)
        try:
            assert check.execute("SELECT session_id FROM sessions").fetchall() == [("s-2",)]
        finally:
            check.close()
        assert path.stat().st_mode & 0o777 == 0o600
