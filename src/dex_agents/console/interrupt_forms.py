"""The approval and result forms of a pending interrupt, and the Approvals page that lists them."""

import json
from collections.abc import Sequence
from typing import assert_never
from urllib.parse import quote

from dex_agents.console.markup import Markup, csrf_field, join, page, render, when
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind


def approval_form(session_id: str, interrupt: AgentInterrupt, *, csrf: str, return_to: str) -> Markup:
    """One pending approval with its Approve and Reject (with reason) buttons."""
    return render(
        '<div class="approval" data-interrupt="{iid}"><div><b>{tool}</b> in <a href="/sessions/{qsid}">{sid}</a> '
        '<span class="muted">({turn}, call {call}, asked {raised}{deadline})</span></div>'
        "<pre>{args}</pre>"
        # Two forms: Enter in the reason field submits the rejection, never the approval.
        '<form method="post" action="/sessions/{qsid}/approvals" class="inline approve">{fields}'
        '<button name="decision" value="approve" type="submit">Approve</button></form> '
        '<form method="post" action="/sessions/{qsid}/approvals" class="inline reject">{fields}'
        '<input name="reason" placeholder="Reason (sent to the model)"> '
        '<button name="decision" value="reject" type="submit">Reject</button></form></div>',
        **_described(session_id, interrupt),
        fields=render(
            '{csrf}<input type="hidden" name="interrupt_id" value="{iid}">'
            '<input type="hidden" name="call_digest" value="{digest}">'
            '<input type="hidden" name="return_to" value="{return_to}">',
            csrf=csrf_field(csrf),
            iid=interrupt.interrupt_id,
            digest=interrupt.call_digest or "",
            return_to=return_to,
        ),
    )


def result_form(session_id: str, interrupt: AgentInterrupt, *, csrf: str, return_to: str) -> Markup:
    """One call waiting for its result from outside, with a JSON result field and an error field."""
    return render(
        '<div class="approval result" data-interrupt="{iid}"><div><b>{tool}</b> in <a href="/sessions/{qsid}">'
        '{sid}</a> waits for its result <span class="muted">({turn}, call {call}, since {raised}{deadline})</span>'
        "</div><pre>{args}</pre>"
        # Two forms, as for approvals: Enter in the error field submits the error, never the result.
        '<form method="post" action="/sessions/{qsid}/results" class="inline submit-result">{fields}'
        '<textarea name="result" rows="2" placeholder="Result as JSON (what the model sees)"></textarea> '
        '<button type="submit">Submit result</button></form> '
        '<form method="post" action="/sessions/{qsid}/results" class="inline submit-error">{fields}'
        '<input name="error" placeholder="Error (sent to the model)"> '
        '<button type="submit">Submit error</button></form></div>',
        **_described(session_id, interrupt),
        fields=render(
            '{csrf}<input type="hidden" name="tool_call_id" value="{call}">'
            '<input type="hidden" name="return_to" value="{return_to}">',
            csrf=csrf_field(csrf),
            call=interrupt.tool_call_id,
            return_to=return_to,
        ),
    )


def pending_form(session_id: str, interrupt: AgentInterrupt, *, csrf: str, return_to: str) -> Markup:
    """The form answering one pending interrupt: an approval's, or a result's."""
    match interrupt.kind:
        case InterruptKind.APPROVAL:
            return approval_form(session_id, interrupt, csrf=csrf, return_to=return_to)
        case InterruptKind.TOOL_RESULT:
            return result_form(session_id, interrupt, csrf=csrf, return_to=return_to)
        case _:
            assert_never(interrupt.kind)


def approval_list(pending: Sequence[tuple[str, AgentInterrupt]], *, csrf: str) -> Markup:
    """The approval forms of the Approvals page (also fetched by its script every 3 seconds)."""
    forms = join(pending_form(sid, interrupt, csrf=csrf, return_to="/approvals") for sid, interrupt in pending)
    return forms or Markup('<p class="muted">Nothing waits for approval.</p>')


def approvals_page(
    pending: Sequence[tuple[str, AgentInterrupt]], *, csrf: str, flow_type: str, notice: str | None
) -> Markup:
    """Every pending approval of every listed session; the page script keeps the list current."""
    body = render(
        '<h1>Approvals</h1><div id="approvals" data-poll="/approvals?fragment=1" data-poll-ms="3000">{forms}</div>'
        '<p class="muted">This list updates by itself every few seconds.</p>',
        forms=approval_list(pending, csrf=csrf),
    )
    return page("Approvals", body, flow_type=flow_type, notice=notice)


def _described(session_id: str, interrupt: AgentInterrupt) -> dict[str, object]:
    """The values both forms show of ``interrupt``: its IDs, tool, turn, times and arguments."""
    return {
        "iid": interrupt.interrupt_id,
        "tool": interrupt.tool_name,
        "sid": session_id,
        "qsid": quote(session_id, safe=""),
        "turn": interrupt.turn_id,
        "call": interrupt.tool_call_id,
        "raised": when(interrupt.raised_at),
        "deadline": f", expires {when(interrupt.deadline)}" if interrupt.deadline else "",
        "args": _pretty_json(interrupt.arguments),
    }


def _pretty_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text
