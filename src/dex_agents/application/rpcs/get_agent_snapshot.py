"""``get_agent_snapshot``: the session as a UI needs it (query only).

State (``None`` before the start Step commits), the latest 200 messages, the
pending interrupts, the active turn's tool-call records, usage and the number
of queued user messages, the waiting messages themselves (queued, then
steered ones no turn took; listed only where the host loaded them) and the
steered messages the running turn took for its next model call. Reads only the messages it returns: the latest 200
that fit in 2 MiB (`snapshot_sequences`). Works for a
stopped session, because it writes nothing.
"""

import attrs

from dex_agents.application.ports import (
    InterruptStore,
    MessageLog,
    SessionStateStore,
    SteeredMessageStore,
    SteeringQueue,
    ToolCallStore,
    UsageStore,
    UserMessageQueue,
)
from dex_agents.application.wiring import Wired
from dex_agents.domain.snapshot import AgentSnapshot, MessageIndex, snapshot_sequences


@attrs.frozen(kw_only=True)
class GetAgentSnapshot(Wired):
    """Reads the session snapshot."""

    session_state: SessionStateStore
    messages: MessageLog
    interrupts: InterruptStore
    tool_calls: ToolCallStore
    usage: UsageStore
    queue: UserMessageQueue
    steering: SteeringQueue
    steered: SteeredMessageStore

    async def execute(self) -> AgentSnapshot:
        """Return the snapshot."""
        state = self.session_state.get()
        index = MessageIndex.of(state)
        active_turn = None if state is None else state.active_turn_id
        sequences = snapshot_sequences(index.message_count, large_messages=index.large_messages)
        return AgentSnapshot(
            state=state,
            messages=self.messages.read(sequences),
            pending_interrupts=self.interrupts.get(),
            tool_calls=tuple(record for record in self.tool_calls.all() if record.turn_id == active_turn),
            usage=self.usage.get(),
            queued_message_count=self.queue.size() + self.steering.size(),
            queued_messages=(*self.queue.pending(), *self.steering.pending()),
            steered_messages=self.steered.get(),
        )
