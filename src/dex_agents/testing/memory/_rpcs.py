"""`InMemorySessionRpcs`: the in-memory session's RPCs, one method each, as the Dex binding runs them.

Each runs its use case inside `InMemorySessionSteps.rpc`, so the ports refuse a
read the RPC's declaration (`RPC_DECLARATIONS`) does not load, as Dex does.
"""

from dex_agents.application.declarations import RpcName
from dex_agents.application.rpcs.cancel_turn import CancelTurn
from dex_agents.application.rpcs.get_agent_message_index import GetAgentMessageCount, GetAgentMessageIndex
from dex_agents.application.rpcs.get_agent_snapshot import GetAgentSnapshot
from dex_agents.application.rpcs.list_agent_messages import ListAgentMessages
from dex_agents.application.rpcs.resolve_interrupt import ResolveInterrupt
from dex_agents.application.rpcs.send_user_message import SendUserMessage
from dex_agents.application.rpcs.submit_tool_result import SubmitToolResult
from dex_agents.application.rpcs.withdraw_user_message import WithdrawUserMessage
from dex_agents.domain.interrupts import ResolveInterruptRequest, SubmitToolResultAnswer, SubmitToolResultRequest
from dex_agents.domain.messages import AgentUserMessage, MessageDelivery
from dex_agents.domain.snapshot import AgentMessagesPage, AgentSnapshot, ListAgentMessagesRequest, MessageIndex
from dex_agents.domain.turn_control import CancelTurnRequest
from dex_agents.testing.memory._host import InMemorySessionSteps


class InMemorySessionRpcs(InMemorySessionSteps):
    """`InMemorySessionSteps` with one method per RPC."""

    async def send_user_message(
        self, text: str, *, client_message_id: str | None = None, delivery: MessageDelivery = MessageDelivery.QUEUE
    ) -> bool:
        with self.rpc(RpcName.SEND_USER_MESSAGE):
            return await SendUserMessage.wired(self.ports, self.agent).execute(
                AgentUserMessage(text=text, client_message_id=client_message_id, delivery=delivery)
            )

    async def withdraw_user_message(self, client_message_id: str) -> bool:
        with self.rpc(RpcName.WITHDRAW_USER_MESSAGE):
            return await WithdrawUserMessage.wired(self.ports, self.agent).execute(client_message_id)

    async def cancel_turn(self, reason: str | None = None) -> bool:
        with self.rpc(RpcName.CANCEL_TURN):
            return await CancelTurn.wired(self.ports, self.agent).execute(CancelTurnRequest(reason=reason))

    async def resolve_interrupt(
        self,
        interrupt_id: str,
        *,
        approved: bool,
        rejection_message: str | None = None,
        approver: str | None = None,
        call_digest: str | None = None,
    ) -> bool:
        request = ResolveInterruptRequest(
            interrupt_id=interrupt_id,
            approved=approved,
            rejection_message=rejection_message,
            approver=approver,
            call_digest=call_digest,
        )
        with self.rpc(RpcName.RESOLVE_INTERRUPT):
            return await ResolveInterrupt.wired(self.ports, self.agent).execute(request)

    async def submit_tool_result(
        self, tool_call_id: str, *, result: str | None = None, error: str | None = None
    ) -> SubmitToolResultAnswer:
        """The ``submit_tool_result`` RPC; ``result`` is JSON text, as the client sends it."""
        request = SubmitToolResultRequest(tool_call_id=tool_call_id, result=result, error=error)
        with self.rpc(RpcName.SUBMIT_TOOL_RESULT):
            return await SubmitToolResult.wired(self.ports, self.agent).execute(request)

    async def get_agent_snapshot(self) -> AgentSnapshot:
        with self.rpc(RpcName.GET_AGENT_SNAPSHOT):
            return await GetAgentSnapshot.wired(self.ports, self.agent).execute()

    async def list_agent_messages(self, *, after_sequence: int = 0, limit: int = 50) -> AgentMessagesPage:
        with self.rpc(RpcName.LIST_AGENT_MESSAGES):
            return await ListAgentMessages.wired(self.ports, self.agent).execute(
                ListAgentMessagesRequest(after_sequence=after_sequence, limit=limit)
            )

    async def get_agent_message_index(self) -> MessageIndex:
        with self.rpc(RpcName.GET_AGENT_MESSAGE_INDEX):
            return await GetAgentMessageIndex.wired(self.ports, self.agent).execute()

    async def get_agent_message_count(self) -> int:
        with self.rpc(RpcName.GET_AGENT_MESSAGE_COUNT):
            return await GetAgentMessageCount.wired(self.ports, self.agent).execute()
