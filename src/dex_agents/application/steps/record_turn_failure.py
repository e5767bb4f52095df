"""``RecordTurnFailure``: the failure route of ``RunModel``.

Input: none. Records ``last_turn_error`` from the engine's recovery detail.
When the turn has final tool-call records, stores one turn-failure note (a
user message built by the runner) so the next turn's model does not repeat a
write; the note carries those records' `ToolOutcome` in ``tool_outcomes``,
the only place a failed turn's tool outcomes stay visible. Otherwise stores
nothing. Clears the turn's records, run state and pending interrupts. Next:
``AwaitUserMessage``.
"""

from dex_agents.application.events import AgentEventWriter
from dex_agents.application.next import GoTo, Next, StepName
from dex_agents.application.ports import InterruptStore, MessageLog, RunStateStore, SessionStateStore, ToolCallStore
from dex_agents.application.runner import AgentFrameworkRunner
from dex_agents.domain import events as ev
from dex_agents.domain.failure_note import build_turn_failure_note
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.turns import validate_user_message


class RecordTurnFailure:
    """Ends a turn whose model Step failed for good."""

    def __init__(
        self,
        *,
        runner: AgentFrameworkRunner,
        state: SessionStateStore,
        messages: MessageLog,
        run_state: RunStateStore,
        tool_calls: ToolCallStore,
        interrupts: InterruptStore,
        events: AgentEventWriter,
    ) -> None:
        self._runner = runner
        self._state = state
        self._messages = messages
        self._run_state = run_state
        self._tool_calls = tool_calls
        self._interrupts = interrupts
        self._events = events

    async def execute(self, *, recovery_error: str) -> Next:
        """Record the failure and wait for the next user message."""
        state = self._state.get()
        assert state is not None, "the session has not started"
        assert state.active_turn_id is not None, "RecordTurnFailure needs an active turn"
        turn_id = state.active_turn_id
        records = self._tool_calls.all()
        note = build_turn_failure_note(records)
        if note is not None:
            message = self._runner.build_user_message(note)
            validate_user_message(message)
            outcomes = sorted((r for r in records if r.is_final), key=lambda r: r.deferral_order)
            self._messages.append(
                AgentMessage.stored(
                    message,
                    sequence=state.next_sequence,
                    turn_id=turn_id,
                    tool_outcomes=(r.outcome() for r in outcomes),
                )
            )
            state = state.with_messages_appended(1)
        self._state.set(state.fail_turn(recovery_error))
        for record in records:
            self._tool_calls.delete(record.tool_call_id)
        self._run_state.set(None)
        self._interrupts.set([i for i in self._interrupts.get() if i.turn_id != turn_id])
        self._events.write(ev.turn_failed(recovery_error))
        return GoTo(step=StepName.AWAIT_USER_MESSAGE)
