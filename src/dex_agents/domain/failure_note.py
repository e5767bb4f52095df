"""The text the model sees for a finished tool call, and the turn-failure note.

When a turn fails after some of its tool calls already ran, the session stores
one user message listing them, so the next turn's model does not repeat a
write it cannot see:

    [Dex] The previous turn failed after these tool calls ran:
    - <tool_name> <arguments> -> <status>: <describe_tool_call_outcome(record)>
    Do not repeat these tool calls unless the user asks again.

Each call's arguments and outcome are cut to 1 KiB and 2 KiB in the note (with
a notice), so the note stays small however large the outputs were.
"""

from collections.abc import Iterable

from dex_agents.domain.interrupts import EXPIRED_REJECTION_MESSAGE
from dex_agents.domain.limits import cap_text
from dex_agents.domain.tools import AgentToolCall, ToolCallStatus

OUTCOME_UNKNOWN_TOOL_RESULT = (
    "The tool call's outcome is unknown: it was interrupted and may or may not have "
    "taken effect. Do not call it again unless the user asks you to."
)
"""What the model sees for a call whose outcome is unknown."""

NOT_APPLIED_TOOL_RESULT = (
    "The tool call did not take effect: it was interrupted, and a check found that nothing "
    "happened. You may call it again if it is still needed."
)
"""What the model sees for a call its reconcile probe found did not take effect."""

CANCELLED_TOOL_RESULT = "The tool call did not run: the user cancelled the turn before it started."
"""What the model sees for a call its turn's cancel reached before it started."""

DEFAULT_REJECTION_TEXT = "The tool call was rejected."
"""What the model sees for a rejection that gave no reason."""

NOTE_ARGUMENTS_BYTES = 1024
"""How much of a call's arguments the note shows."""

NOTE_OUTCOME_BYTES = 2048
"""How much of a call's outcome the note shows."""

TURN_FAILURE_NOTE_HEADER = "[Dex] The previous turn failed after these tool calls ran:"
"""The first line of a turn-failure note (a runner or UI can recognize the note by it)."""
TURN_FAILURE_NOTE_FOOTER = "Do not repeat these tool calls unless the user asks again."
"""The last line of a turn-failure note."""


def describe_tool_call_outcome(record: AgentToolCall) -> str:
    """Return the model-visible text of a final tool-call record.

    Raises:
        ValueError: the record is not final.
    """
    match record.status:
        case ToolCallStatus.SUCCEEDED:
            return record.output or ""
        case ToolCallStatus.REJECTED:
            return record.rejection_message or DEFAULT_REJECTION_TEXT
        case ToolCallStatus.EXPIRED:
            return record.rejection_message or EXPIRED_REJECTION_MESSAGE
        case ToolCallStatus.FAILED:
            return f"The tool call failed: {record.error or 'no detail'}"
        case ToolCallStatus.OUTCOME_UNKNOWN:
            return OUTCOME_UNKNOWN_TOOL_RESULT
        case ToolCallStatus.NOT_APPLIED:
            return NOT_APPLIED_TOOL_RESULT
        case ToolCallStatus.CANCELLED:
            return record.rejection_message or CANCELLED_TOOL_RESULT
        case (
            ToolCallStatus.QUEUED
            | ToolCallStatus.PENDING
            | ToolCallStatus.AWAITING_APPROVAL
            | ToolCallStatus.AWAITING_RESULT
            | ToolCallStatus.APPROVED
            | ToolCallStatus.RECONCILING
        ):
            raise ValueError(f"tool call {record.tool_call_id!r} has no outcome yet (status {record.status.value!r})")


def final_in_deferral_order(records: Iterable[AgentToolCall]) -> list[AgentToolCall]:
    """Return the final records among ``records``, in ``deferral_order``: the calls a note lists."""
    return sorted((r for r in records if r.is_final), key=lambda r: r.deferral_order)


def ran_call_lines(final: Iterable[AgentToolCall]) -> list[str]:
    """Return a note's line for each of ``final`` (arguments and outcome cut), then its closing line."""
    lines = [
        f"- {r.tool_name} {cap_text(r.arguments, NOTE_ARGUMENTS_BYTES, what='the arguments')}"
        f" -> {r.status.value}: {cap_text(describe_tool_call_outcome(r), NOTE_OUTCOME_BYTES, what='the outcome')}"
        for r in final
    ]
    lines.append(TURN_FAILURE_NOTE_FOOTER)
    return lines


def build_turn_failure_note(records: Iterable[AgentToolCall]) -> str | None:
    """Return the turn-failure note for a failed turn's records, or ``None``.

    Only final records are listed, in ``deferral_order``; with none, there is
    no note.
    """
    final = final_in_deferral_order(records)
    if not final:
        return None
    return "\n".join([TURN_FAILURE_NOTE_HEADER, *ran_call_lines(final)])
