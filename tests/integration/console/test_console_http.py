"""The console over plain HTTP: the event stream resumes without duplicates; forged requests are refused."""

import html
import json
import re
from pathlib import Path
from urllib.parse import urlencode

import dex
import pytest

from dex_agents.cli.order_agent import build_order_flow
from dex_agents.cli.shop import CHUNK_DELAY_ENV
from dex_agents.console.app import decode_event_id
from dex_agents.domain.errors import InvalidInputError
from dex_agents.domain.events import AgentEventType
from dex_agents.infrastructure.dex.client import AgentSessionClient
from dex_agents.testing.probes import wait_until
from tests.integration.console.page_agent import build_page_flow
from tests.integration.console.support import console_stack, raw_request, read_sse

pytestmark = pytest.mark.integration

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


async def test_a_reconnected_event_stream_goes_on_after_the_last_event_without_repeating_any(tmp_path: Path) -> None:
    async with console_stack(build_page_flow(), tmp_path) as stack:
        await stack.sessions.start_session("page-1", "Fetch the page.")
        # The turn parks at the approval of `publish`: every event up to it is written and retained.
        first = await read_sse(stack.url, "/sessions/page-1/events?from=", count=200, stop="waits for approval")
        assert len(first) >= 6
        assert json.loads(first[-1].data)["type"] == "interrupt_raised"
        ids = [event.id for event in first]
        assert len(set(ids)) == len(ids)

        # A browser reconnects with the id of the last event it got; the stream goes on right after it.
        last_seen = first[2].id
        assert last_seen is not None
        again = await read_sse(
            stack.url,
            "/sessions/page-1/events?from=",
            count=len(first) - 3,
            headers={"Last-Event-ID": last_seen},
        )
        assert [(e.id, e.data) for e in again] == [(e.id, e.data) for e in first[3:]]

        # The id is the event's resume token: ``?from=`` with it reads the same continuation.
        token = decode_event_id(last_seen)
        resumed = await read_sse(stack.url, "/sessions/page-1/events?" + urlencode({"from": token}), count=1)
        assert resumed[0].id == first[3].id


async def test_forms_from_another_site_or_without_the_csrf_token_are_refused(tmp_path: Path) -> None:
    async with console_stack(build_order_flow(), tmp_path) as stack:
        page = await raw_request(stack.url, "GET", "/")
        assert page.status == 200
        assert page.headers["x-frame-options"] == "DENY"
        assert "script-src 'self'" in page.headers["content-security-policy"]
        match = re.search(r'name="csrf" value="([0-9a-f]+)"', page.body.decode())
        assert match is not None
        csrf = match.group(1)
        good = urlencode({"csrf": csrf, "session_id": "s-1", "message": ""}).encode()

        missing = urlencode({"session_id": "s-2"}).encode()
        assert (await raw_request(stack.url, "POST", "/sessions", headers=FORM, body=missing)).status == 403
        forged = urlencode({"csrf": "0" * 64, "session_id": "s-2"}).encode()
        assert (await raw_request(stack.url, "POST", "/sessions", headers=FORM, body=forged)).status == 403
        cross_site = {**FORM, "Sec-Fetch-Site": "cross-site"}
        assert (await raw_request(stack.url, "POST", "/sessions", headers=cross_site, body=good)).status == 403
        other_origin = {**FORM, "Origin": "http://evil.example"}
        assert (await raw_request(stack.url, "POST", "/sessions", headers=other_origin, body=good)).status == 403
        rebound = {**FORM, "Host": "evil.example"}
        assert (await raw_request(stack.url, "POST", "/sessions", headers=rebound, body=good)).status == 403
        assert (await raw_request(stack.url, "GET", "/", headers={"Host": "evil.example"})).status == 403
        assert [entry.session_id for entry in stack.index.sessions("OrderAgent")] == []

        origin = {**FORM, "Origin": stack.url, "Sec-Fetch-Site": "same-origin"}
        started = await raw_request(stack.url, "POST", "/sessions", headers=origin, body=good)
        assert started.status == 303
        assert started.headers["location"] == "/sessions/s-1?notice=started"
        assert [entry.session_id for entry in stack.index.sessions("OrderAgent")] == ["s-1"]


async def test_a_redirect_after_an_answer_stays_inside_the_console(tmp_path: Path) -> None:
    async with console_stack(build_order_flow(), tmp_path) as stack:
        await stack.sessions.start_session("s-1")
        page = await raw_request(stack.url, "GET", "/")
        match = re.search(r'name="csrf" value="([0-9a-f]+)"', page.body.decode())
        assert match is not None
        body = urlencode(
            {
                "csrf": match.group(1),
                "interrupt_id": "turn-1.call-1",
                "decision": "approve",
                "return_to": "//evil.example/",
            }
        ).encode()
        answered = await raw_request(stack.url, "POST", "/sessions/s-1/approvals", headers=FORM, body=body)
        assert answered.status == 303
        assert answered.headers["location"] == "/sessions/s-1?notice=not-pending"


