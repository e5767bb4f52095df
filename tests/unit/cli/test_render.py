"""How live events and snapshots look: lines per tool call, text per Step execution, stored text at turn end."""

import io
import re
from datetime import UTC, datetime

import attrs
from rich.console import Console

from dex_agents import (
    EXPIRED_REJECTION_MESSAGE,
    AgentEvent,
    AgentEventType,
    AgentInterrupt,
    AgentMessage,
    AgentSnapshot,
    AgentState,
    AgentUsage,
    AgentUserMessage,
    MessageDelivery,
    MessageRole,
    ToolCallStatus,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.cli.render import EventExtras, EventRenderer
from dex_agents.cli.views import render_snapshot
from dex_agents.domain.tools import call_digest
from dex_agents.testing import make_tool_call
from tests.builders import make_interrupt
from tests.unit.cli.events import ASSISTANT, YOU, event, text

REFUND = make_tool_call(
    "call-2",
    "refund_order",
    arguments='{"order_id":"7"}',
    policy=ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
    status=ToolCallStatus.AWAITING_APPROVAL,
    interrupt_id="turn-1.call-2",
)


def renderer(*, live: bool = False) -> tuple[EventRenderer, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=live, color_system=None, highlight=False)
    return EventRenderer(console, live=live), out


def message(sequence: int, role: MessageRole, text: str | None, tool: str | None = None) -> AgentMessage:
    return AgentMessage(sequence=sequence, turn_id="turn-1", role=role, framework_item="{}", text=text, tool_name=tool)


def test_text_is_printed_as_one_block_once_something_else_happens() -> None:
    view, out = renderer()
    view.handle(text("Let me "))
    view.handle(text("look."))
    assert out.getvalue() == ""
    view.handle(
        event(
            AgentEventType.TOOL_CALL_DEFERRED,
            tool_call_id="call-1",
            tool_name="find_order",
            effect="read",
            requires_approval=False,
        )
    )
    assert out.getvalue().splitlines() == [ASSISTANT + "Let me look.", "  ▸ find_order  read"]


def test_tool_call_lines_show_arguments_effect_attempts_and_result() -> None:
    view, out = renderer()
    view.handle(
        event(
            AgentEventType.TOOL_CALL_DEFERRED,
            tool_call_id="call-2",
            tool_name="refund_order",
            effect="idempotent_write",
            requires_approval=True,
        ),
        EventExtras(tool_call=REFUND),
    )
    view.handle(
        event(
            AgentEventType.TOOL_CALL_STARTED,
            step="CallTool-2",
            attempt=2,
            tool_call_id="call-2",
            tool_name="refund_order",
        )
    )
    done = make_tool_call("call-2", "refund_order", arguments='{"order_id":"7"}', output="Refund R-1 issued")
    view.handle(
        event(
            AgentEventType.TOOL_CALL_FINISHED,
            step="CallTool-2",
            tool_call_id="call-2",
            tool_name="refund_order",
            status="succeeded",
        ),
        EventExtras(tool_call=done),
    )
    assert out.getvalue().splitlines() == [
        '  ▸ refund_order {"order_id": "7"}  idempotent_write · needs approval',
        "  … refund_order running (CallTool-2 · attempt 2, the same idempotency key)",
        "  ✓ refund_order succeeded → Refund R-1 issued",
    ]
    [outcome] = view.tool_outcomes
    assert (outcome.attempts, outcome.status, outcome.detail) == (2, "succeeded", "Refund R-1 issued")


def test_a_retried_model_call_shows_only_the_new_attempts_text() -> None:
    view, out = renderer()
    view.handle(text("Half of an answ", attempt=1))
    view.handle(text("The whole answer.", attempt=2))
    view.handle(text("Stale", attempt=1))
    view.close()
    assert out.getvalue().splitlines() == [
        "  ↻ RunModel-1 attempt 2 replaces the partial text of attempt 1",
        ASSISTANT + "The whole answer.",
    ]


def test_a_retry_after_the_text_was_committed_says_that_the_text_above_is_discarded() -> None:
    view, out = renderer()
    view.handle(text("Half", attempt=1))
    view.handle(event(AgentEventType.USAGE_RECORDED, recorded={}, session={"model_calls": 1}))
    view.flush()
    view.handle(text("Whole.", attempt=2))
    view.close()
    assert out.getvalue().splitlines() == [
        ASSISTANT + "Half",
        "  ↻ RunModel-1 attempt 2 replaces the partial text of attempt 1 above",
        ASSISTANT + "Whole.",
    ]
    assert view.session_usage == AgentUsage(model_calls=1)


def test_text_that_resumes_after_other_output_continues_without_repeating_itself() -> None:
    view, out = renderer()
    view.handle(text("One, "))
    view.line("a notice")
    view.handle(text("two."))
    view.close()
    assert out.getvalue().splitlines() == [ASSISTANT + "One, ", "  a notice", "… two."]


def test_on_a_terminal_the_open_text_is_redrawn_and_left_on_screen() -> None:
    view, out = renderer(live=True)
    view.handle(text("Half", attempt=1))
    view.handle(text("Whole answer.", attempt=2))
    view.close()
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert ASSISTANT + "Whole answer." in screen
    assert "replaces the partial text of attempt 1" in screen


def test_turn_end_prints_the_stored_answer_only_when_the_live_text_missed_it() -> None:
    view, out = renderer()
    view.handle(text("Done."))
    stored = (message(2, MessageRole.ASSISTANT, "Done."),)
    view.handle(event(AgentEventType.TURN_COMPLETED, message_count=1), EventExtras(stored_messages=stored))
    assert out.getvalue().splitlines() == [ASSISTANT + "Done.", "  ✓ turn-1 completed · 1 messages stored"]

    view, out = renderer()
    stored = (message(2, MessageRole.ASSISTANT, "Stored answer."),)
    view.handle(event(AgentEventType.TURN_COMPLETED, message_count=1), EventExtras(stored_messages=stored))
    assert out.getvalue().splitlines() == [
        "  the stored messages differ from the live text; stored:",
        ASSISTANT + "Stored answer.",
        "  ✓ turn-1 completed · 1 messages stored",
    ]


def test_without_stored_messages_at_turn_end_the_comparison_waits_for_turn_committed() -> None:
    view, out = renderer()
    view.handle(text("Live answer."))
    view.handle(event(AgentEventType.TURN_COMPLETED, message_count=1))
    stored = (message(2, MessageRole.ASSISTANT, "Stored answer."),)
    view.handle(
        event(AgentEventType.TURN_COMMITTED, outcome="completed", error=None, message_count=2),
        EventExtras(stored_messages=stored),
    )
    assert out.getvalue().splitlines() == [
        ASSISTANT + "Live answer.",
        "  ✓ turn-1 completed · 1 messages stored",
        "  the stored messages differ from the live text; stored:",
        ASSISTANT + "Stored answer.",
    ]


def test_an_expired_call_is_drawn_apart_from_a_rejected_one() -> None:
    view, out = renderer()
    view.handle(
        event(
            AgentEventType.INTERRUPT_RESOLVED,
            interrupt_id="turn-1.c1",
            approved=False,
            rejection_message=EXPIRED_REJECTION_MESSAGE,
        )
    )
    view.handle(
        event(AgentEventType.INTERRUPT_RESOLVED, interrupt_id="turn-1.c2", approved=False, rejection_message="no")
    )
    view.handle(event(AgentEventType.TOOL_CALL_FINISHED, tool_call_id="c1", tool_name="refund", status="expired"))
    view.handle(event(AgentEventType.TOOL_CALL_FINISHED, tool_call_id="c2", tool_name="refund", status="rejected"))
    assert out.getvalue().splitlines() == [
        "  ⌛ expired (turn-1.c1): nobody answered before the deadline",
        "  ✗ rejected (turn-1.c2): no",
        "  ⌛ refund expired",
        "  ✗ refund rejected",
    ]


def test_turn_start_echoes_the_user_message_and_a_failure_is_one_line() -> None:
    view, out = renderer()
    view.handle(event(AgentEventType.TURN_STARTED, sequence=1), EventExtras(user_text="Refund order 7"))
    view.handle(event(AgentEventType.TURN_FAILED, error="the model\nis down"))
    lines = out.getvalue().splitlines()
    assert lines[0] == YOU + "Refund order 7"
    assert lines[1].startswith("turn-1 ─")
    assert lines[2] == "  ✗ turn-1 failed: the model is down"


def _refund_raised() -> AgentEvent:
    return event(
        AgentEventType.INTERRUPT_RAISED,
        step="AwaitToolApproval-1",
        interrupt_id="turn-1.call-2",
        tool_call_id="call-2",
        tool_name="refund_order",
        deadline=None,
    )


def _refund_interrupt(arguments: str) -> AgentInterrupt:
    return make_interrupt("call-2", "refund_order", arguments, raised_at=datetime.now(UTC))


def test_approval_lines_say_whether_the_approval_is_still_pending_and_how_it_was_answered() -> None:
    view, out = renderer()
    raised = _refund_raised()
    interrupt = _refund_interrupt("{}")
    view.handle(raised, EventExtras(interrupt=interrupt))
    view.handle(raised)
    view.handle(
        event(
            AgentEventType.INTERRUPT_RESOLVED,
            interrupt_id="turn-1.call-2",
            approved=False,
            rejection_message="too expensive",
        )
    )
    assert out.getvalue().splitlines() == [
        "  ⏸ refund_order waits for approval (interrupt turn-1.call-2)",
        "  ⏸ refund_order asked for approval (turn-1.call-2); no longer pending",
        "  ✗ rejected (turn-1.call-2): too expensive",
    ]
    assert view.tool_outcomes[0].approved is False


def test_a_watch_renderer_prints_the_whole_call_waiting_for_approval_and_who_answered() -> None:
    out = io.StringIO()
    view = EventRenderer(Console(file=out, width=200, color_system=None), live=False, approval_arguments=True)
    arguments = '{"order_id": "7", "note": "' + "x" * 150 + '"}'
    interrupt = _refund_interrupt(arguments)
    raised = _refund_raised()
    view.handle(raised, EventExtras(interrupt=interrupt))
    view.handle(
        event(
            AgentEventType.INTERRUPT_RESOLVED,
            interrupt_id="turn-1.call-2",
            approved=True,
            rejection_message=None,
            approver="ann",
        )
    )
    lines = out.getvalue().splitlines()
    assert lines[0] == f"  ⏸ refund_order waits for approval (interrupt turn-1.call-2): refund_order {arguments}"
    assert lines[1] == "  ✓ approved (turn-1.call-2) · by ann"
    assert view.shown_approvals == {"turn-1.call-2": call_digest("refund_order", arguments)}


def test_snapshot_shows_state_messages_tool_outcomes_pending_approvals_and_usage() -> None:
    view, out = renderer()
    snapshot = AgentSnapshot(
        state=AgentState(turn_count=1, message_count=3, last_turn_error="boom"),
        messages=(
            message(1, MessageRole.USER, "Refund order 7"),
            message(2, MessageRole.ASSISTANT, "Looking.", tool="find_order"),
            message(3, MessageRole.TOOL, None, tool="find_order"),
        ),
        pending_interrupts=(make_interrupt("call-2", "refund_order", '{"order_id":"7"}', raised_at=datetime.now(UTC)),),
        tool_calls=(REFUND,),
        usage=AgentUsage(model_calls=2, input_tokens=100, output_tokens=40),
        queued_message_count=0,
    )
    render_snapshot(view.console, "s-1", snapshot)
    printed = out.getvalue()
    assert "Snapshot of session s-1 · waiting_for_user_message · 1 turn · 3 messages · 0 queued" in printed
    assert "last turn failed: boom" in printed
    assert re.search(r"2\s+turn-1\s+assistant\s+Looking\. → find_order", printed)
    assert re.search(r"3\s+turn-1\s+tool\s+← find_order", printed)
    assert '… refund_order {"order_id": "7"} · turn-1 · idempotent_write · approval pending → not finished' in printed
    assert 'pending approval turn-1.call-2: refund_order {"order_id": "7"}' in printed
    assert "Usage: 2 model calls · 100 input tokens · 40 output tokens" in printed


def test_a_snapshot_shows_the_outcomes_stored_on_past_turns_messages() -> None:
    view, out = renderer()
    expired = make_tool_call(
        "c9",
        "refund_order",
        turn_id="turn-1",
        policy=ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
        status=ToolCallStatus.AWAITING_APPROVAL,
        interrupt_id="turn-1.c9",
    ).expire(EXPIRED_REJECTION_MESSAGE)
    stored = attrs.evolve(message(3, MessageRole.TOOL, None, tool="refund_order"), tool_outcomes=(expired.outcome(),))
    snapshot = AgentSnapshot(
        state=AgentState(turn_count=1, message_count=3),
        messages=(message(1, MessageRole.USER, "Refund order 7"), stored),
        pending_interrupts=(),
        tool_calls=(),
        usage=AgentUsage(),
        queued_message_count=0,
    )
    render_snapshot(view.console, "s-1", snapshot)
    printed = out.getvalue()
    assert re.search(r"3\s+turn-1\s+tool\s+← refund_order ⌛ expired", printed)
    assert (
        "⌛ refund_order · turn-1 · idempotent_write · approval expired → expired: The tool call did not run" in printed
    )


def test_a_steered_message_shows_where_it_landed_and_a_cancelled_turn_says_so() -> None:
    view, out = renderer()
    view.handle(
        event(AgentEventType.USER_MESSAGE_STEERED, client_message_id="m1", text="only this week", landed="running_turn")
    )
    view.handle(
        event(
            AgentEventType.USER_MESSAGE_STEERED,
            turn_id="turn-2",
            client_message_id="m2",
            text="and close them",
            landed="new_turn",
        )
    )
    view.handle(text("Looking"))
    view.handle(event(AgentEventType.TURN_CANCELLED, reason="wrong customer", finished_tool_calls=1))
    assert out.getvalue().splitlines() == [
        "  ↪ steered joins the running turn (turn-1): only this week",
        "  ↪ steered starts a turn (turn-2): and close them",
        ASSISTANT + "Looking",
        "  ⊘ turn-1 cancelled: wrong customer · 1 tool calls finished",
    ]


def test_the_snapshot_lists_waiting_and_steered_messages_and_a_cancelled_last_turn() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None, highlight=False)
    snapshot = AgentSnapshot(
        state=AgentState(turn_count=1, message_count=2, last_turn_cancelled=True),
        messages=(),
        pending_interrupts=(),
        tool_calls=(),
        usage=AgentUsage(),
        queued_message_count=2,
        queued_messages=(
            AgentUserMessage(text="next", client_message_id="q1"),
            AgentUserMessage(text="steer", client_message_id="s1", delivery=MessageDelivery.STEER),
        ),
    )
    render_snapshot(console, "s", snapshot)
    printed = out.getvalue()
    assert "· 2 queued" in printed
    assert "last turn was cancelled" in printed
    assert "queued (q1): next" in printed
    assert "steered (s1): steer" in printed
