"""In-memory fakes of the channel ports and the event sink."""

from collections import deque

from dex_agents.domain.interrupts import AgentInterruptResolution
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.tools import ToolCallCompleted
from dex_agents.testing.memory._loads import OPEN, LoadGate


class InMemoryUserMessageQueue:
    """``QUEUED_USER_MESSAGES`` (or ``STEERED_USER_MESSAGES``): a first-in, first-out queue.

    As on Dex, `pending` is empty and `withdraw` refused in a handler that did not load the messages.
    """

    def __init__(self, *, gate: LoadGate = OPEN) -> None:
        self._queue: deque[AgentUserMessage] = deque()
        self._gate = gate

    def publish(self, message: AgentUserMessage) -> None:
        self._queue.append(message)

    def size(self) -> int:
        return len(self._queue)

    def pending(self) -> tuple[AgentUserMessage, ...]:
        if not self._gate.loaded.waiting_messages:
            return ()
        return tuple(self._queue)

    def withdraw(self, client_message_id: str) -> bool:
        self._gate.refuse("the waiting messages", "waiting", allowed=self._gate.loaded.waiting_messages)
        for message in self._queue:
            if message.client_message_id == client_message_id:
                self._queue.remove(message)
                return True
        return False

    def take_all(self) -> tuple[AgentUserMessage, ...]:
        """Consume every waiting message, as ``at_most(n)`` would."""
        taken = tuple(self._queue)
        self._queue.clear()
        return taken

    def take_one(self) -> AgentUserMessage | None:
        """Consume the oldest message, as ``for_one()`` would."""
        return self._queue.popleft() if self._queue else None


class InMemoryResolutionPublisher:
    """``INTERRUPT_RESOLUTIONS``: answers queued by interrupt ID."""

    def __init__(self) -> None:
        self.published: list[AgentInterruptResolution] = []
        self._unconsumed: dict[str, deque[AgentInterruptResolution]] = {}

    def publish(self, resolution: AgentInterruptResolution) -> None:
        self.published.append(resolution)
        self._unconsumed.setdefault(resolution.interrupt_id, deque()).append(resolution)

    def take_one(self, interrupt_id: str) -> AgentInterruptResolution | None:
        """Consume the oldest answer for ``interrupt_id``, as ``for_one(id)`` would."""
        waiting = self._unconsumed.get(interrupt_id)
        return waiting.popleft() if waiting else None


class InMemoryToolResultPublisher:
    """``TOOL_CALL_RESULTS``: every published result, and a consumable queue."""

    def __init__(self) -> None:
        self.published: list[ToolCallCompleted] = []
        self._unconsumed: deque[ToolCallCompleted] = deque()

    def publish(self, result: ToolCallCompleted) -> None:
        self.published.append(result)
        self._unconsumed.append(result)

    @property
    def available(self) -> int:
        """Results published and not consumed yet."""
        return len(self._unconsumed)

    def take(self, count: int) -> tuple[ToolCallCompleted, ...]:
        """Consume up to ``count`` results, oldest first, as ``for_n(count)`` would."""
        taken: list[ToolCallCompleted] = []
        while self._unconsumed and len(taken) < count:
            taken.append(self._unconsumed.popleft())
        return tuple(taken)

    def published_for(self, tool_call_id: str) -> list[ToolCallCompleted]:
        """Every result published for one call."""
        return [result for result in self.published if result.tool_call_id == tool_call_id]
