"""Snapshot views: a session's state, messages, tool call outcomes and usage, for a person.

`render_snapshot` prints what ``get_agent_snapshot`` returned, adding the tool
calls seen live (`ToolOutcome`, collected by the live renderer in
`dex_agents.cli.render`) to the outcomes stored on messages and the active
turn's records. The small text helpers (`one_line`, `compact_json`,
`describe_usage`) are shared by every command.
"""

import json
from collections.abc import Iterable, Sequence
from typing import assert_never

import attrs
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.domain.tools import AgentToolCall, ApprovalStatus, ToolCallStatus
from dex_agents.domain.usage import AgentUsage

MARK = "\u203a"
"""The mark after a speaker's name (a single right-pointing angle quotation mark)."""

DETAIL_WIDTH = 110
"""Tool results and arguments are cut to this many characters on one line."""

STATUS_STYLES: dict[str, tuple[str, str]] = {
    ToolCallStatus.SUCCEEDED.value: ("✓", "green"),
    ToolCallStatus.FAILED.value: ("✗", "red"),
    ToolCallStatus.REJECTED.value: ("✗", "yellow"),
    ToolCallStatus.EXPIRED.value: ("⌛", "yellow"),
    ToolCallStatus.OUTCOME_UNKNOWN.value: ("?", "magenta"),
    ToolCallStatus.NOT_APPLIED.value: ("∅", "yellow"),
    ToolCallStatus.CANCELLED.value: ("⊘", "yellow"),
}
"""The mark and style of each final tool call status."""


def one_line(text: str, width: int = DETAIL_WIDTH) -> str:
    """Return ``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def compact_json(text: str) -> str:
    """Return JSON text in a short canonical form (``{"order_id": "7"}``); other text unchanged."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return text
    return json.dumps(value, ensure_ascii=False)


@attrs.define(kw_only=True)
class ToolOutcome:
    """What a person saw of one tool call, collected from its events."""

    turn_id: str | None
    """The call's turn."""
    tool_call_id: str
    """The call."""
    tool_name: str
    """The tool."""
    arguments: str | None = None
    """The arguments (JSON text), when known."""
    effect: str | None = None
    """The effect of its policy."""
    requires_approval: bool = False
    """Whether it waited for approval."""
    approved: bool | None = None
    """The answer, when it waited for one."""
    attempts: int = 0
    """The highest attempt of its tool Step that started."""
    status: str | None = None
    """Its final status, once finished."""
    detail: str | None = None
    """Its output, error or rejection message."""


def _message_content(message: AgentMessage) -> Text:
    text = Text(message.text.strip()) if message.text else Text("")
    if message.tool_name:
        arrow = "→ " if message.role is MessageRole.ASSISTANT else "← "
        text += Text((" " if message.text else "") + arrow + message.tool_name, style="dim")
    for stored in message.tool_outcomes:
        mark, style = STATUS_STYLES.get(stored.status.value, ("•", ""))
        named = "" if message.tool_name == stored.tool_name else f"{stored.tool_name} "
        text += Text((" " if text.plain else "") + f"{mark} {named}{stored.status.value}", style=style)
    if not text.plain and message.role is MessageRole.USER:
        # An adapter's copy of the turn's opening request as the model got it (its system prompts or
        # instructions beside the prompt): kept so later turns replay what the model saw.
        text = Text("(the request as the model got it)", style="dim")
    elif not text.plain:
        text = Text("(no display text)", style="dim")
    return text


def describe_usage(usage: AgentUsage) -> str:
    """Return usage as one line of words."""
    calls = "call" if usage.model_calls == 1 else "calls"
    line = f"{usage.model_calls} model {calls} · {usage.input_tokens} input tokens"
    if usage.cached_input_tokens:
        line += f" ({usage.cached_input_tokens} cached)"
    line += f" · {usage.output_tokens} output tokens"
    if usage.reasoning_tokens:
        line += f" ({usage.reasoning_tokens} reasoning)"
    if usage.cost_usd:
        line += f" · ${usage.cost_usd:.4f}"
    return line


