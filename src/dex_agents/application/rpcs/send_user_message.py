"""``send_user_message``: queue a user message (transactional).

Answers ``False`` for blank text and queues nothing; else queues the message
for the next turn and answers ``True``.
"""

from dex_agents.application.ports import UserMessageQueue
from dex_agents.domain.messages import AgentUserMessage


class SendUserMessage:
    """Queues a user message for the session's next turn."""

    def __init__(self, *, queue: UserMessageQueue) -> None:
        self._queue = queue

    async def execute(self, message: AgentUserMessage) -> bool:
        """Queue ``message``; ``False`` when it is blank."""
        if message.is_blank:
            return False
        self._queue.publish(message)
        return True
