"""What the model sees for a finished call, and the turn-failure note (exact text)."""

import pytest

from dex_agents.domain.failure_note import (
    DEFAULT_REJECTION_TEXT,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    build_turn_failure_note,
    describe_tool_call_outcome,
)
from dex_agents.domain.tools import ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.testing import make_tool_call

S = ToolCallStatus


@pytest.mark.parametrize(
    ("status", "detail", "text"),
    [
        (S.SUCCEEDED, "3 tickets", "3 tickets"),
        (S.SUCCEEDED, None, ""),
        (S.REJECTED, "too costly", "too costly"),
        (S.REJECTED, None, DEFAULT_REJECTION_TEXT),
        (S.FAILED, "no such order", "The tool call failed: no such order"),
        (S.FAILED, None, "The tool call failed: no detail"),
        (S.OUTCOME_UNKNOWN, "worker lost", OUTCOME_UNKNOWN_TOOL_RESULT),
    ],
)
def test_a_final_record_describes_its_outcome_for_the_model(
    status: ToolCallStatus, detail: str | None, text: str
) -> None:
    record = make_tool_call(
        status=status,
        output=detail if status is S.SUCCEEDED else None,
        rejection_message=detail if status is S.REJECTED else None,
        error=detail if status in (S.FAILED, S.OUTCOME_UNKNOWN) else None,
    )
    assert describe_tool_call_outcome(record) == text


@pytest.mark.parametrize("status", [S.PENDING, S.AWAITING_APPROVAL, S.APPROVED])
def test_an_unfinished_record_has_no_outcome_to_describe(status: ToolCallStatus) -> None:
    with pytest.raises(ValueError, match="no outcome yet"):
        describe_tool_call_outcome(make_tool_call(status=status))


def test_the_turn_failure_note_lists_final_records_in_deferral_order_with_the_exact_text() -> None:
    records = [
        make_tool_call(
            "call-b",
            "refund",
            arguments='{"order": 7}',
            policy=ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),
            deferral_order=1,
            status=S.OUTCOME_UNKNOWN,
            error="worker lost",
        ),
        make_tool_call("call-a", "email", deferral_order=2, status=S.PENDING),
        make_tool_call("call-z", "search", arguments='{"q": "open"}', deferral_order=0, output="3 tickets"),
        make_tool_call("call-c", "delete", deferral_order=3, status=S.REJECTED, rejection_message="no"),
    ]
    assert build_turn_failure_note(records) == (
        "[Dex] The previous turn failed after these tool calls ran:\n"
        '- search {"q": "open"} -> succeeded: 3 tickets\n'
        '- refund {"order": 7} -> outcome_unknown: ' + OUTCOME_UNKNOWN_TOOL_RESULT + "\n"
        "- delete {} -> rejected: no\n"
        "Do not repeat these tool calls unless the user asks again."
    )


def test_there_is_no_turn_failure_note_without_final_records() -> None:
    assert build_turn_failure_note([]) is None
    assert build_turn_failure_note([make_tool_call(status=S.PENDING), make_tool_call("c2", status=S.APPROVED)]) is None
