"""Escaping and the console's HTML: every value is escaped unless it is `Markup` built here.

Pages are plain server-rendered HTML. `render` formats a template whose
arguments are escaped (`html.escape`, quotes included) unless they are
`Markup`; templates are literals in this module and the two it is built on
(`markup`: escaping and the page shell; `interrupt_forms`: the approval and
result forms), so text from a session
(messages, tool arguments and outputs, errors, reasons) can only ever reach
the page escaped, its controls and bidi overrides shown as visible marks. The
page script (``static/console.js``, served with its stylesheet from the
package's files) inserts live text with ``textContent`` only, and the
Content-Security-Policy (`dex_agents.console.security`) allows no inline
script, as a second line.
"""

from collections.abc import Sequence
from datetime import datetime
from urllib.parse import quote, urlencode

import attrs

from dex_agents.console.interrupt_forms import approval_form as approval_form
from dex_agents.console.interrupt_forms import approval_list as approval_list
from dex_agents.console.interrupt_forms import approvals_page as approvals_page
from dex_agents.console.interrupt_forms import pending_form as pending_form
from dex_agents.console.interrupt_forms import result_form as result_form
from dex_agents.console.markup import Markup as Markup
from dex_agents.console.markup import csrf_field as csrf_field
from dex_agents.console.markup import esc as esc
from dex_agents.console.markup import join as join
from dex_agents.console.markup import page as page
from dex_agents.console.markup import render as render
from dex_agents.console.markup import session_path as session_path
from dex_agents.console.markup import when as when
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.domain.tools import AgentToolCall, ToolOutcome
from dex_agents.domain.usage import AgentUsage


@attrs.frozen(kw_only=True)
class SessionRow:
    """One line of the sessions page."""

    session_id: str
    status: str
    turn_count: int | None
    pending_approvals: int | None
    last_activity: datetime | None
    error: str | None = None


def sessions_table(rows: Sequence[SessionRow], *, total: int | None = None) -> Markup:
    """The sessions table (also fetched by the page script every 5 seconds); says so when ``total`` is more."""
    lines = join(
        render(
            '<tr data-session="{sid}"><td><a href="/sessions/{qsid}">{sid}</a></td><td class="status">{status}</td>'
            "<td>{turns}</td><td>{approvals}</td><td>{activity}</td><td class=error>{error}</td></tr>",
            sid=row.session_id,
            qsid=quote(row.session_id, safe=""),
            status=row.status,
            turns="-" if row.turn_count is None else row.turn_count,
            approvals="-" if row.pending_approvals is None else row.pending_approvals,
            activity=when(row.last_activity),
            error=row.error or "",
        )
        for row in rows
    )
    more = Markup("")
    if total is not None and total > len(rows):
        note = '<p class="muted" id="more-sessions">The newest {shown} of {total} listed sessions; open an older one'
        more = render(note + " by its ID below.</p>", shown=len(rows), total=total)
    table = (
        render(
            '<table id="sessions"><thead><tr><th>Session</th><th>Status</th><th>Turns</th>'
            "<th>Pending approvals</th><th>Last activity</th><th></th></tr></thead><tbody>{lines}</tbody></table>",
            lines=lines,
        )
        if rows
        else Markup('<p class="muted" id="sessions">No sessions yet.</p>')
    )
    return join([table, more])


def sessions_page(
    rows: Sequence[SessionRow],
    *,
    total: int | None = None,
    csrf: str,
    flow_type: str,
    suggested_message: str,
    notice: str | None,
) -> Markup:
    """The sessions of the Flow type, and the forms to start or open one; the page script keeps the table current."""
    body = render(
        '<h1>Sessions</h1><div id="session-list" data-poll="/?fragment=1" data-poll-ms="5000">{table}</div>'
        '<section><h2>Start a session</h2><form method="post" action="/sessions" id="start">{csrf}'
        '<p><label>Session ID <input name="session_id" placeholder="(a new ID)"></label></p>'
        '<p><textarea name="message" placeholder="First message (optional)">{message}</textarea></p>'
        '<button type="submit">Start</button></form></section>'
        '<section><h2>Open a session by ID</h2><form method="post" action="/sessions/open" id="open">{csrf}'
        '<input name="session_id" required> <button type="submit">Open</button>'
        '<span class="muted"> adds a session started elsewhere to this list</span></form></section>',
        table=sessions_table(rows, total=total),
        csrf=csrf_field(csrf),
        message=suggested_message,
    )
    return page("Sessions", body, flow_type=flow_type, notice=notice)


def usage_text(usage: AgentUsage) -> str:
    """The session's usage in one line."""
    return (
        f"{usage.model_calls} model calls, {usage.input_tokens} input tokens, {usage.output_tokens} output tokens"
        + (f", {usage.cached_input_tokens} cached" if usage.cached_input_tokens else "")
        + (f", {usage.reasoning_tokens} reasoning" if usage.reasoning_tokens else "")
    )


