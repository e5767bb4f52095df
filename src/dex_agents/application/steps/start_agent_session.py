"""``StartAgentSession``: the start Step.

Input: `AgentSessionStartInput`. Initializes state, usage and pending
interrupts. Next: ``RunModel`` when the initial message is not blank (the
turn starts with it), else ``AwaitUserMessage``. A first message that cannot
start a turn fails turn 1 at once (`begin_turn`); next: ``AwaitUserMessage``.
3 attempts; failure route ``RecordStartFailure``.
"""

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import GoTo, Next, StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import InterruptStore, MessageLog, SessionStateStore, UsageStore
from dex_agents.application.runner import AgentFrameworkRunner
from dex_agents.application.steps._shared import begin_turn
from dex_agents.domain.session import AgentState
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.usage import AgentUsage


class StartAgentSession:
    """Initializes a session and maybe starts its first turn."""

    def __init__(
        self,
        *,
        runner: AgentFrameworkRunner,
        options: AgentSessionOptions,
        state: SessionStateStore,
        messages: MessageLog,
        usage: UsageStore,
        interrupts: InterruptStore,
        events: AgentEventWriter,
    ) -> None:
        self._runner = runner
        self._options = options
        self._state = state
        self._messages = messages
        self._usage = usage
        self._interrupts = interrupts
        self._events = events

    async def execute(self, start: AgentSessionStartInput) -> Next:
        """Initialize the session."""
        state = AgentState()
        self._state.set(state)
        self._usage.set(AgentUsage())
        self._interrupts.set(())
        if not start.starts_a_turn:
            return GoTo(step=StepName.AWAIT_USER_MESSAGE)
        assert start.initial_message is not None
        return begin_turn(
            start.initial_message,
            state=state,
            runner=self._runner,
            options=self._options,
            state_store=self._state,
            messages=self._messages,
            events=self._events,
        )
