"""Drawing a session's live events for a person, as they arrive.

`EventRenderer` draws one event at a time. Text deltas are grouped by
`dex_agents.cli.transcript.LiveText`: the text of the Step execution that is
writing stays open (on a terminal a `rich.live.Live` redraws it at every
delta, so a retried attempt visibly replaces the partial text of the one it
supersedes; elsewhere it is printed once the block ends) and is committed as
soon as anything else happens. Tool calls print one line each as they are
deferred, start, wait for approval and finish. At the end of a turn the stored
messages replace the live text: when they differ from what was streamed
(streams are best effort), the stored text is printed.

The snapshot views (`render_snapshot` and its helpers) live in
`dex_agents.cli.views`.
"""

from typing import assert_never

import attrs
from rich.console import Console
from rich.live import Live
from rich.text import Text

from dex_agents.cli.transcript import DeltaOutcome, LiveText, TextBlock, TextKind
from dex_agents.cli.views import MARK, STATUS_STYLES, ToolOutcome, compact_json, one_line
from dex_agents.domain.events import (
    AgentEvent,
    HistoryCompactedPayload,
    InterruptRaisedPayload,
    InterruptResolvedPayload,
    ReasoningDeltaPayload,
    SteeredLanding,
    TextDeltaPayload,
    ToolCallDeferredPayload,
    ToolCallFinishedPayload,
    ToolCallStartedPayload,
    TurnCancelledPayload,
    TurnCommittedPayload,
    TurnCompletedPayload,
    TurnFailedPayload,
    TurnStartedPayload,
    UsageRecordedPayload,
    UserMessageSteeredPayload,
)
from dex_agents.domain.interrupts import (
    EXPIRED_REJECTION_MESSAGE,
    EXPIRED_RESULT_MESSAGE,
    AgentInterrupt,
    InterruptKind,
    interrupt_id_for,
)
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.tools import AgentToolCall, call_digest
from dex_agents.domain.usage import AgentUsage


@attrs.frozen(kw_only=True)
class EventExtras:
    """What the caller looked up for an event, beyond its payload."""

    tool_call: AgentToolCall | None = None
    """The call's record (``tool_call_*`` events), from the snapshot of the active turn."""
    interrupt: AgentInterrupt | None = None
    """The pending interrupt (``interrupt_raised``); ``None`` when no longer pending."""
    user_text: str | None = None
    """The user message that started the turn (``turn_started``)."""
    stored_messages: tuple[AgentMessage, ...] | None = None
    """The messages the turn stored after its user message (``turn_committed``, or ``turn_completed``
    when the caller already has them)."""


_ToolCallPayload = ToolCallStartedPayload | ToolCallFinishedPayload | ToolCallDeferredPayload | InterruptRaisedPayload
"""The events about one tool call."""


