"""``StartAgentSession``: the start Step.

Input: `AgentSessionStartInput`. Initializes state, usage and pending
interrupts. Next: ``RunModel`` when the initial message is not blank (the
turn starts with it), else ``AwaitUserMessage``. A first message that cannot
start a turn fails turn 1 at once (`TurnOpener.begin`); next: ``AwaitUserMessage``.
3 attempts; failure route ``RecordStartFailure``.
"""

import attrs

from dex_agents.application.next import GoTo, Next, StepName
from dex_agents.application.ports import InterruptStore, SessionStateStore, UsageStore
from dex_agents.application.steps._shared import TurnOpener
from dex_agents.application.wiring import Wired
from dex_agents.domain.session import AgentState
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.usage import AgentUsage


@attrs.frozen(kw_only=True)
class StartAgentSession(Wired):
    """Initializes a session and maybe starts its first turn."""

    session_state: SessionStateStore
    usage: UsageStore
    interrupts: InterruptStore
    turn_opener: TurnOpener

    async def execute(self, start: AgentSessionStartInput) -> Next:
        """Initialize the session."""
        state = AgentState()
        self.session_state.set(state)
        self.usage.set(AgentUsage())
        self.interrupts.set(())
        if not start.starts_a_turn:
            return GoTo(step=StepName.AWAIT_USER_MESSAGE)
        assert start.initial_message is not None
        return self.turn_opener.begin(start.initial_message, state)
