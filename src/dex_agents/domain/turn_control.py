"""Steering and cancelling a running turn: the cancel request, and what the model is told.

A person may cancel the active turn (`TurnCancelRequest`, stored by the
``cancel_turn`` RPC under the turn's ID, so a request left from an earlier
turn never touches a later one). The turn stops at its next safe boundary:

- a pending approval is answered ``rejected`` with `cancel_rejection_message`;
- a tool call not started yet ends ``cancelled`` with the same text;
- a tool already running finishes, and its result is kept;
- no further model call runs: the turn ends ``cancelled`` and stores one
  note (`build_turn_cancelled_note`) so the next turn's model knows what ran.

The note, as a user message built by the runner::

    [Dex] The user cancelled the previous turn (reason: <reason>).
    These tool calls of it finished:
    - <tool_name> <arguments> -> <status>: <outcome>
    Do not repeat these tool calls unless the user asks again.

Without finished calls the middle lines are left out; without a reason the
parenthesis is.
"""

from collections.abc import Iterable

import attrs

from dex_agents.domain.failure_note import final_in_deferral_order, ran_call_lines
from dex_agents.domain.limits import cap_text
from dex_agents.domain.tools import AgentToolCall

TURN_CANCELLED_NOTE_HEADER = "[Dex] The user cancelled the previous turn"
"""The start of a turn-cancelled note (a runner or UI can recognize the note by it)."""

REASON_BYTES = 2048
"""How much of a cancel reason the note and the messages show."""


@attrs.frozen(kw_only=True)
class TurnCancelRequest:
    """A person asked to cancel one turn (Attribute ``TURN_CANCEL_REQUEST``)."""

    turn_id: str
    """The turn to cancel; a request for another turn means nothing."""
    reason: str | None = None
    """Why, as the person said it."""

    def applies_to(self, turn_id: str | None) -> bool:
        """Whether this request cancels ``turn_id``."""
        return turn_id is not None and turn_id == self.turn_id


def _reason(reason: str | None) -> str | None:
    if reason is None or not reason.strip():
        return None
    return cap_text(reason.strip(), REASON_BYTES, what="the reason")


def cancel_rejection_message(reason: str | None) -> str:
    """What the model sees for an approval or a call the cancel stopped."""
    said = _reason(reason)
    suffix = "" if said is None else f" Reason: {said}"
    return f"The tool call did not run: the user cancelled the turn.{suffix}"


def build_turn_cancelled_note(reason: str | None, records: Iterable[AgentToolCall]) -> str:
    """Return the note stored when a turn is cancelled, listing its final records in ``deferral_order``."""
    said = _reason(reason)
    header = TURN_CANCELLED_NOTE_HEADER + ("." if said is None else f" (reason: {said}).")
    final = final_in_deferral_order(records)
    if not final:
        return f"{header}\nNo tool call of it ran."
    return "\n".join([header, "These tool calls of it finished:", *ran_call_lines(final)])


@attrs.frozen(kw_only=True)
class CancelTurnRequest:
    """The ``cancel_turn`` RPC input."""

    reason: str | None = None
    """Why the person cancels; the model reads it in the note and in the stopped calls' results."""
