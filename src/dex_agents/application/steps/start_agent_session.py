"""``StartAgentSession``: the start Step.

Input: `AgentSessionStartInput`. Initializes state, usage and pending
interrupts. Next: ``RunModel`` when the initial message is not blank (the
turn starts with it), else ``AwaitUserMessage``. A first message that cannot
start a turn fails turn 1 at once (`begin_turn`); next: ``AwaitUserMessage``.
3 attempts; failure route ``RecordStartFailure``.
"""

import attrs

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import GoTo, Next, StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import InterruptStore, MessageLog, SessionStateStore, UsageStore
from dex_agents.application.runner import AgentFrameworkRunner
from dex_agents.application.steps._shared import begin_turn
from dex_agents.application.wiring import Wired
from dex_agents.domain.session import AgentState
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.usage import AgentUsage


@attrs.frozen(kw_only=True)
class StartAgentSession(Wired):
    """Initializes a session and maybe starts its first turn."""

    runner: AgentFrameworkRunner
    options: AgentSessionOptions
    session_state: SessionStateStore
    messages: MessageLog
    usage: UsageStore
    interrupts: InterruptStore
    events: AgentEventWriter

    async def execute(self, start: AgentSessionStartInput) -> Next:
        """Initialize the session."""
        state = AgentState()
        self.session_state.set(state)
        self.usage.set(AgentUsage())
        self.interrupts.set(())
        if not start.starts_a_turn:
            return GoTo(step=StepName.AWAIT_USER_MESSAGE)
        assert start.initial_message is not None
        return begin_turn(
            start.initial_message,
            state=state,
            runner=self.runner,
            options=self.options,
            state_store=self.session_state,
            messages=self.messages,
            events=self.events,
        )
