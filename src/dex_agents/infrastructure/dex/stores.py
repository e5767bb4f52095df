"""Dex-backed implementations of the application's ports, over one handler Context.

Reads see the state Dex sent with the call plus the call's own staged writes;
writes are staged and commit with the handler's decision. AttributeMap
instances are readable only when the call loaded them: each Step and RPC
declares its loads in `dex_agents.application.declarations`.
"""

import asyncio
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Generic, TypeVar

import dex

from dex_agents.application.wiring import SessionPorts
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.history import HistorySummary, summary_key
from dex_agents.domain.interrupts import AgentInterrupt, AgentInterruptResolution
from dex_agents.domain.limits import utf8_size
from dex_agents.domain.messages import AgentMessage, AgentUserMessage, message_sequence_key
from dex_agents.domain.session import AgentState
from dex_agents.domain.tools import AgentToolCall, ToolCallCompleted
from dex_agents.domain.usage import AgentUsage
from dex_agents.infrastructure.dex.frames import count_write
from dex_agents.infrastructure.dex.persistence import (
    AGENT_HISTORY_SUMMARIES,
    AGENT_MESSAGES,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    FRAMEWORK_RUN_STATE,
    FRAMEWORK_RUN_STATES,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    RUN_STATE_KEY,
    SEEN_STEERED_MESSAGES,
    STEERED_MESSAGES,
    STEERED_USER_MESSAGES,
    TOOL_CALL_RESULTS,
    TURN_CANCEL_REQUEST,
    TURNS_ENDED,
)
from dex_agents.infrastructure.dex.run_state_parts import (
    ChainSize,
    chain_state,
    is_part_key,
    next_parts,
    part_key,
    part_number,
)

ValueT = TypeVar("ValueT")


class DexAttributeStore(Generic[ValueT]):
    """One Attribute, read and staged whole (``AGENT_STATE``, ``TURN_CANCEL_REQUEST``)."""

    def __init__(self, context: dex.Context, attribute: dex.Attribute[ValueT]) -> None:
        self._context = context
        self._attribute = attribute

    def get(self) -> ValueT | None:
        """Return the value, or ``None`` while the Attribute has none."""
        value: ValueT | None = self._attribute.get(self._context)
        return value

    def set(self, value: ValueT) -> None:
        """Stage ``value``."""
        self._attribute.set(self._context, value)


class DexSessionStateStore(DexAttributeStore[AgentState]):
    """``AGENT_STATE``; staging a state also stages ``TURNS_ENDED`` when its count of ended turns changed."""

    def __init__(self, context: dex.Context) -> None:
        super().__init__(context, AGENT_STATE)

    def set(self, value: AgentState) -> None:
        """Stage ``value`` (and the ended-turn count it implies)."""
        super().set(value)
        ended = value.turn_count - (value.active_turn_id is not None)
        if TURNS_ENDED.get(self._context) != ended:
            TURNS_ENDED.set(self._context, ended)


class DexMessageLog:
    """``AGENT_MESSAGES``; reads only loaded instances."""

    def __init__(self, context: dex.Context) -> None:
        self._context = context

    def read(self, sequences: Sequence[int]) -> tuple[AgentMessage, ...]:
        """Return the stored messages at ``sequences`` (missing ones are skipped).

        Raises:
            dex.AttributeMapNotLoadedError: a sequence's instance was not loaded.
        """
        found: list[AgentMessage] = []
        for sequence in sequences:
            message: AgentMessage | None = AGENT_MESSAGES.get(self._context, message_sequence_key(sequence))
            if message is not None:
                found.append(message)
        return tuple(found)

    def append(self, message: AgentMessage) -> None:
        """Stage ``message`` at its sequence."""
        AGENT_MESSAGES.set(self._context, message_sequence_key(message.sequence), message)


