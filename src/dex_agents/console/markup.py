"""Escaping (`Markup`, `esc`, `render`) and the page shell every console page shares.

`dex_agents.console.html` names all of it; its docstring is the escaping contract.
"""

import html
from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import quote

from dex_agents.launch.output import visible


class Markup(str):
    """Text that is already HTML (built by the console's view modules); `render` inserts it as is."""

    __slots__ = ()


def esc(value: object) -> Markup:
    """Return ``value`` as HTML: `Markup` as is, anything else escaped, its invisible characters made `visible`.

    So a model cannot reorder (bidi overrides) or hide what an approval shows.
    """
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(visible("" if value is None else str(value)), quote=True))


def render(template: str, **values: object) -> Markup:
    """Format ``template`` (a literal of a console view module) with its values escaped."""
    return Markup(template.format(**{name: esc(value) for name, value in values.items()}))


def join(parts: Iterable[Markup]) -> Markup:
    """Concatenate HTML fragments."""
    return Markup("".join(parts))


def when(moment: datetime | None) -> str:
    """A timestamp for people (UTC, seconds)."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def page(title: str, body: Markup, *, flow_type: str, notice: str | None = None) -> Markup:
    """Return a whole page."""
    shown = render('<p class="notice" id="notice">{notice}</p>', notice=notice) if notice else Markup("")
    return render(
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        '<title>{title} · dex-agents console</title><link rel="stylesheet" href="/static/console.css">'
        '<script src="/static/console.js" defer></script></head><body>'
        '<header><a href="/">Sessions</a><a href="/approvals">Approvals</a>'
        '<span class="flow">Flow type {flow_type}</span></header>'
        "<main>{notice}{body}</main></body></html>",
        title=title,
        flow_type=flow_type,
        notice=shown,
        body=body,
    )


def session_path(session_id: str) -> str:
    """The path of a session's page: its ID quoted as one path segment (``a?b`` is ``/sessions/a%3Fb``)."""
    return "/sessions/" + quote(session_id, safe="")


def csrf_field(csrf: str) -> Markup:
    """The hidden CSRF field every form carries."""
    return render('<input type="hidden" name="csrf" value="{csrf}">', csrf=csrf)
