"""In-memory fakes of the state ports: each one just holds its values.

A real host stages writes and commits them with the Step's decision; these
fakes apply every write at once, which is what a committed Step looks like.
The ports of AttributeMaps refuse, within a Step attempt or RPC call, a read its
declaration does not cover (`LoadGate`), as Dex does.
"""

import contextlib
from collections.abc import Iterator, Sequence

from dex_agents.domain.history import HistorySummary, ModelWindow
from dex_agents.domain.interrupts import AgentInterrupt
from dex_agents.domain.messages import AgentMessage, AgentUserMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.tools import AgentToolCall
from dex_agents.domain.turn_control import TurnCancelRequest
from dex_agents.domain.usage import AgentUsage
from dex_agents.testing.memory._loads import OPEN, LoadGate


class InMemorySessionStateStore:
    """``AGENT_STATE``."""

    def __init__(self, state: AgentState | None = None) -> None:
        self.value = state

    def get(self) -> AgentState | None:
        return self.value

    def set(self, state: AgentState) -> None:
        self.value = state

    @property
    def current(self) -> AgentState:
        """The state, which a test expects to exist."""
        assert self.value is not None, "the session has not started"
        return self.value


class InMemoryMessageLog:
    """``AGENT_MESSAGES``; refuses to overwrite a sequence, which no Step may do."""

    def __init__(self, messages: Sequence[AgentMessage] = (), *, gate: LoadGate = OPEN) -> None:
        self._by_sequence: dict[int, AgentMessage] = {}
        self.reads: list[tuple[int, ...]] = []
        self._loaded: range | None = None
        self._gate = gate
        for message in messages:
            self.append(message)

    def read(self, sequences: Sequence[int]) -> tuple[AgentMessage, ...]:
        self.reads.append(tuple(sequences))
        loaded = self._gate.loaded
        if loaded.caller_messages:
            sequences = [s for s in sequences if loaded.allows_message(s)]
        for sequence in sequences:
            self._gate.refuse(f"message {sequence}", ("message", sequence), allowed=loaded.allows_message(sequence))
        if self._loaded is not None:
            outside = [s for s in sequences if s not in self._loaded]
            if outside:
                raise AssertionError(f"read messages {outside[:5]} outside the loaded window {self._loaded}")
        return tuple(self._by_sequence[s] for s in sequences if s in self._by_sequence)

    @contextlib.contextmanager
    def loading(self, window: ModelWindow | None) -> Iterator[None]:
        """Within the block, refuse reads outside ``window`` (as a host that loaded only it would); ``None``: any."""
        self._loaded = None if window is None else window.sequences
        try:
            yield
        finally:
            self._loaded = None

    def append(self, message: AgentMessage) -> None:
        if message.sequence in self._by_sequence:
            raise AssertionError(f"message sequence {message.sequence} is already stored")
        self._gate.wrote(("message", message.sequence))
        self._by_sequence[message.sequence] = message

    @property
    def all(self) -> tuple[AgentMessage, ...]:
        """Every stored message, in sequence order."""
        return tuple(self._by_sequence[s] for s in sorted(self._by_sequence))

    @property
    def texts(self) -> tuple[str | None, ...]:
        """The display text of every stored message, in sequence order."""
        return tuple(message.text for message in self.all)


class InMemoryRunStateStore:
    """``FRAMEWORK_RUN_STATE``."""

    def __init__(self, run_state: str | None = None, *, gate: LoadGate = OPEN) -> None:
        self.value = run_state
        self._gate = gate

    def get(self) -> str | None:
        self._gate.refuse("the run state", "run_state", allowed=self._gate.loaded.run_state)
        return self.value

    def set(self, run_state: str | None) -> None:
        self._gate.wrote("run_state")
        self.value = run_state


class InMemoryToolCallStore:
    """``AGENT_TOOL_CALLS``, keyed by tool-call ID."""

    def __init__(self, records: Sequence[AgentToolCall] = (), *, gate: LoadGate = OPEN) -> None:
        self._by_id = {record.tool_call_id: record for record in records}
        self._gate = gate

    def get(self, tool_call_id: str) -> AgentToolCall | None:
        allowed = self._gate.loaded.allows_tool_call(tool_call_id)
        self._gate.refuse(f"the tool call {tool_call_id!r}", ("tool_call", tool_call_id), allowed=allowed)
        return self._by_id.get(tool_call_id)

    def all(self) -> tuple[AgentToolCall, ...]:
        self._gate.refuse("every tool call", "tool_calls", allowed=self._gate.loaded.tool_calls is None)
        return tuple(sorted(self._by_id.values(), key=lambda record: record.deferral_order))

    def put(self, record: AgentToolCall) -> None:
        self._gate.wrote(("tool_call", record.tool_call_id))
        self._by_id[record.tool_call_id] = record

    def delete(self, tool_call_id: str) -> None:
        self._gate.wrote(("tool_call", tool_call_id))
        self._by_id.pop(tool_call_id, None)

    def __getitem__(self, tool_call_id: str) -> AgentToolCall:
        return self._by_id[tool_call_id]


class InMemoryInterruptStore:
    """``PENDING_INTERRUPTS``."""

    def __init__(self, interrupts: Sequence[AgentInterrupt] = ()) -> None:
        self.value = tuple(interrupts)

    def get(self) -> tuple[AgentInterrupt, ...]:
        return self.value

    def set(self, interrupts: Sequence[AgentInterrupt]) -> None:
        self.value = tuple(interrupts)

    @property
    def ids(self) -> tuple[str, ...]:
        """The pending interrupt IDs, oldest first."""
        return tuple(interrupt.interrupt_id for interrupt in self.value)


class InMemoryUsageStore:
    """``AGENT_USAGE``."""

    def __init__(self, usage: AgentUsage | None = None) -> None:
        self.value = AgentUsage() if usage is None else usage

    def get(self) -> AgentUsage:
        return self.value

    def set(self, usage: AgentUsage) -> None:
        self.value = usage


class InMemoryHistorySummaryStore:
    """``AGENT_HISTORY_SUMMARIES``: one summary per compaction number."""

    def __init__(self, *, gate: LoadGate = OPEN) -> None:
        self.by_number: dict[int, HistorySummary] = {}
        self._gate = gate

    def get(self, number: int) -> HistorySummary | None:
        self._gate.refuse(f"summary {number}", ("summary", number), allowed=self._gate.loaded.allows_summary(number))
        return self.by_number.get(number)

    def put(self, summary: HistorySummary) -> None:
        self._gate.wrote(("summary", summary.number))
        self.by_number[summary.number] = summary


class InMemorySteeredMessageStore:
    """``STEERED_MESSAGES`` and ``SEEN_STEERED_MESSAGES``."""

    def __init__(self) -> None:
        self.value: tuple[AgentUserMessage, ...] = ()
        self.seen_value: tuple[AgentUserMessage, ...] = ()

    def get(self) -> tuple[AgentUserMessage, ...]:
        return self.value

    def set(self, messages: Sequence[AgentUserMessage]) -> None:
        self.value = tuple(messages)

    def seen(self) -> tuple[AgentUserMessage, ...]:
        return self.seen_value

    def set_seen(self, messages: Sequence[AgentUserMessage]) -> None:
        self.seen_value = tuple(messages)


class InMemoryCancelRequestStore:
    """``TURN_CANCEL_REQUEST``."""

    def __init__(self) -> None:
        self.value: TurnCancelRequest | None = None

    def get(self) -> TurnCancelRequest | None:
        return self.value

    def set(self, request: TurnCancelRequest) -> None:
        self.value = request