class DexHistorySummaryStore:
    """``AGENT_HISTORY_SUMMARIES``; reads only loaded instances."""

    def __init__(self, context: dex.Context) -> None:
        self._context = context

    def get(self, number: int) -> HistorySummary | None:
        """Return compaction ``number``'s summary, or ``None``.

        Raises:
            dex.AttributeMapNotLoadedError: its instance was not loaded.
        """
        summary: HistorySummary | None = AGENT_HISTORY_SUMMARIES.get(self._context, summary_key(number))
        return summary

    def put(self, summary: HistorySummary) -> None:
        """Stage ``summary`` under its number."""
        count_write("AGENT_HISTORY_SUMMARIES", utf8_size(summary.text))
        AGENT_HISTORY_SUMMARIES.set(self._context, summary_key(summary.number), summary)


class DexRunStateStore:
    """``FRAMEWORK_RUN_STATES`` as a chain of parts (`dex_agents.infrastructure.dex.run_state_parts`), loaded whole.

    Also reads the layouts of earlier versions: the whole state in instance ``current``, or in the plain
    Attribute ``FRAMEWORK_RUN_STATE``. The next write replaces them with a chain.
    """

    def __init__(self, context: dex.Context) -> None:
        self._context = context
        self._chain: tuple[tuple[str, ...], str, ChainSize] | None = None
        """The part keys this call last read or wrote, the state they make and their size: a write after a read
        rebuilds nothing."""

    def _layout(self) -> tuple[str, tuple[str, ...]]:
        """The whole state an earlier layout holds (instance ``current``, else the plain Attribute), and the part keys.

        ``""`` when no earlier layout holds one; the keys in chain order.
        """
        keys = FRAMEWORK_RUN_STATES.get_all_instance_keys(self._context)
        whole = FRAMEWORK_RUN_STATES.get(self._context, RUN_STATE_KEY) if RUN_STATE_KEY in keys else ""
        if not whole:
            whole = FRAMEWORK_RUN_STATE.get(self._context) or ""
        return whole, tuple(sorted((key for key in keys if is_part_key(key)), key=part_number))

    def _chain_of(self, part_keys: tuple[str, ...]) -> tuple[str, ChainSize]:
        """The state the parts make and their size."""
        if self._chain is not None and self._chain[0] == part_keys:
            return self._chain[1], self._chain[2]
        values: list[str] = [FRAMEWORK_RUN_STATES.get(self._context, key) for key in part_keys]
        state, size = chain_state(values), ChainSize.of(values)
        self._chain = (part_keys, state, size)
        return state, size

    def get(self) -> str | None:
        """Return the run state, or ``None``.

        Raises:
            dex.AttributeMapNotLoadedError: the call did not load ``FRAMEWORK_RUN_STATES``.
        """
        whole, part_keys = self._layout()
        if whole:
            return whole
        return (self._chain_of(part_keys)[0] if part_keys else None) or None

    def set(self, run_state: str | None) -> None:
        """Stage the run state; ``None`` deletes it. A state in an earlier layout is cleared either way.

        Raises:
            dex.AttributeMapNotLoadedError: the call did not load ``FRAMEWORK_RUN_STATES``.
        """
        whole, part_keys = self._layout()
        if whole:
            if FRAMEWORK_RUN_STATE.get(self._context):
                FRAMEWORK_RUN_STATE.delete(self._context)
            FRAMEWORK_RUN_STATES.delete(self._context, RUN_STATE_KEY)
        if run_state is None:
            for key in part_keys:
                FRAMEWORK_RUN_STATES.delete(self._context, key)
            self._chain = None
            return
        previous, size = (None, ChainSize()) if whole or not part_keys else self._chain_of(part_keys)
        writes = next_parts(previous, part_keys, size, run_state)
        for key in writes.delete:
            FRAMEWORK_RUN_STATES.delete(self._context, key)
        for key, value in writes.set.items():
            count_write("FRAMEWORK_RUN_STATES", utf8_size(value))
            FRAMEWORK_RUN_STATES.set(self._context, key, value)
        if part_key(0) in writes.set:
            size = ChainSize()
        for value in writes.set.values():
            size = size.plus(value)
        kept = tuple(key for key in part_keys if key not in writes.delete)
        self._chain = (tuple(sorted({*kept, *writes.set}, key=part_number)), run_state, size)


