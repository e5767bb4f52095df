"""``RecordTurnFailure``: the failure route of every Step that belongs to a turn.

Reached with the failed Step's input: nothing from ``RunModel`` and
``AwaitUserMessage``, the result count from ``ResumeTurn``
(``RecordResumeFailure``), the start input from ``StartAgentSession``
(``RecordStartFailure``); all three run this use case. Records
``last_turn_error`` from the engine's recovery detail (cut to 8 KiB):

- a running turn: stores the steered messages a model call of it saw
  (`TurnCloser.fail`, `TurnCloser.store_seen_steered`), counting as seen, after ``RunModel``, the ones
  its failed attempts were given (a withdrawal cannot take back what a model was sent); when it has
  final tool-call records, stores one
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

from dex_agents.application.next import GoTo, Next, StepName
from dex_agents.application.ports import InterruptStore, SessionStateStore, UsageStore
from dex_agents.application.steps._shared import TurnOpener
from dex_agents.application.steps._turn_control import TurnCloser
from dex_agents.application.wiring import Wired
from dex_agents.domain.limits import ERROR_TEXT_BYTES, cap_text
from dex_agents.domain.session import AgentState
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.usage import AgentUsage


@attrs.frozen(kw_only=True)
class RecordTurnFailure(Wired):
    """Ends a turn whose model Step failed for good."""

    session_state: SessionStateStore
    interrupts: InterruptStore
    usage: UsageStore
    turn_opener: TurnOpener
    turn_closer: TurnCloser

    async def execute(self, *, recovery_error: str, start: AgentSessionStartInput | None = None) -> Next:
        """Record the failure and wait for the next user message; ``start`` when the start Step failed."""
        error = cap_text(recovery_error, ERROR_TEXT_BYTES, what="the error")
        state = self.session_state.get()
        if state is None:
            state = AgentState()
            self.usage.set(AgentUsage())
            self.interrupts.set(())
            if start is None or not start.starts_a_turn:
                self.session_state.set(state)
                return GoTo(step=StepName.AWAIT_USER_MESSAGE)
        if state.active_turn_id is None:
            return self.turn_opener.fail_new(state.start_turn(), error)
        return self.turn_closer.fail(state, error, model_had_taken=self.after_model_step)

    @property
    def after_model_step(self) -> bool:
        """Whether the failed Step was ``RunModel``, whose attempts were all given the turn's taken steered messages."""
        return True


class RecordResumeFailure(RecordTurnFailure):
    """Ends a turn whose ``ResumeTurn`` failed for good (the same record; the steered messages it took go back)."""

    @property
    def after_model_step(self) -> bool:
        """``False``: no model call was given what the failed ``ResumeTurn`` took."""
        return False


class RecordStartFailure(RecordTurnFailure):
    """Initializes a session whose ``StartAgentSession`` failed for good, its first turn failed."""
