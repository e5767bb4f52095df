"""``get_agent_message_index`` and ``get_agent_message_count``: what a caller needs to plan its loads (query only).

The index is the message count and the sizes of large messages, from the
session state alone; a client reads it first to load exactly the messages a
snapshot or a page returns. Before the session started both are empty (0).
"""

import attrs

from dex_agents.application.ports import SessionStateStore
from dex_agents.application.wiring import Wired
from dex_agents.domain.snapshot import MessageIndex


@attrs.frozen(kw_only=True)
class GetAgentMessageIndex(Wired):
    """Reads the message index."""

    session_state: SessionStateStore

    async def execute(self) -> MessageIndex:
        """Return the message count and the sizes of large messages."""
        return MessageIndex.of(self.session_state.get())


@attrs.frozen(kw_only=True)
class GetAgentMessageCount(Wired):
    """Reads how many messages the session stored."""

    session_state: SessionStateStore

    async def execute(self) -> int:
        """Return the stored message count (0 before the session started)."""
        state = self.session_state.get()
        return 0 if state is None else state.message_count
