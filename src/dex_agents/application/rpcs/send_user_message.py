"""``send_user_message``: queue a user message (transactional).

Answers ``False`` and queues nothing for blank text, for any text
`text_refusal` refuses (too large, a lone surrogate, NUL) and for a
malformed ``client_message_id``; else queues the
message and answers ``True``: a ``steer`` message sent while a turn runs goes
to ``STEERED_USER_MESSAGES``, which the running turn takes at its next
model-call boundary (``ResumeTurn``, or ``RunModel`` through it after a
response's one call); any other message, and a steered one
while no turn runs, goes to ``QUEUED_USER_MESSAGES`` for the next turn. `AgentSessionClient` applies
the same checks before it sends, and raises `InvalidInputError` with the
reason; this check is for callers that invoke the RPC directly.
"""

import attrs

from dex_agents.application.inputs import id_refusal, text_refusal
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import SessionStateStore, SteeringQueue, UserMessageQueue
from dex_agents.application.wiring import Wired
from dex_agents.domain.messages import AgentUserMessage, MessageDelivery


@attrs.frozen(kw_only=True)
class SendUserMessage(Wired):
    """Queues a user message for the session's next turn."""

    queue: UserMessageQueue
    steering: SteeringQueue
    session_state: SessionStateStore
    options: AgentSessionOptions

    async def execute(self, message: AgentUserMessage) -> bool:
        """Queue ``message``; ``False`` when it is blank or refused."""
        if text_refusal(message.text, options=self.options, field="text", what="the user message") is not None:
            return False
        if message.client_message_id is not None and id_refusal(
            message.client_message_id, field="client_message_id", what="the client message ID"
        ):
            return False
        state = self.session_state.get()
        if message.delivery is MessageDelivery.STEER and state is not None and state.active_turn_id is not None:
            self.steering.publish(message)
        else:
            self.queue.publish(message)
        return True