RUNNING_TURN = 13
"""The turn the mid-turn page opens on, after twelve answered ones."""


async def test_a_page_opened_mid_turn_reads_the_running_turn_from_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CHUNK_DELAY_ENV, "0")
    async with console_stack(build_order_flow(), tmp_path) as stack:
        sessions = stack.sessions
        await sessions.start_session("s-1")
        # Answered turns enough for over one page (100) of events: about ten events each, since live deltas
        # are coalesced per Step attempt.
        for turn in range(1, RUNNING_TURN):
            receipt = await sessions.submit_user_message("s-1", "What is order 8?")
            assert (await sessions.wait_for_turn("s-1", receipt, timeout=60)).turn_id == f"turn-{turn}"
        await sessions.send_user_message("s-1", "Refund order 7 and tell the customer.")
        await wait_until("the refund's approval", lambda: _pending(sessions, "s-1"), timeout=60)

        earlier, token = 0, ""
        while True:
            message = await sessions.read_agent_event("s-1", token)
            if message.event.turn_id == f"turn-{RUNNING_TURN}":
                break
            earlier, token = earlier + 1, message.resume_token
        assert earlier > 100  # the first turn's start is not on the newest page

        start = await sessions.resume_token_before_turn("s-1", f"turn-{RUNNING_TURN}")
        assert start == token
        first = await sessions.read_agent_event("s-1", start)
        assert (first.event.type, first.event.turn_id) == (AgentEventType.TURN_STARTED, f"turn-{RUNNING_TURN}")
        assert await sessions.resume_token_before_turn("s-1", "turn-1") == ""  # the oldest retained event
        first_of_all = await sessions.read_agent_event("s-1", "")
        assert (first_of_all.event.type, first_of_all.event.turn_id) == (AgentEventType.TURN_STARTED, "turn-1")

        # The page streams exactly that turn: its first event is the turn's start.
        page = await raw_request(stack.url, "GET", "/sessions/s-1")
        match = re.search(r'data-events="([^"]+)"', page.body.decode())
        assert match is not None
        events_path = html.unescape(match.group(1))
        assert f"shown_turns={RUNNING_TURN - 1}" in events_path
        streamed = await read_sse(stack.url, events_path, count=1)
        assert json.loads(streamed[0].data)["type"] == "turn_started"
        assert json.loads(streamed[0].data)["turn"] == f"turn-{RUNNING_TURN}"


async def _pending(sessions: AgentSessionClient, session_id: str) -> bool:
    return bool((await sessions.get_agent_snapshot(session_id)).pending_interrupts)


async def test_the_index_lists_what_the_client_started_and_shows_a_listed_session_that_does_not_exist(
    tmp_path: Path,
) -> None:
    async with console_stack(build_order_flow(), tmp_path) as stack:
        with pytest.raises(InvalidInputError):
            await stack.sessions.start_session("")  # refused before anything is recorded or started
        await stack.sessions.start_session("s-1")
        with pytest.raises(dex.FlowAlreadyStartedError):
            await stack.sessions.start_session("s-1")
        await stack.sessions.wait_until_idle("s-1", timeout=60)
        stack.index.record("OrderAgent", "never-started")  # what a crash between recording and starting leaves
        assert sorted(entry.session_id for entry in stack.index.sessions("OrderAgent")) == ["never-started", "s-1"]

        page = (await raw_request(stack.url, "GET", "/")).body.decode()
        assert re.search(r'data-session="never-started">.*?<td class="status">unavailable</td>', page)
        assert re.search(r'data-session="s-1">.*?<td class="status">waiting for user message</td>', page)
        assert (await raw_request(stack.url, "GET", "/sessions/never-started")).status == 404


async def _csrf(url: str) -> str:
    page = await raw_request(url, "GET", "/")
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', page.body.decode())
    assert match is not None
    return match.group(1)


async def _post(url: str, path: str, fields: dict[str, str], headers: dict[str, str] | None = None) -> str:
    """POST a form; return the redirect's location (or ``"<status>"`` when there is none)."""
    response = await raw_request(
        url, "POST", path, headers={**FORM, **(headers or {})}, body=urlencode(fields).encode()
    )
    return response.headers.get("location", str(response.status))