def tool_call_rows(calls: Sequence[AgentToolCall]) -> Markup:
    """The active turn's tool calls: effect, status, attempts, output or error."""
    if not calls:
        return Markup("")
    rows = join(
        render(
            '<tr data-call="{call}"><td>{tool}</td><td>{effect}</td><td class="status">{status}</td><td>{attempts}</td>'
            "<td><pre>{result}</pre></td></tr>",
            call=call.tool_call_id,
            tool=call.tool_name,
            effect=call.policy.effect.value,
            status=call.status.value,
            attempts=call.attempts,
            result=call.output or call.error or call.rejection_message or "",
        )
        for call in calls
    )
    return render(
        '<h2>Tool calls of the running turn</h2><table id="tool-calls"><thead><tr><th>Tool</th><th>Effect</th>'
        "<th>Status</th><th>Attempts</th><th>Output</th></tr></thead><tbody>{rows}</tbody></table>",
        rows=rows,
    )


def turn_controls(session_id: str, snapshot: AgentSnapshot, *, csrf: str) -> Markup:
    """The running turn's Cancel form (only while a turn runs) and the waiting messages, each with Withdraw.

    Part of the state panel, so the page's script keeps it current.
    """
    state = snapshot.state
    qsid = quote(session_id, safe="")
    cancel = Markup("")
    if state is not None and state.active_turn_id is not None:
        cancel = render(
            '<form method="post" action="/sessions/{qsid}/cancel" id="cancel" class="cancel">{csrf}'
            '<input name="reason" placeholder="Reason (optional, sent to the model)"> '
            '<button type="submit">Cancel turn</button> <span class="muted">stops {turn} at its next safe '
            "boundary; a running tool finishes and its result is kept</span></form>",
            qsid=qsid,
            csrf=csrf_field(csrf),
            turn=state.active_turn_id,
        )
    waiting = join(
        render(
            '<li data-message="{mid}"><span class="delivery">{delivery}</span> · <span class="text">{text}</span> '
            '<form method="post" action="/sessions/{qsid}/withdraw" class="inline withdraw">{csrf}'
            '<input type="hidden" name="message_id" value="{mid}">'
            '<button type="submit">Withdraw</button></form></li>',
            mid=message.message_id or "",
            delivery=message.delivery.value,
            text=message.text,
            qsid=qsid,
            csrf=csrf_field(csrf),
        )
        if message.message_id
        else render(
            '<li><span class="delivery">{delivery}</span> · <span class="text">{text}</span></li>',
            delivery=message.delivery.value,
            text=message.text,
        )
        for message in snapshot.queued_messages
    )
    queued = render('<h2>Waiting messages</h2><ul id="queued">{items}</ul>', items=waiting) if waiting else Markup("")
    taken = join(render("<li>{text}</li>", text=message.text) for message in snapshot.steered_messages)
    steered = (
        render(
            '<h2>Steered into the running turn</h2><ul id="steered">{items}</ul>'
            '<p class="muted">Its next model call sees them.</p>',
            items=taken,
        )
        if taken
        else Markup("")
    )
    return join([cancel, queued, steered])


def panel(session_id: str, snapshot: AgentSnapshot, *, csrf: str) -> Markup:
    """The session's state: status, turns, usage, pending approvals, turn controls, the running turn's tool calls."""
    state = snapshot.state
    approvals = join(
        pending_form(session_id, interrupt, csrf=csrf, return_to=session_path(session_id))
        for interrupt in snapshot.pending_interrupts
    )
    return render(
        '<p>Status <span class="status" id="status">{status}</span> · turns <span id="turns">{turns}</span>'
        " · queued messages {queued}{cancelled}{error}</p>"
        '<p class="muted">Usage: <span id="usage">{usage}</span></p>'
        '<div id="pending">{approvals}</div>{controls}{tools}',
        status="starting" if state is None else state.status.value.replace("_", " "),
        turns=0 if state is None else state.turn_count,
        queued=snapshot.queued_message_count,
        cancelled=Markup(' · <span id="last-cancelled">last turn cancelled</span>')
        if state is not None and state.last_turn_cancelled
        else Markup(""),
        error=render(' · <span class="error">last turn failed: {e}</span>', e=state.last_turn_error)
        if state is not None and state.last_turn_error
        else Markup(""),
        usage=usage_text(snapshot.usage),
        approvals=approvals,
        controls=turn_controls(session_id, snapshot, csrf=csrf),
        tools=tool_call_rows(snapshot.tool_calls),
    )


