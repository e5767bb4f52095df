"""``RecordTurnFailure``: the failure route of every Step that belongs to a turn.

Reached with the failed Step's input: nothing from ``RunModel`` and
``AwaitUserMessage``, the result count from ``ResumeTurn``
(``RecordResumeFailure``), the start input from ``StartAgentSession``
(``RecordStartFailure``); all three run this use case. Records
``last_turn_error`` from the engine's recovery detail (cut to 8 KiB):

- a running turn: stores the steered messages a model call of it saw
  (`store_seen_steered`); when it has final tool-call records, stores one
  turn-failure note (a user message built by the runner) so the next turn's
  model does not repeat a write, then clears the turn's records, run state
  and pending interrupts, and hands back steered messages no model call saw
  (they start the next turn);
- no running turn (``AwaitUserMessage`` failed for good: its message was
  taken and could not be stored): records the turn it would have started as
  failed;
- no session yet (``StartAgentSession`` failed for good): initializes the
  session, and records turn 1 as failed when the first message would have
  started it.

A runner whose `build_user_message` fails on the note does not stop the
record: the note's text is added to ``last_turn_error`` instead. Writes
``turn_failed``. The note carries the final records' `ToolOutcome` in
``tool_outcomes``, the only place a failed turn's tool outcomes stay visible.
Next: ``AwaitUserMessage``. 5 attempts and no failure
route: only a dex-agents bug can fail it, and then the session fails with
that error.
"""

import attrs

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import GoTo, Next, StepName
from dex_agents.application.ports import (
    InterruptStore,
    MessageLog,
    RunStateStore,
    SessionStateStore,
    SteeredMessageStore,
    ToolCallStore,
    UsageStore,
    UserMessageQueue,
)
from dex_agents.application.runner import AgentFrameworkRunner
from dex_agents.application.steps._shared import describe_exception, fail_new_turn
from dex_agents.application.steps._turn_control import hand_back_steered, store_seen_steered
from dex_agents.application.wiring import Wired
from dex_agents.domain import events as ev
from dex_agents.domain.failure_note import build_turn_failure_note
from dex_agents.domain.limits import ERROR_TEXT_BYTES, cap_text
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.turns import validate_user_message
from dex_agents.domain.usage import AgentUsage


@attrs.frozen(kw_only=True)
class RecordTurnFailure(Wired):
    """Ends a turn whose model Step failed for good."""

    runner: AgentFrameworkRunner
    state: SessionStateStore
    messages: MessageLog
    run_state: RunStateStore
    tool_calls: ToolCallStore
    interrupts: InterruptStore
    usage: UsageStore
    events: AgentEventWriter
    steered: SteeredMessageStore
    steering: UserMessageQueue

    async def execute(self, *, recovery_error: str, start: AgentSessionStartInput | None = None) -> Next:
        """Record the failure and wait for the next user message; ``start`` when the start Step failed."""
        error = cap_text(recovery_error, ERROR_TEXT_BYTES, what="the error")
        state = self.state.get()
        if state is None:
            state = AgentState()
            self.usage.set(AgentUsage())
            self.interrupts.set(())
            if start is None or not start.starts_a_turn:
                self.state.set(state)
                return GoTo(step=StepName.AWAIT_USER_MESSAGE)
        if state.active_turn_id is None:
            return fail_new_turn(state.start_turn(), error, state_store=self.state, events=self.events)
        turn_id = state.active_turn_id
        records = self.tool_calls.all()
        state = store_seen_steered(state, runner=self.runner, messages=self.messages, steered=self.steered)
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
                outcomes = sorted((r for r in records if r.is_final), key=lambda r: r.deferral_order)
                stored = AgentMessage.stored(
                    message,
                    sequence=state.next_sequence,
                    turn_id=turn_id,
                    tool_outcomes=(r.outcome() for r in outcomes),
                )
                self.messages.append(stored)
                state = state.with_messages_stored([stored])
        self.state.set(state.fail_turn(error))
        for record in records:
            self.tool_calls.delete(record.tool_call_id)
        self.run_state.set(None)
        hand_back_steered(self.steered, self.steering)
        pending = self.interrupts.get()
        if any(i.turn_id == turn_id for i in pending):  # unchanged, it is not written (an RPC may hold it)
            self.interrupts.set([i for i in pending if i.turn_id != turn_id])
        self.events.write(ev.turn_failed(error))
        return GoTo(step=StepName.AWAIT_USER_MESSAGE)


class RecordResumeFailure(RecordTurnFailure):
    """Ends a turn whose ``ResumeTurn`` failed for good (the same record as `RecordTurnFailure`)."""


class RecordStartFailure(RecordTurnFailure):
    """Initializes a session whose ``StartAgentSession`` failed for good, its first turn failed."""