class DexToolCallStore:
    """``AGENT_TOOL_CALLS``; ``all`` needs the whole map loaded, ``get`` the instance."""

    def __init__(self, context: dex.Context) -> None:
        self._context = context

    def get(self, tool_call_id: str) -> AgentToolCall | None:
        """Return one record, or ``None``."""
        record: AgentToolCall | None = AGENT_TOOL_CALLS.get(self._context, tool_call_id)
        return record

    def all(self) -> tuple[AgentToolCall, ...]:
        """Return every record, in ``deferral_order``."""
        keys = AGENT_TOOL_CALLS.get_all_instance_keys(self._context)
        records = [AGENT_TOOL_CALLS.get(self._context, key) for key in keys]
        return tuple(sorted(records, key=lambda r: r.deferral_order))

    def put(self, record: AgentToolCall) -> None:
        """Stage ``record``."""
        AGENT_TOOL_CALLS.set(self._context, record.tool_call_id, record)

    def delete(self, tool_call_id: str) -> None:
        """Stage the deletion of one record."""
        AGENT_TOOL_CALLS.delete(self._context, tool_call_id)


class DexInterruptStore:
    """``PENDING_INTERRUPTS``."""

    def __init__(self, context: dex.Context) -> None:
        self._context = context

    def get(self) -> tuple[AgentInterrupt, ...]:
        """Return the pending interrupts."""
        return tuple(PENDING_INTERRUPTS.get(self._context) or ())

    def set(self, interrupts: Sequence[AgentInterrupt]) -> None:
        """Stage the pending interrupts."""
        PENDING_INTERRUPTS.set(self._context, list(interrupts))


class DexUsageStore:
    """``AGENT_USAGE``."""

    def __init__(self, context: dex.Context) -> None:
        self._context = context

    def get(self) -> AgentUsage:
        """Return the session's usage."""
        usage: AgentUsage | None = AGENT_USAGE.get(self._context)
        return AgentUsage() if usage is None else usage

    def set(self, usage: AgentUsage) -> None:
        """Stage the session's usage."""
        AGENT_USAGE.set(self._context, usage)


class DexUserMessageQueue:
    """``QUEUED_USER_MESSAGES`` (or, given that Channel, ``STEERED_USER_MESSAGES``).

    `pending` and `withdraw` need the Channel's messages loaded (``load_channels``),
    which only the RPCs that list or withdraw messages declare; Dex lets only an
    RPC delete a Channel message.
    """

    def __init__(self, context: dex.Context, channel: "dex.Channel[AgentUserMessage]" = QUEUED_USER_MESSAGES) -> None:
        self._context = context
        self._channel = channel

    def publish(self, message: AgentUserMessage) -> None:
        """Stage ``message``."""
        self._channel.publish(self._context, message)

    def size(self) -> int:
        """Return how many messages wait (Dex sends sizes to every handler)."""
        return self._channel.size(self._context)

    def pending(self) -> tuple[AgentUserMessage, ...]:
        """Return the waiting messages, oldest first; empty when this call did not load them."""
        try:
            return tuple(message.value for message in self._channel.pending_messages(self._context))
        except dex.ChannelMessagesNotLoadedError:
            return ()

    def withdraw(self, client_message_id: str) -> bool:
        """Stage the deletion of the waiting message with this client message ID; ``False`` when none waits."""
        for message in self._channel.pending_messages(self._context):
            if message.value.client_message_id == client_message_id:
                self._channel.delete(self._context, message.message_id)
                return True
        return False


