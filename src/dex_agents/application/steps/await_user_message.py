"""``AwaitUserMessage``: waits for the next user message.

Input: none. Waits for one message of ``QUEUED_USER_MESSAGES``, stores it as
the new turn's user message and starts the turn. Next: ``RunModel``. A
message that cannot start a turn (refused text, a runner failing to build
it) fails that turn at once (`begin_turn`); next: ``AwaitUserMessage``.
3 attempts; failure route ``RecordTurnFailure``, which records the turn the
message would have started as failed.
"""

from collections.abc import Sequence

from dex_agents.application.events import AgentEventWriter
from dex_agents.application.next import Next, WaitAgain
from dex_agents.application.options import AgentSessionOptions
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
        options: AgentSessionOptions,
        state: SessionStateStore,
        messages: MessageLog,
        events: AgentEventWriter,
    ) -> None:
        self._runner = runner
        self._options = options
        self._state = state
        self._messages = messages
        self._events = events

    async def execute(self, delivered: Sequence[AgentUserMessage]) -> Next:
        """Start a turn with the first delivered message (the wait delivers exactly one)."""
        state = self._state.get()
        assert state is not None, "the session has not started"
        texts = [message.text for message in delivered if not message.is_blank]
        if not texts:
            # ``send_user_message`` refuses blank text, so only a message queued by
            # other means gets here; it starts no turn.
            return WaitAgain()
        return begin_turn(
            texts[0],
            state=state,
            runner=self._runner,
            options=self._options,
            state_store=self._state,
            messages=self._messages,
            events=self._events,
        )
