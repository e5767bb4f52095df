"""``list_agent_messages``: one page of stored messages, oldest first (query only).

The page starts after ``after_sequence``; its size is clamped to 1..200 and
ends early rather than hold over 2 MiB (`page_sequences`). Reads only the
messages of the page.
"""

import attrs

from dex_agents.application.ports import MessageLog, SessionStateStore
from dex_agents.application.wiring import Wired
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.snapshot import AgentMessagesPage, ListAgentMessagesRequest, MessageIndex, page_sequences


@attrs.frozen(kw_only=True)
class ListAgentMessages(Wired):
    """Reads one page of messages."""

    session_state: SessionStateStore
    messages: MessageLog

    async def execute(self, request: ListAgentMessagesRequest) -> AgentMessagesPage:
        """Return the page."""
        index = MessageIndex.of(self.session_state.get())
        sequences, next_after = page_sequences(
            after_sequence=request.after_sequence,
            limit=request.limit,
            message_count=index.message_count,
            large_messages=index.large_messages,
        )
        messages = self.messages.read(sequences)
        if len(messages) < len(sequences):
            # A message the caller did not load (stored after it planned the page) is missing:
            # end the page before the gap, so following next_after_sequence never skips one.
            contiguous: list[AgentMessage] = []
            for message, expected in zip(messages, sequences, strict=False):
                if message.sequence != expected:
                    break
                contiguous.append(message)
            messages = tuple(contiguous)
            next_after = messages[-1].sequence if messages else request.after_sequence
        return AgentMessagesPage(messages=messages, next_after_sequence=next_after)
