"""The console's parts without a server: live updates, escaping, loopback names."""

from datetime import UTC, datetime

import pytest

from dex_agents.console import html as views
from dex_agents.console.app import decode_event_id, encode_event_id
from dex_agents.console.live import live_update, skip_event
from dex_agents.console.security import is_loopback
from dex_agents.domain.events import (
    AgentEvent,
    SteeredLanding,
    text_delta,
    tool_call_finished,
    turn_cancelled,
    turn_committed,
    user_message_steered,
)
from dex_agents.domain.messages import AgentMessage, AgentUserMessage, MessageDelivery, MessageRole
from dex_agents.domain.session import AgentState
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.domain.tools import ToolCallStatus
from dex_agents.domain.usage import AgentUsage
from tests.builders import make_interrupt


def _event(body: object, *, turn: str | None = "turn-2", step: str = "RunModel-4", attempt: int = 1) -> AgentEvent:
    return AgentEvent.enveloped(body, turn_id=turn, step_execution_id=step, attempt=attempt)  # type: ignore[arg-type]


def test_text_of_one_step_execution_shares_a_block_whatever_the_attempt_and_names_its_attempt() -> None:
    first = live_update(_event(text_delta("Hel"), attempt=1))
    retry = live_update(_event(text_delta("Hello"), attempt=2))
    other_step = live_update(_event(text_delta("x"), step="RunModel-5"))
    assert first["block"] == retry["block"] == "turn-2|RunModel-4|text"
    assert (first["attempt"], retry["attempt"]) == (1, 2)
    assert other_step["block"] != first["block"]


def test_a_finished_tool_call_and_a_committed_turn_ask_the_page_to_refresh() -> None:
    finished = live_update(_event(tool_call_finished("call-1", "refund_order", ToolCallStatus.SUCCEEDED)))
    assert finished == {
        "type": "tool_call_finished",
        "turn": "turn-2",
        "step": "RunModel-4",
        "attempt": 1,
        "refresh": True,
        "kind": "tool",
        "call": "call-1",
        "tool": "refund_order",
        "status": "succeeded",
    }
    committed = live_update(_event(turn_committed(failed_with=None, message_count=5)))
    assert committed["kind"] == "committed"
    assert committed["refresh"] is True


def test_events_of_turns_the_page_shows_committed_are_skipped() -> None:
    assert skip_event(_event(text_delta("a"), turn="turn-2"), shown_turns=2)
    assert not skip_event(_event(text_delta("a"), turn="turn-3"), shown_turns=2)
    assert not skip_event(_event(text_delta("a"), turn=None), shown_turns=2)


def test_every_value_is_escaped_unless_it_is_markup_built_by_the_console() -> None:
    hostile = '<script>alert("x")</script>\'&'
    assert views.esc(hostile) == "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#x27;&amp;"
    assert views.render("<p>{v}</p>", v=hostile) == f"<p>{views.esc(hostile)}</p>"
    assert views.render("<p>{v}</p>", v=views.Markup("<b>ok</b>")) == "<p><b>ok</b></p>"


def test_a_transcript_shows_message_text_escaped() -> None:
    message = AgentMessage(
        sequence=1, turn_id="turn-1", role=MessageRole.USER, framework_item="{}", text="<img src=x onerror=alert(1)>"
    )
    shown = views.transcript("s-1", [message], after=0, next_after=None, page_size=50)
    assert "<img" not in shown
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown


