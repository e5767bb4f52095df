"""Ports: what the Step and RPC use cases need from a host engine.

Each port is small and matches one piece of durable state. Reads see the
state as it was when the engine dispatched the call plus the call's own
writes; writes are staged and committed atomically with the use case's
decision, or not at all (the host engine guarantees this).
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from dex_agents.domain.events import AgentEvent
from dex_agents.domain.history import HistorySummary
from dex_agents.domain.interrupts import AgentInterrupt, AgentInterruptResolution
from dex_agents.domain.messages import AgentMessage, AgentUserMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.tools import AgentToolCall, ToolCallCompleted
from dex_agents.domain.turn_control import TurnCancelRequest
from dex_agents.domain.usage import AgentUsage


class SessionStateStore(Protocol):
    """The session state (``AGENT_STATE``)."""

    def get(self) -> AgentState | None:
        """Return the state, or ``None`` before the session started."""
        ...

    def set(self, state: AgentState) -> None:
        """Stage ``state``."""
        ...


class MessageLog(Protocol):
    """Stored messages (``AGENT_MESSAGES``), keyed by sequence."""

    def read(self, sequences: Sequence[int]) -> tuple[AgentMessage, ...]:
        """Return the messages at ``sequences``, in that order, skipping missing ones."""
        ...

    def append(self, message: AgentMessage) -> None:
        """Stage ``message`` at its sequence."""
        ...


class HistorySummaryStore(Protocol):
    """Summaries of compacted history (``AGENT_HISTORY_SUMMARIES``), one per compaction, keyed by its number."""

    def get(self, number: int) -> HistorySummary | None:
        """Return compaction ``number``'s summary, or ``None``."""
        ...

    def put(self, summary: HistorySummary) -> None:
        """Stage ``summary`` under its number (a repeated attempt overwrites the same slot)."""
        ...


class RunStateStore(Protocol):
    """The framework's run state of a turn waiting for tools (``FRAMEWORK_RUN_STATE``)."""

    def get(self) -> str | None:
        """Return the run state, or ``None`` outside a tool round."""
        ...

    def set(self, run_state: str | None) -> None:
        """Stage the run state; ``None`` clears it."""
        ...


class ToolCallStore(Protocol):
    """Tool-call records of the active turn (``AGENT_TOOL_CALLS``), keyed by call ID."""

    def get(self, tool_call_id: str) -> AgentToolCall | None:
        """Return one record, or ``None``."""
        ...

    def all(self) -> tuple[AgentToolCall, ...]:
        """Return every record, in ``deferral_order``."""
        ...

    def put(self, record: AgentToolCall) -> None:
        """Stage ``record``."""
        ...

    def delete(self, tool_call_id: str) -> None:
        """Stage the deletion of one record."""
        ...


class InterruptStore(Protocol):
    """Interrupts waiting for an answer (``PENDING_INTERRUPTS``)."""

    def get(self) -> tuple[AgentInterrupt, ...]:
        """Return the pending interrupts, oldest first."""
        ...

    def set(self, interrupts: Sequence[AgentInterrupt]) -> None:
        """Stage the pending interrupts."""
        ...


class UsageStore(Protocol):
    """Usage summed over the session (``AGENT_USAGE``)."""

    def get(self) -> AgentUsage:
        """Return the session's usage (zero before any model call)."""
        ...

    def set(self, usage: AgentUsage) -> None:
        """Stage the session's usage."""
        ...


class UserMessageQueue(Protocol):
    """User messages waiting for a turn (``QUEUED_USER_MESSAGES``; steered ones: `SteeringQueue`)."""

    def publish(self, message: AgentUserMessage) -> None:
        """Stage ``message`` at the end of the queue."""
        ...

    def size(self) -> int:
        """Return how many messages wait."""
        ...

    def pending(self) -> tuple[AgentUserMessage, ...]:
        """Return the waiting messages, oldest first (a host may need them loaded: RPCs that list them do)."""
        ...

    def withdraw(self, client_message_id: str) -> bool:
        """Stage the removal of the waiting message with this client message ID; ``False`` when none waits."""
        ...


class SteeringQueue(UserMessageQueue, Protocol):
    """Steered user messages no turn has taken yet (``STEERED_USER_MESSAGES``).

    The operations of `UserMessageQueue`; its own type so that a use case's
    field says which of the two queues it is given, and wiring can check it.
    """


class SteeredMessageStore(Protocol):
    """Steered messages of the running turn.

    Those it took and no model call saw yet (``STEERED_MESSAGES``), and those a
    model call saw (``SEEN_STEERED_MESSAGES``): these live only in the run state
    until the turn completes, so a turn that fails or is cancelled stores them.
    """

    def get(self) -> tuple[AgentUserMessage, ...]:
        """Return the ones no model call saw yet, oldest first."""
        ...

    def set(self, messages: Sequence[AgentUserMessage]) -> None:
        """Stage the ones no model call saw yet (empty clears)."""
        ...

    def seen(self) -> tuple[AgentUserMessage, ...]:
        """Return the ones a model call of the running turn saw, oldest first."""
        ...

    def set_seen(self, messages: Sequence[AgentUserMessage]) -> None:
        """Stage the ones a model call of the running turn saw (empty clears)."""
        ...


class CancelRequestStore(Protocol):
    """The latest request to cancel a turn (``TURN_CANCEL_REQUEST``); it names the turn it cancels."""

    def get(self) -> TurnCancelRequest | None:
        """Return it, or ``None`` when no turn was ever cancelled."""
        ...

    def set(self, request: TurnCancelRequest) -> None:
        """Stage it."""
        ...


class ResolutionPublisher(Protocol):
    """Answers to interrupts (``INTERRUPT_RESOLUTIONS``)."""

    def publish(self, resolution: AgentInterruptResolution) -> None:
        """Stage ``resolution`` under its interrupt ID."""
        ...


class ToolResultPublisher(Protocol):
    """Tool-call results that ``ResumeTurn`` waits for (``TOOL_CALL_RESULTS``)."""

    def publish(self, result: ToolCallCompleted) -> None:
        """Stage ``result``."""
        ...


class EventSink(Protocol):
    """Where live events go (the ``flow.agent_events`` Stream); best effort."""

    def emit(self, event: AgentEvent) -> None:
        """Send ``event``; may be called from any thread."""
        ...


class Heartbeat(Protocol):
    """Tells the engine the Step is alive."""

    async def __call__(self) -> None:
        """Record liveness."""
        ...


class Clock(Protocol):
    """The Worker's clock."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware UTC."""
        ...


class DeliveryLedger(Protocol):
    """The ``tool_call_started`` events the engine has durably received, read back outside the Step.

    A single-attempt tool Step marks its ``tool_call_started`` with a fresh
    delivery marker and reads it back through the ledger before it runs the
    tool; it reads the ledger first on start to find an earlier delivery of
    the same Step execution and attempt. A host reads what the engine stored
    (for Dex: the session's event Stream through a Client the Worker holds),
    never what the Step merely queued.
    """

    async def started(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int
    ) -> tuple[str, ...]:
        """Return the delivery markers of this Step attempt's stored ``tool_call_started`` events, oldest first."""
        ...

    async def confirm(
        self, flow_id: str, tool_call_id: str, *, step_execution_id: str, attempt: int, delivery: str
    ) -> tuple[str, ...]:
        """Wait until ``delivery``'s ``tool_call_started`` is stored; return the markers as `started` does.

        Raises:
            DeliveryUnconfirmedError: it was not stored in time (or the ledger cannot read).
        """
        ...
