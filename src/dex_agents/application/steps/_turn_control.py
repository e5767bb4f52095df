"""Closing a turn (completed, failed, cancelled), and the steered messages it took, as one collaborator.

`TurnCloser` is the one field a Step that may end the active turn holds: it
owns the ports a turn's end writes (the state, the messages, the run state,
the tool-call records, the turn's pending interrupts, the steered messages
and their queue, the cancel request) and writes the turn's last event.
"""

from collections.abc import Iterable, Sequence

import attrs

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import GoTo, Next, StepName
from dex_agents.application.ports import (
    CancelRequestStore,
    InterruptStore,
    MessageLog,
    RunStateStore,
    SessionStateStore,
    SteeredMessageStore,
    SteeringQueue,
    ToolCallStore,
)
from dex_agents.application.runner import AgentFrameworkRunner
from dex_agents.application.steps._shared import describe_exception
from dex_agents.application.wiring import Wired
from dex_agents.domain import events as ev
from dex_agents.domain.failure_note import build_turn_failure_note
from dex_agents.domain.limits import ERROR_TEXT_BYTES, cap_text
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.session import AgentState
from dex_agents.domain.tools import AgentToolCall
from dex_agents.domain.turn_control import TurnCancelRequest, build_turn_cancelled_note
from dex_agents.domain.turns import TurnCompleted, validate_user_message


def _call_order(record: AgentToolCall) -> int:
    return record.deferral_order


