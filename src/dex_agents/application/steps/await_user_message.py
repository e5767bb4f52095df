"""``AwaitUserMessage``: waits for the next user message.

Input: none. Waits for one message of ``QUEUED_USER_MESSAGES``, stores it as
the new turn's user message and starts the turn. Next: ``RunModel``.
"""

from collections.abc import Sequence

from dex_agents.application.events import AgentEventWriter
from dex_agents.application.next import GoTo, Next, StepName, WaitAgain
from dex_agents.application.ports import MessageLog, SessionStateStore
from dex_agents.application.runner import AgentFrameworkRunner
from dex_agents.application.steps._shared import begin_turn
from dex_agents.domain.messages import AgentUserMessage


class AwaitUserMessage:
    """Starts a turn with the user message the engine delivered."""

    def __init__(
        self,
        *,
        runner: AgentFrameworkRunner,
        state: SessionStateStore,
        messages: MessageLog,
        events: AgentEventWriter,
    ) -> None:
        self._runner = runner
        self._state = state
        self._messages = messages
        self._events = events

    async def execute(self, delivered: Sequence[AgentUserMessage]) -> Next:
        """Start a turn with the first delivered message (the wait delivers exactly one)."""
        state = self._state.get()
        assert state is not None, "the session has not started"
        messages = [message for message in delivered if not message.is_blank]
        if not messages:
            # ``send_user_message`` refuses blank text, so only a message queued by
            # other means gets here; it starts no turn.
            return WaitAgain()
        begin_turn(
            messages[0].text,
            state=state,
            runner=self._runner,
            state_store=self._state,
            messages=self._messages,
            events=self._events,
            client_message_id=messages[0].client_message_id,
        )
        return GoTo(step=StepName.RUN_MODEL)
