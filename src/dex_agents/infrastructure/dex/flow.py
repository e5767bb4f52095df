"""`AgentSessionFlow`: one Dex Flow type per agent; one Flow execution per session.

The Steps live in `dex_agents.infrastructure.dex.steps`. The RPCs are here:
``send_user_message`` and ``withdraw_user_message`` (transactional),
``resolve_interrupt`` and ``cancel_turn`` (lock ``PENDING_INTERRUPTS``), and the query-only ``get_agent_snapshot``,
``list_agent_messages``, ``get_agent_message_index`` and
``get_agent_message_count``. The query RPCs read only the ``AGENT_MESSAGES``
instances the caller loads, so `AgentSessionClient` loads exactly the messages
they return. Each RPC's decorator (`session_rpc`: loads, locks,
transactionality) comes from its `RpcDeclaration`
(`dex_agents.application.declarations`), and every RPC builds its use case
the same way: its ``wired`` factory over `dex_session_ports`.
"""

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import dex

from dex_agents.application.declarations import RPC_DECLARATIONS, RpcDeclaration, RpcName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.policies import HEARTBEAT_INTERVAL
from dex_agents.application.ports import Clock
from dex_agents.application.rpcs.cancel_turn import CancelTurn
from dex_agents.application.rpcs.get_agent_message_index import GetAgentMessageCount, GetAgentMessageIndex
from dex_agents.application.rpcs.get_agent_snapshot import GetAgentSnapshot
from dex_agents.application.rpcs.list_agent_messages import ListAgentMessages
from dex_agents.application.rpcs.resolve_interrupt import ResolveInterrupt
from dex_agents.application.rpcs.send_user_message import SendUserMessage
from dex_agents.application.rpcs.submit_tool_result import SubmitToolResult
from dex_agents.application.rpcs.withdraw_user_message import WithdrawUserMessage
from dex_agents.application.runner import AgentFrameworkRunner
from dex_agents.application.wiring import AgentSetup, Wired
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.interrupts import ResolveInterruptRequest, SubmitToolResultRequest
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.snapshot import AgentMessagesPage, AgentSnapshot, ListAgentMessagesRequest, MessageIndex
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.turn_control import CancelTurnRequest
from dex_agents.infrastructure.dex.deliveries import DexDeliveryLedger, UncheckedDeliveries
from dex_agents.infrastructure.dex.options import session_rpc
from dex_agents.infrastructure.dex.persistence import agent_events_stream, session_schema
from dex_agents.infrastructure.dex.session_step import SessionStep, StepDependencies
from dex_agents.infrastructure.dex.steps import STEP_CLASSES
from dex_agents.infrastructure.dex.stores import SystemClock, dex_session_ports
from dex_agents.infrastructure.step_tracing import step_tracer

RpcUseCaseT = TypeVar("RpcUseCaseT", bound=Wired)