@attrs.frozen(kw_only=True)
class TurnCloser(Wired):
    """Ends the active turn: completed, failed or cancelled; ``AwaitUserMessage`` comes next."""

    runner: AgentFrameworkRunner
    session_state: SessionStateStore
    messages: MessageLog
    run_state: RunStateStore
    tool_calls: ToolCallStore
    interrupts: InterruptStore
    steered: SteeredMessageStore
    steering: SteeringQueue
    cancel_request: CancelRequestStore
    events: AgentEventWriter

    def end_if_cancelled(self, state: AgentState) -> Next | None:
        """End the active turn as cancelled when a `TurnCancelRequest` applies to it (`end_cancelled`)."""
        cancel = self.cancel_request.get()
        if state.active_turn_id is None or cancel is None or not cancel.applies_to(state.active_turn_id):
            return None
        return self.end_cancelled(state, cancel)

    def end_cancelled(self, state: AgentState, request: TurnCancelRequest) -> Next:
        """End the active turn as cancelled, before any further model call; ``AwaitUserMessage`` next.

        Stores the steered messages a model call of the turn saw (`store_seen_steered`), then one note
        (built by the runner, carrying the final records' outcomes)
        saying the turn was cancelled and which tool calls finished, clears the
        turn's records and run state, hands back steered messages no model call saw,
        and writes ``turn_cancelled``. Called only when every record is final (at a
        model-call boundary), so no approval of the turn is pending. A runner that
        cannot build the note does not stop the cancel: the turn ends without it.
        """
        turn_id = state.active_turn_id
        assert turn_id is not None
        records = self.tool_calls.all()
        final = sorted((r for r in records if r.is_final), key=_call_order)
        note = build_turn_cancelled_note(request.reason, records)
        state = self.store_seen_steered(state)
        try:
            message = self.runner.build_user_message(note)
            validate_user_message(message)
        except Exception:  # noqa: BLE001 - a runner bug must not keep a cancelled turn running
            pass
        else:
            stored = AgentMessage.stored(
                message, sequence=state.next_sequence, turn_id=turn_id, tool_outcomes=(r.outcome() for r in final)
            )
            self.messages.append(stored)
            state = state.with_messages_stored([stored])
        self.hand_back_steered()
        self.session_state.set(state.cancel_turn())
        self._clear(records)
        self.events.write(ev.turn_cancelled(request.reason, finished_tool_calls=len(final)))
        return GoTo(step=StepName.AWAIT_USER_MESSAGE)

    def fail(self, state: AgentState, error: str, *, model_had_taken: bool) -> Next:
        """End the active turn as failed with ``error`` (already capped); ``AwaitUserMessage`` next.

        ``model_had_taken``: the turn's model Step failed, and every one of its attempts was given the
        steered messages the turn took since its last model call; they count as seen (a withdrawal must
        not remove what a model was sent). Otherwise (``ResumeTurn`` failed) they are handed back.

        Stores the steered messages a model call of it saw (`store_seen_steered`); when it has final
        tool-call records, stores one turn-failure note (a user message built by the runner; a runner
        that cannot build it adds the note's text to the error instead). Then clears the turn's records,
        run state and pending interrupts, hands back steered messages no model call saw, and writes
        ``turn_failed``.
        """
        turn_id = state.active_turn_id
        assert turn_id is not None
        records = self.tool_calls.all()
        if model_had_taken and self.steered.get():
            self.steered.set_seen([*self.steered.seen(), *self.steered.get()])
            self.steered.set(())
        state = self.store_seen_steered(state)
        note = build_turn_failure_note(records)
        if note is not None:
            try:
                message = self.runner.build_user_message(note)
                validate_user_message(message)
            except Exception as failure:  # noqa: BLE001 - the record must be kept even when the runner fails
                error = cap_text(
                    f"{error}\n(the runner could not store the turn-failure note: {describe_exception(failure)})"
                    f"\n{note}",
                    ERROR_TEXT_BYTES,
                    what="the error",
                )
            else:
                outcomes = sorted((r for r in records if r.is_final), key=_call_order)
                stored = AgentMessage.stored(
                    message,
                    sequence=state.next_sequence,
                    turn_id=turn_id,
                    tool_outcomes=(r.outcome() for r in outcomes),
                )
                self.messages.append(stored)
                state = state.with_messages_stored([stored])
        self.session_state.set(state.fail_turn(error))
        self._clear(records)
        self.hand_back_steered()
        pending = self.interrupts.get()
        if any(i.turn_id == turn_id for i in pending):  # unchanged, it is not written (an RPC may hold it)
            self.interrupts.set([i for i in pending if i.turn_id != turn_id])
        self.events.write(ev.turn_failed(error))
        return GoTo(step=StepName.AWAIT_USER_MESSAGE)

    def complete(self, state: AgentState, outcome: TurnCompleted, records: Sequence[AgentToolCall]) -> Next:
        """Store the completed turn's new messages in one commit and clear the turn; ``AwaitUserMessage`` next.

        Each stored message that answers tool calls (``answered_tool_call_ids``) carries their records'
        `ToolOutcome` in ``tool_outcomes``, matched by tool-call ID: the records are deleted here, and
        the outcomes must outlive them.
        """
        turn_id = state.active_turn_id
        assert turn_id is not None
        final = {record.tool_call_id: record for record in records if record.is_final}
        stored: list[AgentMessage] = []
        for offset, message in enumerate(outcome.new_messages):
            answered = (
                sorted((final[i] for i in message.answered_tool_call_ids if i in final), key=_call_order)
                if message.role is MessageRole.TOOL
                else []
            )
            stored.append(
                AgentMessage.stored(
                    message,
                    sequence=state.next_sequence + offset,
                    turn_id=turn_id,
                    tool_outcomes=(record.outcome() for record in answered),
                )
            )
        for stored_message in stored:
            self.messages.append(stored_message)
        self.session_state.set(state.with_messages_stored(stored).complete_turn())
        self.run_state.set(None)
        self.steered.set_seen(())  # the runner stored them with the turn's messages
        for record in records:
            self.tool_calls.delete(record.tool_call_id)
        self.events.write(ev.turn_completed(len(outcome.new_messages)))
        return GoTo(step=StepName.AWAIT_USER_MESSAGE)

    def _clear(self, records: Iterable[AgentToolCall]) -> None:
        for record in records:
            self.tool_calls.delete(record.tool_call_id)
        self.run_state.set(None)

    def hand_back_steered(self) -> None:
        """Put the steered messages the turn took back on the steering queue: no model call saw them.

        ``AwaitUserMessage`` takes steered messages before queued ones, so they
        start the next turn, in the order they were sent.
        """
        for message in self.steered.get():
            self.steering.publish(message)
        self.steered.set(())

    def store_seen_steered(self, state: AgentState) -> AgentState:
        """Store the steered messages a model call of the ending turn saw, in the order they were sent.

        Only the run state held them (a completed turn's runner stores them with
        its messages); a turn that fails or is cancelled stores them here, before
        its note, so a message the user sent is never lost and the next turn's
        model reads it. A runner that cannot build one does not stop the turn's
        end: that message is left out. Returns the state with them stored.
        """
        seen = self.steered.seen()
        if not seen:
            return state
        turn_id = state.active_turn_id
        assert turn_id is not None
        stored: list[AgentMessage] = []
        for user_message in seen:
            try:
                built = self.runner.build_user_message(user_message.text)
                validate_user_message(built)
            except Exception:  # noqa: BLE001 - a runner bug must not keep the turn from ending
                continue
            stored.append(AgentMessage.stored(built, sequence=state.next_sequence + len(stored), turn_id=turn_id))
        for message in stored:
            self.messages.append(message)
        self.steered.set_seen(())
        return state.with_messages_stored(stored)