class DexSteeredMessageStore:
    """``STEERED_MESSAGES`` and ``SEEN_STEERED_MESSAGES``."""

    def __init__(self, context: dex.Context) -> None:
        self._context = context

    def get(self) -> tuple[AgentUserMessage, ...]:
        """Return the steered messages the running turn took, oldest first."""
        return self._read(STEERED_MESSAGES)

    def set(self, messages: Sequence[AgentUserMessage]) -> None:
        """Stage them; empty deletes the Attribute."""
        self._stage(STEERED_MESSAGES, messages)

    def seen(self) -> tuple[AgentUserMessage, ...]:
        """Return the steered messages a model call of the running turn saw, oldest first."""
        return self._read(SEEN_STEERED_MESSAGES)

    def set_seen(self, messages: Sequence[AgentUserMessage]) -> None:
        """Stage them; empty deletes the Attribute."""
        self._stage(SEEN_STEERED_MESSAGES, messages)

    def _read(self, attribute: dex.Attribute[list[AgentUserMessage]]) -> tuple[AgentUserMessage, ...]:
        messages: list[AgentUserMessage] | None = attribute.get(self._context)
        return tuple(messages or ())

    def _stage(self, attribute: dex.Attribute[list[AgentUserMessage]], messages: Sequence[AgentUserMessage]) -> None:
        if messages:
            attribute.set(self._context, list(messages))
        elif attribute.get(self._context) is not None:  # no delete written for an Attribute that has no value
            attribute.delete(self._context)


class DexResolutionPublisher:
    """``INTERRUPT_RESOLUTIONS``."""

    def __init__(self, context: dex.Context) -> None:
        self._context = context

    def publish(self, resolution: AgentInterruptResolution) -> None:
        """Stage ``resolution`` under its interrupt ID."""
        INTERRUPT_RESOLUTIONS.publish(self._context, resolution.interrupt_id, resolution)


class DexToolResultPublisher:
    """``TOOL_CALL_RESULTS``."""

    def __init__(self, context: dex.Context) -> None:
        self._context = context

    def publish(self, result: ToolCallCompleted) -> None:
        """Stage ``result``."""
        TOOL_CALL_RESULTS.publish(self._context, result)


class StreamEventSink:
    """Writes events to a Flow type's live event Stream from any thread.

    The SDK's Stream write must run on the Worker's event loop, so a write from
    another thread is handed to that loop.
    """

    def __init__(self, context: dex.AsyncContext, stream: dex.Stream[AgentEvent]) -> None:
        self._context = context
        self._stream = stream
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    def emit(self, event: AgentEvent) -> None:
        """Write ``event`` (queued on the Worker loop when called from another thread)."""
        if threading.get_ident() == self._loop_thread:
            self._stream.write(self._context, event)
        else:
            self._loop.call_soon_threadsafe(self._stream.write, self._context, event)

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the Worker loop after ``delay`` seconds (a writer's flush of held deltas)."""
        if threading.get_ident() == self._loop_thread:
            self._loop.call_later(delay, callback)
        else:
            self._loop.call_soon_threadsafe(self._loop.call_later, delay, callback)


class SystemClock:
    """The Worker's clock, in UTC."""

    def now(self) -> datetime:
        """Return the current time."""
        return datetime.now(UTC)


class DexLoadedMessageLog(DexMessageLog):
    """A message log for query RPCs: skips the instances the caller did not load."""

    def read(self, sequences: Sequence[int]) -> tuple[AgentMessage, ...]:
        """Return the loaded messages at ``sequences``, in that order."""
        found: list[AgentMessage] = []
        for sequence in sequences:
            try:
                found.extend(super().read((sequence,)))
            except dex.AttributeMapNotLoadedError:
                continue
        return tuple(found)


def dex_session_ports(context: dex.Context, *, loaded_messages_only: bool = False) -> SessionPorts:
    """Return one session's ports over a Step's or RPC's context.

    ``loaded_messages_only`` is for query RPCs, which read only the message
    instances their caller loaded.
    """
    return SessionPorts(
        session_state=DexSessionStateStore(context),
        messages=DexLoadedMessageLog(context) if loaded_messages_only else DexMessageLog(context),
        run_state=DexRunStateStore(context),
        tool_calls=DexToolCallStore(context),
        interrupts=DexInterruptStore(context),
        usage=DexUsageStore(context),
        queue=DexUserMessageQueue(context),
        resolutions=DexResolutionPublisher(context),
        results=DexToolResultPublisher(context),
        summaries=DexHistorySummaryStore(context),
        steering=DexUserMessageQueue(context, STEERED_USER_MESSAGES),
        steered=DexSteeredMessageStore(context),
        cancel_request=DexAttributeStore(context, TURN_CANCEL_REQUEST),
    )