def messages_table(messages: Sequence[AgentMessage], *, title: str = "Messages") -> Table:
    """Return stored messages as a table."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, title_style="bold")
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("turn", style="dim", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("content", overflow="fold")
    for message in messages:
        table.add_row(str(message.sequence), message.turn_id, message.role.value, _message_content(message))
    return table


def tool_outcome_lines(outcomes: Iterable[ToolOutcome]) -> Group:
    """Return tool call outcomes, one line each: status, call, effect, approval, attempts and result."""
    lines: list[Text] = [Text("Tool calls", style="bold")]
    for outcome in outcomes:
        mark, style = STATUS_STYLES.get(outcome.status or "", ("…", "dim"))
        line = Text(f"  {mark} ", style=style) + Text(outcome.tool_name, style="bold")
        if outcome.arguments:
            line += Text(" " + one_line(compact_json(outcome.arguments), 60))
        facts = [outcome.turn_id or "", outcome.effect or ""]
        if outcome.requires_approval and outcome.status == ToolCallStatus.EXPIRED.value:
            facts.append("approval expired")
        elif outcome.requires_approval:
            facts.append({True: "approved", False: "rejected", None: "approval pending"}[outcome.approved])
        if outcome.attempts:
            facts.append(f"{outcome.attempts} attempt{'s' if outcome.attempts != 1 else ''}")
        line += Text(" · " + " · ".join(fact for fact in facts if fact), style="dim")
        line += Text(f" → {outcome.status or 'not finished'}", style=style)
        if outcome.detail:
            line += Text(": " + one_line(outcome.detail, 80))
        lines.append(line)
    return Group(*lines)


def tool_records_as_outcomes(records: Iterable[AgentToolCall]) -> list[ToolOutcome]:
    """Return the snapshot's tool call records (the active turn's) as outcomes."""
    return [
        ToolOutcome(
            turn_id=record.turn_id,
            tool_call_id=record.tool_call_id,
            tool_name=record.tool_name,
            arguments=record.arguments,
            effect=record.policy.effect.value,
            requires_approval=record.requires_approval,
            approved=None
            if record.status in (ToolCallStatus.AWAITING_APPROVAL, ToolCallStatus.PENDING, ToolCallStatus.QUEUED)
            else record.status not in (ToolCallStatus.REJECTED, ToolCallStatus.EXPIRED),
            status=record.status.value if record.is_final else None,
            detail=record.output or record.error or record.rejection_message,
        )
        for record in records
    ]


def stored_as_outcomes(messages: Iterable[AgentMessage]) -> list[ToolOutcome]:
    """Return the tool outcomes stored on ``messages`` (finished turns' calls), in message order."""
    return [
        ToolOutcome(
            turn_id=message.turn_id,
            tool_call_id=stored.tool_call_id,
            tool_name=stored.tool_name,
            effect=stored.effect.value,
            requires_approval=stored.approval is not None,
            approved=None if stored.approval is None else stored.approval is ApprovalStatus.APPROVED,
            attempts=stored.attempts,
            status=stored.status.value,
            detail=stored.error or stored.rejection_message,
        )
        for message in messages
        for stored in message.tool_outcomes
    ]


def queue_lines(snapshot: AgentSnapshot) -> list[Text]:
    """One line per waiting message (with the ID that withdraws it) and per steered message the turn took."""
    lines = [
        Text(
            f"{'steered' if m.delivery.value == 'steer' else 'queued'} ({m.client_message_id or 'no ID'}): ",
            style="cyan",
        )
        + Text(one_line(m.text))
        for m in snapshot.queued_messages
    ]
    lines.extend(
        Text("steering the running turn: ", style="cyan") + Text(one_line(m.text)) for m in snapshot.steered_messages
    )
    return lines


def render_snapshot(
    console: Console,
    session_id: str,
    snapshot: AgentSnapshot,
    *,
    tool_outcomes: Sequence[ToolOutcome] = (),
) -> None:
    """Print a session snapshot: state, messages, tool call outcomes and usage.

    Args:
        console: where to print.
        session_id: the session.
        snapshot: what ``get_agent_snapshot`` returned.
        tool_outcomes: tool calls seen live; the snapshot adds the outcomes
            stored on its messages and the active turn's records.
    """
    parts: list[Text | Table | Group] = [*_state_lines(session_id, snapshot)]
    if snapshot.messages:
        parts.append(messages_table(snapshot.messages))
    outcomes = _all_outcomes(snapshot, tool_outcomes)
    if outcomes:
        parts.append(tool_outcome_lines(outcomes))
    parts.extend(Text(describe_pending(interrupt), style="yellow") for interrupt in snapshot.pending_interrupts)
    parts.extend(queue_lines(snapshot))
    parts.append(Text("Usage: ", style="bold") + Text(describe_usage(snapshot.usage)))
    console.print()
    for part in parts:
        if isinstance(part, Text):
            console.print(part, soft_wrap=True)
        elif isinstance(part, Group):
            for line in part.renderables:
                console.print(line, soft_wrap=True)
        else:
            console.print(part)


def _state_lines(session_id: str, snapshot: AgentSnapshot) -> list[Text]:
    """The snapshot's header: status, counts, the active turn, how the last one ended."""
    state = snapshot.state
    if state is None:
        return [Text(f"Snapshot of session {session_id}: not started yet", style="bold")]
    turns = "turn" if state.turn_count == 1 else "turns"
    lines = [
        Text(f"Snapshot of session {session_id}", style="bold")
        + Text(
            f" · {state.status.value} · {state.turn_count} {turns} · {state.message_count} messages"
            f" · {snapshot.queued_message_count} queued"
        )
    ]
    if state.active_turn_id:
        lines.append(Text(f"active turn: {state.active_turn_id}"))
    if state.last_turn_error:
        lines.append(Text(f"last turn failed: {one_line(state.last_turn_error)}", style="red"))
    if state.last_turn_cancelled and state.active_turn_id is None:
        lines.append(Text("last turn was cancelled", style="yellow"))
    return lines


def _all_outcomes(snapshot: AgentSnapshot, tool_outcomes: Sequence[ToolOutcome]) -> list[ToolOutcome]:
    """The outcomes seen live, then those of calls not seen live (stored on messages, the active turn's records)."""
    outcomes = list(tool_outcomes)
    seen = {(o.turn_id, o.tool_call_id) for o in outcomes}
    for outcome in stored_as_outcomes(snapshot.messages) + tool_records_as_outcomes(snapshot.tool_calls):
        if (outcome.turn_id, outcome.tool_call_id) not in seen:
            seen.add((outcome.turn_id, outcome.tool_call_id))
            outcomes.append(outcome)
    return outcomes


def describe_pending(interrupt: AgentInterrupt) -> str:
    """One line for a pending interrupt: an approval by its interrupt ID, a result by its tool-call ID."""
    call = f"{interrupt.tool_name} {compact_json(interrupt.arguments)}"
    match interrupt.kind:
        case InterruptKind.APPROVAL:
            return f"pending approval {interrupt.interrupt_id}: {call}"
        case InterruptKind.TOOL_RESULT:
            return f"pending result {interrupt.tool_call_id}: {call}"
        case _:
            assert_never(interrupt.kind)
