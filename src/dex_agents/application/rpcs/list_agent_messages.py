"""``list_agent_messages``: one page of stored messages, oldest first (query only).

The page starts after ``after_sequence``; its size is clamped to 1..200. Reads
only the messages of the page.
"""

from dex_agents.application.ports import MessageLog, SessionStateStore
from dex_agents.domain.snapshot import AgentMessagesPage, ListAgentMessagesRequest, page_sequences


class ListAgentMessages:
    """Reads one page of messages."""

    def __init__(self, *, state: SessionStateStore, messages: MessageLog) -> None:
        self._state = state
        self._messages = messages

    async def execute(self, request: ListAgentMessagesRequest) -> AgentMessagesPage:
        """Return the page."""
        state = self._state.get()
        sequences, next_after = page_sequences(
            after_sequence=request.after_sequence,
            limit=request.limit,
            message_count=0 if state is None else state.message_count,
        )
        return AgentMessagesPage(messages=self._messages.read(sequences), next_after_sequence=next_after)