class AgentSessionFlow(dex.Flow[AgentSessionStartInput]):
    """The durable session Flow of one agent: register one per agent, each with its own ``flow_type``."""

    def __init__(
        self,
        runner: AgentFrameworkRunner,
        *,
        flow_type: str,
        options: AgentSessionOptions | None = None,
        clock: Clock | None = None,
        heartbeat_interval: timedelta = HEARTBEAT_INTERVAL,
        confirm_deliveries: bool = True,
    ) -> None:
        """``confirm_deliveries=False`` opts out of reading single-attempt tool starts back (no Client needed).

        With the default, single-attempt tool Steps read their start back
        through a Client: the one `bind_client` names (`AgentContainer.worker`
        binds one), else one built for the server of the ``dex.AsyncWorker``
        that serves this Flow in the process. Without either, such a call is
        recorded ``failed``, with an error naming the fix, and never runs.
        """
        if not flow_type or "/" in flow_type:
            raise ValueError(f"flow_type must be non-empty and contain no '/', got {flow_type!r}")
        self._flow_type = flow_type
        self.options = options or AgentSessionOptions()
        self.runner = runner
        self.events_stream: dex.Stream[AgentEvent] = agent_events_stream(self.options.event_stream_capacity_bytes)
        self.deliveries: DexDeliveryLedger | UncheckedDeliveries = (
            DexDeliveryLedger(self.events_stream, flow=self) if confirm_deliveries else UncheckedDeliveries()
        )
        self._agent = AgentSetup(
            runner=runner, options=self.options, clock=clock or SystemClock(), deliveries=self.deliveries
        )
        self._deps = StepDependencies(
            agent=self._agent,
            stream=self.events_stream,
            heartbeat_interval=heartbeat_interval,
            tracer=step_tracer(self.options),
        )
        self._steps: list[SessionStep[Any]] = [cls(self._deps) for cls in STEP_CLASSES]
        for step in self._steps:
            self._deps.classes[step.name] = type(step)

    def bind_client(self, client_factory: Callable[[], dex.AsyncClient]) -> None:
        """Let this Worker's single-attempt tool Steps read the event Stream through ``client_factory()``.

        The Client is built on first use, on the Worker's event loop.
        """
        self.deliveries.bind(client_factory)

    async def close_client(self) -> None:
        """Close the Client `bind_client`'s factory built, if one was (call it once the Worker stopped)."""
        await self.deliveries.close()

    def get_flow_type(self) -> str:
        """Return this agent's Flow type."""
        return self._flow_type

    def get_steps(self) -> dex.StepList[AgentSessionStartInput]:
        """Return the session's Steps, ``StartAgentSession`` first."""
        start, *others = self._steps
        return dex.StepList.start_step(start).other_steps(*others)

    def get_persistence_schema(self) -> dex.PersistenceSchema:
        """Return the session's Attributes, Channels and this Flow type's Stream."""
        return session_schema(self.events_stream)

    def _wired(self, use_case: type[RpcUseCaseT], context: dex.Context) -> RpcUseCaseT:
        """Build an RPC's use case over the session's ports, reading the messages the caller loaded if declared."""
        declaration = _RPC_OF[use_case]
        ports = dex_session_ports(context, loaded_messages_only=declaration.loaded().caller_messages)
        return use_case.wired(ports, self._agent)

    @session_rpc(RpcName.SEND_USER_MESSAGE)
    async def send_user_message(self, context: dex.Context, message: AgentUserMessage) -> dex.RPCResult[bool]:
        """Queue a user message; ``False`` for blank or refused text (`text_refusal`)."""
        return dex.RPCResult(await self._wired(SendUserMessage, context).execute(message))

    @session_rpc(RpcName.WITHDRAW_USER_MESSAGE)
    async def withdraw_user_message(self, context: dex.Context, client_message_id: str) -> dex.RPCResult[bool]:
        """Remove the waiting message with this client message ID; ``False`` when no turn-free message has it."""
        return dex.RPCResult(await self._wired(WithdrawUserMessage, context).execute(client_message_id))

    @session_rpc(RpcName.CANCEL_TURN)
    async def cancel_turn(self, context: dex.Context, request: CancelTurnRequest) -> dex.RPCResult[bool]:
        """Request the active turn's cancel and reject its pending approvals; ``False`` when no turn runs."""
        return dex.RPCResult(await self._wired(CancelTurn, context).execute(request))

    @session_rpc(RpcName.RESOLVE_INTERRUPT)
    async def resolve_interrupt(self, context: dex.Context, request: ResolveInterruptRequest) -> dex.RPCResult[bool]:
        """Answer a pending interrupt; ``False`` when not pending (answered, cancelled, or expired)."""
        return dex.RPCResult(await self._wired(ResolveInterrupt, context).execute(request))

    @session_rpc(RpcName.SUBMIT_TOOL_RESULT)
    async def submit_tool_result(self, context: dex.Context, request: SubmitToolResultRequest) -> dex.RPCResult[str]:
        """Submit the outside result of a call waiting for it; the answer is a `SubmitToolResultAnswer` value."""
        answer = await self._wired(SubmitToolResult, context).execute(request)
        return dex.RPCResult(answer.value)

    @session_rpc(RpcName.GET_AGENT_SNAPSHOT)
    async def get_agent_snapshot(self, context: dex.Context) -> dex.RPCResult[AgentSnapshot]:
        """Return the snapshot, with the loaded messages among the latest 200."""
        return dex.RPCResult(await self._wired(GetAgentSnapshot, context).execute())

    @session_rpc(RpcName.LIST_AGENT_MESSAGES)
    async def list_agent_messages(
        self, context: dex.Context, request: ListAgentMessagesRequest
    ) -> dex.RPCResult[AgentMessagesPage]:
        """Return one page of messages, oldest first, from the loaded ones."""
        return dex.RPCResult(await self._wired(ListAgentMessages, context).execute(request))

    @session_rpc(RpcName.GET_AGENT_MESSAGE_INDEX)
    async def get_agent_message_index(self, context: dex.Context) -> dex.RPCResult[MessageIndex]:
        """Return the message count and the sizes of large messages, to plan what a snapshot or page loads."""
        return dex.RPCResult(await self._wired(GetAgentMessageIndex, context).execute())

    @session_rpc(RpcName.GET_AGENT_MESSAGE_COUNT)
    async def get_agent_message_count(self, context: dex.Context) -> dex.RPCResult[int]:
        """Return how many messages the session stored (0 before it started)."""
        return dex.RPCResult(await self._wired(GetAgentMessageCount, context).execute())


_RPC_OF: dict[type[Wired], RpcDeclaration] = {
    declaration.use_case: declaration for declaration in RPC_DECLARATIONS.values()
}
"""The declaration of every RPC, by its use case."""