def _outcome(outcome: ToolOutcome) -> Markup:
    extra = [f"{outcome.attempts} attempt{'s' if outcome.attempts != 1 else ''}"]
    if outcome.approval is not None:
        extra.append(f"approval {outcome.approval.value}" + (f" by {outcome.approver}" if outcome.approver else ""))
    if outcome.rejection_message:
        extra.append(f"reason: {outcome.rejection_message}")
    if outcome.error:
        extra.append(f"error: {outcome.error}")
    return render(
        '<li class="outcome" data-call="{call}">{tool} · {effect} · <b>{status}</b> · {extra}</li>',
        call=outcome.tool_call_id,
        tool=outcome.tool_name,
        effect=outcome.effect.value,
        status=outcome.status.value,
        extra="; ".join(extra),
    )


def transcript(
    session_id: str, messages: Sequence[AgentMessage], *, after: int, next_after: int | None, page_size: int
) -> Markup:
    """One page of stored messages, with links to the pages before and after it."""
    items = join(
        render(
            '<div class="msg {role}" data-sequence="{seq}"><div class="role">#{seq} {turn} · {role}{tool}</div>'
            "{text}{outcomes}</div>",
            role=message.role.value,
            seq=message.sequence,
            turn=message.turn_id,
            tool=f" · {message.tool_name}" if message.tool_name else "",
            text=message.text or "",
            outcomes=render("<ul>{items}</ul>", items=join(_outcome(o) for o in message.tool_outcomes))
            if message.tool_outcomes
            else Markup(""),
        )
        for message in messages
    )
    links: list[Markup] = []
    qsid = quote(session_id, safe="")
    if after > 0:
        earlier = max(0, after - page_size)
        links.append(render('<a href="/sessions/{qsid}?after={a}">earlier</a>', qsid=qsid, a=earlier))
    if next_after is not None:
        links.append(render('<a href="/sessions/{qsid}?after={a}">later</a>', qsid=qsid, a=next_after))
    nav = render('<p class="muted">{links}</p>', links=Markup(" · ".join(links))) if links else Markup("")
    return join([nav, items or Markup('<p class="muted">No messages yet.</p>'), nav])


def session_actions(session_id: str, *, csrf: str) -> Markup:
    """The message box: queue the message for the next turn (the default), or steer the running turn with it.

    Cancel and the waiting messages' Withdraw buttons are in the state panel (`turn_controls`), which the page's
    script keeps current.
    """
    return render(
        '<form method="post" action="/sessions/{qsid}/messages" id="send">{csrf}'
        '<textarea name="text" placeholder="Message to the session"></textarea>'
        '<p><label><input type="radio" name="delivery" value="queue" checked> Queue</label> '
        '<span class="muted">(starts the next turn once the running one ends)</span> '
        '<label><input type="radio" name="delivery" value="steer"> Steer</label> '
        '<span class="muted">(joins the running turn at its next model call)</span></p>'
        '<p><button type="submit">Send</button></p></form>',
        qsid=quote(session_id, safe=""),
        csrf=csrf_field(csrf),
    )


@attrs.frozen(kw_only=True)
class LiveStart:
    """Where a session page's live stream starts."""

    resume_token: str
    """The event stream position to read after."""
    shown_turns: int
    """The turns the page shows committed: their events are not drawn again."""


def session_page(  # noqa: PLR0913 - the page's parts, by keyword
    session_id: str,
    snapshot: AgentSnapshot,
    *,
    messages: Markup,
    latest: bool,
    live: LiveStart,
    csrf: str,
    flow_type: str,
    notice: str | None,
) -> Markup:
    """One session: its state, its transcript page, the live events, and the message box."""
    events_url = f"/sessions/{quote(session_id, safe='')}/events?" + urlencode(
        {"from": live.resume_token, "shown_turns": live.shown_turns}
    )
    body = render(
        "<h1>Session {sid}</h1>"
        '<section id="panel">{panel}</section>'
        '<section><h2>Transcript</h2><div id="transcript" data-latest="{latest}">{messages}</div></section>'
        '<section id="live" data-events="{events}" data-fragments="/sessions/{qsid}/fragments">'
        '<h2>Live <span class="muted" id="live-state">connecting</span></h2><div class="events"></div></section>'
        "<section><h2>Send a message</h2>{actions}</section>",
        sid=session_id,
        qsid=quote(session_id, safe=""),
        panel=panel(session_id, snapshot, csrf=csrf),
        latest="1" if latest else "0",
        messages=messages,
        events=events_url,
        actions=session_actions(session_id, csrf=csrf),
    )
    return page(f"Session {session_id}", body, flow_type=flow_type, notice=notice)


def error_page(title: str, message: str, *, flow_type: str) -> Markup:
    """A page saying what went wrong."""
    return page(title, render('<h1>{t}</h1><p class="error">{m}</p>', t=title, m=message), flow_type=flow_type)