class EventRenderer:
    """Draws a session's live events on a `rich.console.Console`."""

    def __init__(
        self,
        console: Console,
        *,
        live: bool | None = None,
        echo_user_messages: bool = True,
        approval_arguments: bool = False,
    ) -> None:
        """Create a renderer.

        Args:
            console: where to draw.
            live: redraw the open text block at every delta; by default only
                on a terminal.
            echo_user_messages: print the user message that starts each turn
                (off when the person just typed it).
            approval_arguments: print the whole arguments of every call that
                waits for approval, and remember the digest of what was printed
                (`shown_approvals`), for a person who answers by typing its ID.
        """
        self.console = console
        self._approval_arguments = approval_arguments
        self.shown_approvals: dict[str, str] = {}
        """The digest of each pending call printed whole, by interrupt ID (with ``approval_arguments``)."""
        self._echo_user = echo_user_messages
        self._live_mode = console.is_terminal if live is None else live
        self._text = LiveText()
        self._open: TextBlock | None = None
        self._live: Live | None = None
        self._shown: dict[tuple[str | None, str, TextKind], tuple[int, int]] = {}
        self._tools: dict[tuple[str | None, str], ToolOutcome] = {}
        self._usage: AgentUsage | None = None
        self._live_until_committed: dict[str | None, str] = {}

    @property
    def tool_outcomes(self) -> list[ToolOutcome]:
        """Every tool call seen, in the order they were deferred."""
        return list(self._tools.values())

    @property
    def session_usage(self) -> AgentUsage | None:
        """The session usage of the last ``usage_recorded`` event."""
        return self._usage

    def handle(self, event: AgentEvent, extras: EventExtras | None = None) -> None:  # noqa: C901 - one case per event type: an exhaustive match
        """Draw one event."""
        extras = extras or EventExtras()
        payload = event.payload
        match payload:
            case TextDeltaPayload() | ReasoningDeltaPayload():
                self._delta(event)
            case TurnStartedPayload():
                self._turn_started(event, extras)
            case TurnCompletedPayload():
                self._turn_completed(event, payload, extras)
            case TurnFailedPayload():
                self.flush()
                self._text.end_turn(event.turn_id)
                self.line(f"✗ {event.turn_id} failed: {one_line(payload.error)}", style="bold red")
            case ToolCallDeferredPayload():
                self._tool_deferred(event, payload, extras)
            case InterruptRaisedPayload():
                self._interrupt_raised(event, payload, extras)
            case InterruptResolvedPayload():
                self._interrupt_resolved(payload)
            case ToolCallStartedPayload():
                self._tool_started(event, payload)
            case ToolCallFinishedPayload():
                self._tool_finished(event, payload, extras)
            case UsageRecordedPayload():
                self._usage = payload.session
            case TurnCommittedPayload():
                self._turn_committed(event, extras)
            case HistoryCompactedPayload():
                self.line(
                    f"history compacted: messages {payload.first_sequence}-{payload.through_sequence} summarised",
                    style="dim",
                )
            case UserMessageSteeredPayload():
                where = "joins the running turn" if payload.landed is SteeredLanding.RUNNING_TURN else "starts a turn"
                self.line(f"↪ steered {where} ({event.turn_id}): {one_line(payload.text)}", style="cyan")
            case TurnCancelledPayload():
                self.flush()
                self._text.end_turn(event.turn_id)
                reason = "" if payload.reason is None else f": {one_line(payload.reason)}"
                self.line(
                    f"⊘ {event.turn_id} cancelled{reason} · {payload.finished_tool_calls} tool calls finished",
                    style="bold yellow",
                )
            case _:
                assert_never(payload)

    # -- lines ---------------------------------------------------------------

    def line(self, text: str | Text, *, style: str = "", indent: int = 2) -> None:
        """Commit the open text, then print one line (plain text, never markup)."""
        self.flush()
        body = text if isinstance(text, Text) else Text(text, style=style)
        self.console.print(Text(" " * indent) + body, soft_wrap=True)

    def flush(self) -> None:
        """Commit the open text block: it stays on screen and the next output goes below it."""
        block = self._open
        if block is None:
            return
        self._open = None
        start = self._start_of(block)
        self._shown[block.key] = (block.attempt, len(block.text))
        if self._live is not None:
            self._live.update(self._block_text(block, start), refresh=True)
            self._live.stop()
            self._live = None
        elif block.text[start:]:
            self.console.print(self._block_text(block, start), soft_wrap=True)

    def can_show_spinner(self) -> bool:
        """Whether a spinner may run now: only on a terminal, and not while text is streaming."""
        return self.console.is_terminal and self._open is None

    def close(self) -> None:
        """Commit whatever is open; call before leaving."""
        self.flush()

    # -- text ----------------------------------------------------------------

    def _start_of(self, block: TextBlock) -> int:
        """How much of the block's text is on screen already (a block can resume after other output)."""
        attempt, length = self._shown.get(block.key, (block.attempt, 0))
        return length if attempt == block.attempt else 0

    def _block_text(self, block: TextBlock, start: int = 0) -> Text:
        label = "…" if start else (f"thinking {MARK}" if block.kind is TextKind.REASONING else f"assistant {MARK}")
        if block.kind is TextKind.REASONING:
            return Text(f"{label} ", style="dim") + Text(block.text[start:], style="dim italic")
        return Text(f"{label} ", style="bold cyan") + Text(block.text[start:])

    def _delta(self, event: AgentEvent) -> None:
        result = self._text.apply(event)
        block = result.block
        if block is None:
            return
        if result.outcome is DeltaOutcome.REPLACED:
            lower = block.discarded_attempts[-1]
            where = "" if self._open is block else " above"
            notice = Text(
                f"  ↻ {block.step_execution_id} attempt {block.attempt} replaces the partial text of attempt {lower}"
                + where,
                style="yellow",
            )
            # Printed above the open block (a Live region keeps drawing below it).
            self.console.print(notice, soft_wrap=False)
        if self._open is not block:
            self.flush()
            self._open = block
            if self._live_mode:
                self._live = Live(
                    self._block_text(block, self._start_of(block)),
                    console=self.console,
                    auto_refresh=False,
                    transient=False,
                    redirect_stdout=False,
                    redirect_stderr=False,
                )
                self._live.start()
        if self._live is not None:
            self._live.update(self._block_text(block, self._start_of(block)), refresh=True)

    # -- turns ---------------------------------------------------------------

    def _turn_started(self, event: AgentEvent, extras: EventExtras) -> None:
        self.flush()
        if self._echo_user and extras.user_text is not None:
            self.console.print(Text(f"you {MARK} ", style="bold green") + Text(extras.user_text), soft_wrap=True)
        self.console.rule(Text(event.turn_id or "turn", style="dim"), style="dim", align="left")

    def _turn_completed(self, event: AgentEvent, payload: TurnCompletedPayload, extras: EventExtras) -> None:
        self.flush()
        live = self._text.text(event.turn_id)
        self._text.end_turn(event.turn_id)
        if extras.stored_messages is not None:
            self._compare_stored(live, extras.stored_messages)
        else:
            # The stored messages are readable once turn_committed arrives; compare then.
            self._live_until_committed[event.turn_id] = live
        count = payload.message_count
        self.line(f"✓ {event.turn_id} completed · {count} messages stored", style="bold green")

    def _turn_committed(self, event: AgentEvent, extras: EventExtras) -> None:
        live = self._live_until_committed.pop(event.turn_id, None)
        if live is not None and extras.stored_messages is not None:
            self._compare_stored(live, extras.stored_messages)

    def _compare_stored(self, live: str, stored: tuple[AgentMessage, ...]) -> None:
        answer = "\n\n".join(m.text for m in stored if m.role is MessageRole.ASSISTANT and m.text and m.text.strip())
        if " ".join(answer.split()) != " ".join(live.split()):
            self.line("the stored messages differ from the live text; stored:", style="yellow")
            self.console.print(Text(f"assistant {MARK} ", style="bold cyan") + Text(answer))

    # -- tools ---------------------------------------------------------------

    def _outcome(self, event: AgentEvent, payload: _ToolCallPayload) -> ToolOutcome:
        call_id = payload.tool_call_id
        key = (event.turn_id, call_id)
        outcome = self._tools.get(key)
        if outcome is None:
            outcome = ToolOutcome(turn_id=event.turn_id, tool_call_id=call_id, tool_name=payload.tool_name)
            self._tools[key] = outcome
        return outcome

    def _tool_deferred(self, event: AgentEvent, payload: ToolCallDeferredPayload, extras: EventExtras) -> None:
        outcome = self._outcome(event, payload)
        outcome.effect = payload.effect.value
        outcome.requires_approval = payload.requires_approval
        if extras.tool_call is not None:
            outcome.arguments = extras.tool_call.arguments
        line = Text("▸ ", style="bold") + Text(outcome.tool_name, style="bold")
        if outcome.arguments is not None:
            line += Text(" " + one_line(compact_json(outcome.arguments), 90))
        line += Text(f"  {outcome.effect}", style="dim")
        if outcome.requires_approval:
            line += Text(" · needs approval", style="yellow")
        self.line(line)

    def _interrupt_raised(self, event: AgentEvent, payload: InterruptRaisedPayload, extras: EventExtras) -> None:
        outcome = self._outcome(event, payload)
        interrupt_id = payload.interrupt_id
        until = "" if payload.deadline is None else f" until {payload.deadline.isoformat()}"
        if payload.kind == InterruptKind.TOOL_RESULT.value:
            call_id = payload.tool_call_id
            if extras.interrupt is None:
                self.line(f"⏸ {outcome.tool_name} waited for its result ({call_id}); no longer pending", style="dim")
            else:
                self.line(
                    f"⏸ {outcome.tool_name} waits for its result from outside{until} "
                    f'(answer: result {call_id} JSON | result-error {call_id} "message")',
                    style="yellow",
                )
            return
        if extras.interrupt is None:
            self.line(f"⏸ {outcome.tool_name} asked for approval ({interrupt_id}); no longer pending", style="dim")
        else:
            line = Text(f"⏸ {outcome.tool_name} waits for approval{until} (interrupt {interrupt_id})", style="yellow")
            if self._approval_arguments:
                interrupt = extras.interrupt
                line += Text(f": {interrupt.tool_name} {compact_json(interrupt.arguments)}")
                self.shown_approvals[interrupt_id] = call_digest(interrupt.tool_name, interrupt.arguments)
            self.line(line)

    def _interrupt_resolved(self, payload: InterruptResolvedPayload) -> None:
        interrupt_id = payload.interrupt_id
        approved = payload.approved
        for outcome in self._tools.values():
            if outcome.turn_id is not None and interrupt_id_for(outcome.turn_id, outcome.tool_call_id) == interrupt_id:
                outcome.approved = approved
        reason = payload.rejection_message
        by = f" · by {payload.approver}" if payload.approver else ""
        if payload.kind == InterruptKind.TOOL_RESULT.value:
            if approved:
                self.line(f"✓ result submitted ({interrupt_id})", style="green")
            elif reason == EXPIRED_RESULT_MESSAGE:
                self.line(f"⌛ no result ({interrupt_id}): nobody submitted one before the deadline", style="yellow")
            else:
                self.line(f"✗ error submitted ({interrupt_id}): {reason}", style="yellow")
            return
        if approved:
            self.line(f"✓ approved ({interrupt_id}){by}", style="green")
        elif reason == EXPIRED_REJECTION_MESSAGE:
            # An expiry travels as an unapproved answer with this message; its call ends ``expired``.
            self.line(f"⌛ expired ({interrupt_id}): nobody answered before the deadline", style="yellow")
        else:
            because = f": {reason}" if reason else ""
            self.line(f"✗ rejected ({interrupt_id}){because}{by}", style="yellow")

    def _tool_started(self, event: AgentEvent, payload: ToolCallStartedPayload) -> None:
        outcome = self._outcome(event, payload)
        outcome.attempts = max(outcome.attempts, event.attempt)
        again = f" · attempt {event.attempt}, the same idempotency key" if event.attempt > 1 else ""
        self.line(f"… {outcome.tool_name} running ({event.step_execution_id}{again})", style="dim")

    def _tool_finished(self, event: AgentEvent, payload: ToolCallFinishedPayload, extras: EventExtras) -> None:
        outcome = self._outcome(event, payload)
        outcome.status = payload.status.value
        record = extras.tool_call
        if record is not None:
            outcome.detail = record.output or record.error or record.rejection_message
            if outcome.arguments is None:
                outcome.arguments = record.arguments
        mark, style = STATUS_STYLES.get(outcome.status, ("•", ""))
        line = Text(f"{mark} {outcome.tool_name} {outcome.status}", style=style)
        if outcome.detail:
            line += Text(" → " + one_line(outcome.detail))
        self.line(line)
