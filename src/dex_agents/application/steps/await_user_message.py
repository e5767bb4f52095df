"""``AwaitUserMessage``: waits for the next user message.

Input: none. Waits for one message of ``STEERED_USER_MESSAGES`` (a steered
message whose turn ended before taking it, or one handed back by a cancelled
or failed turn; these come first) or else ``QUEUED_USER_MESSAGES``, stores it as
the new turn's user message (with its ``client_message_id``) and starts the
turn. Next: ``RunModel`` (or ``CompactHistory`` first when the context is
over budget, `model_movement`). A message that cannot start a turn (refused text,
a runner failing to build it) fails that turn at once (`TurnOpener.begin`); next:
``AwaitUserMessage``. 3 attempts; failure route ``RecordTurnFailure``, which
records the turn the message would have started as failed.

Before it waits, it writes ``turn_committed`` for the turn that just ended
(`announce_finished_turn`): the Step runs only after the Step that ended the
turn committed, so this is the first moment the event tells the truth.
"""

from collections.abc import Sequence

import attrs

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import Next, WaitAgain
from dex_agents.application.ports import SessionStateStore
from dex_agents.application.steps._shared import TurnOpener
from dex_agents.application.wiring import Wired
from dex_agents.domain import events as ev
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.session import turn_id_for


@attrs.frozen(kw_only=True)
class AwaitUserMessage(Wired):
    """Starts a turn with the user message the engine delivered."""

    session_state: SessionStateStore
    events: AgentEventWriter
    turn_opener: TurnOpener

    def announce_finished_turn(self) -> None:
        """Write ``turn_committed`` for the last turn, if one ran and none runs now (called before the wait)."""
        state = self.session_state.get()
        if state is None or state.turn_count == 0 or state.active_turn_id is not None:
            return
        self.events.write(
            ev.turn_committed(
                failed_with=state.last_turn_error,
                message_count=state.message_count,
                cancelled=state.last_turn_cancelled,
            ),
            turn_id=turn_id_for(state.turn_count),
        )

    async def execute(self, delivered: Sequence[AgentUserMessage], *, steered: bool = False) -> Next:
        """Start a turn with the first delivered message (the wait delivers exactly one).

        ``steered``: it came from the steering queue; ``user_message_steered``
        (``new_turn``) says it starts this turn.
        """
        state = self.session_state.get()
        assert state is not None, "the session has not started"
        messages = [message for message in delivered if not message.is_blank]
        if not messages:
            # ``send_user_message`` refuses blank text, so only a message queued by
            # other means gets here; it starts no turn.
            return WaitAgain()
        if steered:
            self.events.write(
                ev.user_message_steered(messages[0].client_message_id, messages[0].text, ev.SteeredLanding.NEW_TURN),
                turn_id=turn_id_for(state.turn_count + 1),
            )
        return self.turn_opener.begin(messages[0].text, state, client_message_id=messages[0].client_message_id)
