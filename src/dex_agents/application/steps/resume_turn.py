"""``ResumeTurn``: waits for the results of one model response's tool calls.

Input: the number of results to wait for. Waits for that many
``TOOL_CALL_RESULTS`` messages. When every record of the active turn is final,
the session runs the model again (next: ``RunModel``, or ``CompactHistory``
first when the context is over budget); if a record is still
unfinished, it waits again for the results still missing.

The same wait takes every steered user message queued by then
(``STEERED_USER_MESSAGES``, without waiting for one): this is the turn's
model-call boundary, after every tool result of the model's last response.
They are kept for the next ``RunModel`` (``STEERED_MESSAGES``), in the order
they were sent, each announced with ``user_message_steered``
(``running_turn``).
"""

from collections.abc import Sequence

import attrs

from dex_agents.application.compaction import model_movement
from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import Next, WaitAgain
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import SessionStateStore, SteeredMessageStore, ToolCallStore
from dex_agents.application.wiring import Wired
from dex_agents.domain import events as ev
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.tools import ToolCallCompleted


@attrs.frozen(kw_only=True)
class ResumeTurn(Wired):
    """Resumes the turn once every tool call of it has its result."""

    state: SessionStateStore
    tool_calls: ToolCallStore
    options: AgentSessionOptions
    steered: SteeredMessageStore
    events: AgentEventWriter

    async def execute(self, delivered: Sequence[ToolCallCompleted], steered: Sequence[AgentUserMessage] = ()) -> Next:
        """Go on to the model, or wait for the results still missing; keep ``steered`` for the next model call."""
        del delivered  # the records, not the messages, say whether the turn can go on
        taken = [message for message in steered if not message.is_blank]
        if taken:
            self.steered.set((*self.steered.get(), *taken))
            for message in taken:
                self.events.write(
                    ev.user_message_steered(message.client_message_id, message.text, ev.SteeredLanding.RUNNING_TURN)
                )
        state = self.state.get()
        assert state is not None, "the session has not started"
        assert state.active_turn_id is not None, "ResumeTurn needs an active turn"
        unfinished = sum(
            1 for record in self.tool_calls.all() if record.turn_id == state.active_turn_id and not record.is_final
        )
        if unfinished:
            return WaitAgain(input=unfinished)
        resumed = state.resume_model()
        self.state.set(resumed)
        return model_movement(resumed, self.options.compaction)