def test_event_ids_round_trip_any_resume_token() -> None:
    for token in ("", "abc", "line\nbreak\r\x00", "ünï/+="):
        encoded = encode_event_id(token)
        assert "\n" not in encoded
        assert decode_event_id(encoded) == token
    assert decode_event_id("%%%not base64") == ""


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.20", False),
        ("example.org", False),
    ],
)
def test_loopback_hosts_are_recognised(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_transcript_page_links_the_pages_before_and_after_it() -> None:
    shown = views.transcript("s 1", [], after=60, next_after=110, page_size=50)
    assert '<a href="/sessions/s%201?after=10">earlier</a>' in shown
    assert '<a href="/sessions/s%201?after=110">later</a>' in shown
    first = views.transcript("s", [], after=0, next_after=None, page_size=50)
    assert "earlier" not in first
    assert "later" not in first


def test_a_session_id_is_escaped_in_text_and_quoted_in_links() -> None:
    row = views.SessionRow(
        session_id='"><script>x</script>', status="s", turn_count=1, pending_approvals=0, last_activity=None
    )
    shown = views.sessions_table([row])
    assert "<script>" not in shown
    assert 'href="/sessions/%22%3E%3Cscript%3Ex%3C%2Fscript%3E"' in shown


def _snapshot(
    *, running: bool, queued: tuple[AgentUserMessage, ...] = (), steered: tuple[AgentUserMessage, ...] = ()
) -> AgentSnapshot:
    state = AgentState(turn_count=1, active_turn_id="turn-1" if running else None)
    return AgentSnapshot(
        state=state,
        messages=(),
        pending_interrupts=(),
        tool_calls=(),
        usage=AgentUsage(),
        queued_message_count=len(queued),
        queued_messages=queued,
        steered_messages=steered,
    )


def test_the_cancel_form_shows_only_while_a_turn_runs() -> None:
    running = views.panel("s 1", _snapshot(running=True), csrf="c" * 64)
    assert '<form method="post" action="/sessions/s%201/cancel" id="cancel"' in running
    assert 'name="reason"' in running
    assert 'name="csrf" value="' + "c" * 64 in running
    assert "Cancel turn" in running
    idle = views.panel("s 1", _snapshot(running=False), csrf="c" * 64)
    assert "/cancel" not in idle
    assert "Cancel turn" not in idle


def test_waiting_messages_are_listed_escaped_each_with_a_withdraw_form() -> None:
    hostile = "<script>alert(1)</script>"
    queued = (
        AgentUserMessage(text=hostile, client_message_id="m-1"),
        AgentUserMessage(text="Shorter, please", client_message_id="m-2", delivery=MessageDelivery.STEER),
    )
    taken = (AgentUserMessage(text="<b>in</b>", client_message_id="m-0", delivery=MessageDelivery.STEER),)
    shown = views.panel("s-1", _snapshot(running=True, queued=queued, steered=taken), csrf="c" * 64)
    assert hostile not in shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown
    assert shown.count('action="/sessions/s-1/withdraw"') == 2
    assert '<input type="hidden" name="message_id" value="m-1">' in shown
    assert '<span class="delivery">steer</span> · <span class="text">Shorter, please</span>' in shown
    assert '<ul id="steered"><li>&lt;b&gt;in&lt;/b&gt;</li></ul>' in shown


def test_the_message_box_offers_queue_by_default_and_steer() -> None:
    form = views.session_actions("s-1", csrf="c" * 64)
    assert '<input type="radio" name="delivery" value="queue" checked>' in form
    assert '<input type="radio" name="delivery" value="steer">' in form


def test_a_steered_message_is_a_note_of_the_turn_it_joined() -> None:
    joined = live_update(_event(user_message_steered("m-1", "<i>now</i>", SteeredLanding.RUNNING_TURN)))
    assert joined["kind"] == "note"
    assert joined["turn"] == "turn-2"
    assert joined["text"] == "steered message joined turn-2: its next model call sees it: <i>now</i>"
    assert joined["refresh"] is True
    new_turn = live_update(_event(user_message_steered("m-1", "x", SteeredLanding.NEW_TURN), turn="turn-3"))
    assert "starts turn-3" in str(new_turn["text"])


def test_a_cancelled_turn_is_a_lasting_note_with_the_reason() -> None:
    update = live_update(_event(turn_cancelled("Wrong order", finished_tool_calls=1)))
    assert update["kind"] == "lasting"
    assert update["style"] == "cancelled"
    assert update["text"] == "turn-2 cancelled by a person: Wrong order; 1 tool call of it had ended"
    assert update["refresh"] is True
    silent = live_update(_event(turn_cancelled(None, finished_tool_calls=0)))
    assert silent["text"] == "turn-2 cancelled by a person (no reason given); 0 tool calls of it had ended"


def test_invisible_and_bidi_characters_show_as_marks_on_pages_and_in_live_updates() -> None:
    interrupt = make_interrupt(
        "call-1",
        "transfer",
        '{"to": "alice\u202e001$\u202c", "note": "\x1b[8mhidden"}',
        raised_at=datetime.now(UTC),
    )
    form = views.approval_form("s-1", interrupt, csrf="c" * 64, return_to="/approvals")
    assert "\u202e" not in form
    assert "alice\\u202e001$\\u202c" in form
    update = live_update(_event(text_delta("\x1b]0;PWNED\x07 \u2066x\u2069")))
    assert update["text"] == "␛]0;PWNED␇ \\u2066x\\u2069"