async def test_messages_are_queued_withdrawn_and_steered_and_the_turn_cancelled_through_the_forms(
    tmp_path: Path,
) -> None:
    async with console_stack(build_page_flow(), tmp_path) as stack:
        sessions = stack.sessions
        csrf = await _csrf(stack.url)
        await sessions.start_session("idle-1")
        await sessions.wait_until_idle("idle-1", timeout=60)
        assert await _post(stack.url, "/sessions/idle-1/cancel", {"csrf": csrf}) == "/sessions/idle-1?notice=no-turn"
        shown = (await raw_request(stack.url, "GET", "/sessions/idle-1?notice=no-turn")).body.decode()
        assert "No turn is running: there was nothing to cancel." in shown
        assert "Cancel turn" not in shown

        await sessions.start_session("page-1", "Fetch the page.")
        await wait_until("the publish approval", lambda: _pending(sessions, "page-1"), timeout=60)
        assert "Cancel turn" in (await raw_request(stack.url, "GET", "/sessions/page-1")).body.decode()

        # A queued message is listed with its Withdraw form, and withdrawn once.
        queued = {"csrf": csrf, "text": "Later: <b>bold</b>", "delivery": "queue"}
        assert await _post(stack.url, "/sessions/page-1/messages", queued) == "/sessions/page-1?notice=sent"
        page = (await raw_request(stack.url, "GET", "/sessions/page-1")).body.decode()
        assert "Later: &lt;b&gt;bold&lt;/b&gt;" in page
        match = re.search(r'<ul id="queued">.*?name="message_id" value="([0-9a-f]+)"', page)
        assert match is not None
        withdraw = {"csrf": csrf, "message_id": match.group(1)}
        assert await _post(stack.url, "/sessions/page-1/withdraw", withdraw) == "/sessions/page-1?notice=withdrawn"
        assert (await sessions.get_agent_snapshot("page-1")).queued_messages == ()
        assert await _post(stack.url, "/sessions/page-1/withdraw", withdraw) == "/sessions/page-1?notice=not-waiting"
        assert await _post(stack.url, "/sessions/page-1/messages", {**queued, "delivery": "shout"}) == "400"

        # Forged cancels and withdraws do nothing.
        assert await _post(stack.url, "/sessions/page-1/cancel", {"reason": "forged"}) == "403"
        assert await _post(stack.url, "/sessions/page-1/cancel", {"csrf": "0" * 64}) == "403"
        evil = {"Origin": "http://evil.example"}
        assert await _post(stack.url, "/sessions/page-1/cancel", {"csrf": csrf}, evil) == "403"
        assert await _post(stack.url, "/sessions/page-1/withdraw", {"message_id": "m"}) == "403"
        assert await _post(stack.url, "/sessions/page-1/messages", {"text": "x", "delivery": "steer"}) == "403"
        snapshot = await sessions.get_agent_snapshot("page-1")
        assert snapshot.pending_interrupts
        assert snapshot.state is not None
        assert snapshot.state.active_turn_id == "turn-1"

        # A steered message waits for the turn's next model call (the turn is parked at an approval).
        steer = {"csrf": csrf, "text": "Keep it short.", "delivery": "steer"}
        assert await _post(stack.url, "/sessions/page-1/messages", steer) == "/sessions/page-1?notice=steered"
        waiting = (await sessions.get_agent_snapshot("page-1")).queued_messages
        assert [(m.text, m.delivery.value) for m in waiting] == [("Keep it short.", "steer")]

        cancel = {"csrf": csrf, "reason": "Not <i>today</i>."}
        assert await _post(stack.url, "/sessions/page-1/cancel", cancel) == "/sessions/page-1?notice=cancel-requested"
        updates = [
            json.loads(e.data)
            for e in await read_sse(stack.url, "/sessions/page-1/events?from=", count=500, stop="cancelled by")
        ]
        assert updates[-1]["type"] == "turn_cancelled"
        assert updates[-1]["text"] == "turn-1 cancelled by a person: Not <i>today</i>.; 2 tool calls of it had ended"
        steered = await read_sse(stack.url, "/sessions/page-1/events?from=", count=500, stop="steered message")
        assert json.loads(steered[-1].data)["type"] == "user_message_steered"
        assert json.loads(steered[-1].data)["text"].endswith(": Keep it short.")
        await wait_until(
            "the steered message stored", lambda: _stored(sessions, "page-1", "Keep it short."), timeout=60
        )


async def _stored(sessions: AgentSessionClient, session_id: str, text: str) -> bool:
    return any(m.text == text for m in (await sessions.get_agent_snapshot(session_id)).messages)
