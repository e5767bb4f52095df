"""``withdraw_user_message``: remove a waiting user message no turn has taken (transactional).

Input: the message's ``client_message_id`` (the ID `AgentSessionClient.submit_user_message`
returns in its receipt, or the one the caller gave). Looks in the queue of
queued messages, then in the queue of steered messages no turn has taken yet;
removes the first message with that ID and answers ``True``. ``False`` when no
waiting message has it: never sent, already withdrawn, or taken by a turn
(its text is then stored, or seen by a model call).
"""

import attrs

from dex_agents.application.inputs import id_refusal
from dex_agents.application.ports import SteeringQueue, UserMessageQueue
from dex_agents.application.wiring import Wired


@attrs.frozen(kw_only=True)
class WithdrawUserMessage(Wired):
    """Removes one waiting user message by its client message ID."""

    queue: UserMessageQueue
    steering: SteeringQueue

    async def execute(self, client_message_id: str) -> bool:
        """Withdraw the message; ``False`` when none waits with this ID (or the ID is malformed)."""
        if id_refusal(client_message_id, field="message_id", what="the message ID") is not None:
            return False
        return self.queue.withdraw(client_message_id) or self.steering.withdraw(client_message_id)
