"""``get_agent_snapshot``: the session as a UI needs it (query only).

State (``None`` before the start Step commits), the latest 200 messages, the
pending interrupts, the active turn's tool-call records, usage and the number
of queued user messages. Reads only the messages it returns: the latest 200
that fit in 2 MiB (`snapshot_sequences`). Works for a
stopped session, because it writes nothing.
"""

from dex_agents.application.ports import (
    InterruptStore,
    MessageLog,
    SessionStateStore,
    ToolCallStore,
    UsageStore,
    UserMessageQueue,
)
from dex_agents.domain.snapshot import AgentSnapshot, MessageIndex, snapshot_sequences


class GetAgentSnapshot:
    """Reads the session snapshot."""

    def __init__(
        self,
        *,
        state: SessionStateStore,
        messages: MessageLog,
        interrupts: InterruptStore,
        tool_calls: ToolCallStore,
        usage: UsageStore,
        queue: UserMessageQueue,
    ) -> None:
        self._state = state
        self._messages = messages
        self._interrupts = interrupts
        self._tool_calls = tool_calls
        self._usage = usage
        self._queue = queue

    async def execute(self) -> AgentSnapshot:
        """Return the snapshot."""
        state = self._state.get()
        index = MessageIndex.of(state)
        active_turn = None if state is None else state.active_turn_id
        sequences = snapshot_sequences(index.message_count, large_messages=index.large_messages)
        return AgentSnapshot(
            state=state,
            messages=self._messages.read(sequences),
            pending_interrupts=self._interrupts.get(),
            tool_calls=tuple(record for record in self._tool_calls.all() if record.turn_id == active_turn),
            usage=self._usage.get(),
            queued_message_count=self._queue.size(),
        )
