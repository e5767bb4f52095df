"""The dev server's stored state of a run, and the atomic commit of a method's effects.

A run holds its Attributes (indexed so a load costs what it returns), Channel
queues, Step executions with their `Phase`, locks and history. `commit` applies
one method's writes, deletions and publishes with no ``await`` in between;
`load_state` copies what a task asked to load into its request.
"""

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._conditions import messages_to_take
from dex_agents.devserver._errors import ServiceError
from dex_agents.devserver._journal import NULL_JOURNAL, Journal

_RUNNING = pb.FLOW_STATUS_RUNNING


class Phase(StrEnum):
    """Where a Step execution is (the values the ``active_executions`` test hook reports)."""

    WAIT_FOR = "wait_for"
    """Running its ``wait_for`` method."""
    WAITING = "waiting"
    """Waiting on the condition its ``wait_for`` returned."""
    SATISFIED = "satisfied"
    """Its condition matched; ``execute`` is about to run."""
    EXECUTE = "execute"
    """Running its ``execute`` method."""
    DONE = "done"
    """Finished or cancelled."""


class Attributes:
    """A run's Attributes, indexed so a load costs what it returns, not what is stored."""

    def __init__(self) -> None:
        self.plain: dict[str, pb.Value] = {}
        self.maps: dict[str, dict[str, pb.Value]] = {}
        self._sent: dict[str, tuple[pb.Value, pb.Value]] = {}
        """Each Attribute's value as tasks carry it, by key, with the stored value it was made from."""

    def set(self, key: str, value: pb.Value) -> None:
        self._sent.pop(key, None)
        name, slash, _ = key.partition("/")
        if slash:
            self.maps.setdefault(name, {})[key] = value
        else:
            self.plain[key] = value

    def delete(self, key: str) -> None:
        self._sent.pop(key, None)
        name, slash, _ = key.partition("/")
        if not slash:
            self.plain.pop(key, None)
            return
        instances = self.maps.get(name)
        if instances is not None:
            instances.pop(key, None)
            if not instances:
                del self.maps[name]

    def get(self, key: str) -> pb.Value | None:
        name, slash, _ = key.partition("/")
        return self.maps.get(name, {}).get(key) if slash else self.plain.get(key)

    def items(self) -> list[tuple[str, pb.Value]]:
        entries = list(self.plain.items())
        for instances in self.maps.values():
            entries.extend(instances.items())
        return sorted(entries)

    def loaded(self, map_loads: Sequence[str], sent: Callable[[pb.Value], pb.Value] | None = None) -> list[pb.KV]:
        """Every plain Attribute plus the loaded map instances (``NAME/`` = whole map).

        ``sent`` makes a value as a task carries it (its blob ID); it runs once per stored value,
        not per task: an Attribute is loaded by many tasks, and its value rarely changes.
        """
        entries = dict(self.plain)
        for load in map_loads:
            name, _, instance = load.partition("/")
            instances = self.maps.get(name, {})
            if instance:
                value = instances.get(load)
                if value is not None:
                    entries[load] = value
            else:
                entries.update(instances)
        if sent is None:
            return [pb.KV(key=key, value=value) for key, value in sorted(entries.items())]
        cache = self._sent
        kvs = []
        for key, value in sorted(entries.items()):
            cached = cache.get(key)
            if cached is None or cached[0] is not value:
                cached = cache[key] = (value, sent(value))
            kvs.append(pb.KV(key=key, value=cached[1]))
        return kvs


@dataclass(eq=False)
class Execution:
    """One Step execution of a run, from scheduling to its decision."""

    id: str
    step_type: str
    movement: pb.StepMovement
    from_id: str
    recovery: pb.RecoveryErrorInfo | None
    started_at: float
    phase: Phase = Phase.WAIT_FOR
    waiting: pb.WaitingCondition | None = None
    wait_sequence: int = 0
    timer_deadlines: list[float] = field(default_factory=list)
    skipped_timers: set[int] = field(default_factory=set)
    satisfied: asyncio.Event = field(default_factory=asyncio.Event)
    results: pb.ConditionResults | None = None
    locals: dict[str, pb.Value] = field(default_factory=dict)
    last_heartbeat: pb.Value | None = None
    progress_frames: int = 0
    task: "asyncio.Task[None] | None" = None
    method: str = ""
    """The method whose attempts run now (``wait_for`` / ``execute``), ``""`` before the first."""
    attempt: int = 0
    """The method's latest attempt dispatched (0: none yet)."""
    first_attempt_at: float | None = None
    """The server time of the method's first attempt (``first_attempt_timestamp``)."""
    output_seen: bool = False
    """Whether the latest attempt sent a frame (decides its redelivery after a restart)."""
    retry_at: float | None = None
    """When the next attempt is due, while the method backs off after a failed attempt."""
    skipped_delay: float = 0.0
    """Back-off the retry scale skipped, still counted against the retry budget."""
    scheduled_seq: int = 0
    """The journal sequence of the change that scheduled the execution."""
    task_resumed: bool = False
    """Read from the data dir: its running attempt (if any) is redelivered or failed first."""
    encoded: dict[str, tuple[Any, str]] = field(default_factory=dict)
    """The journal's encodings of the execution's messages, by field (they rarely change once set)."""


@dataclass(eq=False)
class Run:
    """One run of a Flow instance: its state, its active executions and its history."""

    flow_id: str
    run_id: str
    first_run_id: str
    flow_type: str
    request_id: str
    started_at: float
    worker_target: str
    status: int = _RUNNING
    closed_at: float | None = None
    error_type: int = 0
    error_message: str = ""
    attributes: Attributes = field(default_factory=Attributes)
    channels: dict[str, deque[pb.ChannelMessage]] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    executions: dict[str, Execution] = field(default_factory=dict)
    locks: dict[str, str] = field(default_factory=dict)
    lock_released: asyncio.Event = field(default_factory=asyncio.Event)
    attribute_waits: dict[str, asyncio.Event] = field(default_factory=dict)
    """What ``WaitForAttribute`` waits on, by Attribute key: set and dropped by the commit that writes the key
    (so a waiter wakes for its key's writes only, not for every Step's)."""
    history: list[pb.FlowHistoryEvent] = field(default_factory=list)
    results: list[pb.StepCompletionOutput] = field(default_factory=list)
    graceful: bool = False
    closing: bool = False
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    pending_skips: list[tuple[str, str, int | None]] = field(default_factory=list)
    next_wait: int = 1
    next_message: int = 1
    position: int = 0
    """The run's place among its Flow ID's runs."""
    close_request: tuple[int, int, str] | None = None
    """``(status, error type, reason)`` of a CANCEL / FAIL stop, until the run closes."""
    journal: Journal = NULL_JOURNAL
    journal_seq: int = 0
    """The journal sequence of the last change to the run (what an answer about it waits for)."""

    @property
    def running(self) -> bool:
        """Whether the run is still open."""
        return self.status == _RUNNING


async def first_set(events: tuple[asyncio.Event, ...], timeout: float) -> bool:
    """Wait until one of ``events`` is set; ``False`` when ``timeout`` seconds passed first."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    return bool(done)


async def acquire(run: Run, keys: list[str], owner: str) -> None:
    """Wait until none of ``keys`` is locked, then lock them for ``owner``."""
    while any(key in run.locks for key in keys):
        await run.lock_released.wait()
    for key in keys:
        run.locks[key] = owner


def release(run: Run, owner: str) -> None:
    """Release every lock ``owner`` holds and wake the waiters."""
    released = [key for key, holder in run.locks.items() if holder == owner]
    for key in released:
        del run.locks[key]
    if released:
        event, run.lock_released = run.lock_released, asyncio.Event()
        event.set()


def _wake_attribute_waits(run: Run, writes: Sequence[pb.AttributeWrite]) -> None:
    """Wake the ``WaitForAttribute`` waiters of the keys ``writes`` changes."""
    if run.attribute_waits:
        for write in writes:
            waiting = run.attribute_waits.pop(write.key, None)
            if waiting is not None:
                waiting.set()


def commit(
    run: Run,
    writes: Sequence[pb.AttributeWrite],
    publishes: Sequence[pb.ChannelMessage],
    deletions: Sequence[pb.ChannelMessageDeletion],
    *,
    strict_deletions: bool = False,
) -> None:
    """Apply one method's effects atomically; ``strict_deletions`` refuses a missing message."""
    if strict_deletions:
        for deletion in deletions:
            queue = run.channels.get(deletion.channel_name, deque())
            if not any(m.message_id == deletion.message_id for m in queue):
                raise ServiceError(
                    grpc.StatusCode.NOT_FOUND,
                    pb.ERROR_SUB_STATUS_CHANNEL_MESSAGE_NOT_FOUND,
                    f"channel message {deletion.message_id} not found",
                )
    journal = run.journal
    _wake_attribute_waits(run, writes)
    for write in writes:
        if write.value.WhichOneof("kind") in (None, "null_value"):
            run.attributes.delete(write.key)
            journal.attribute(run, write.key, None)
        else:
            run.attributes.set(write.key, write.value)
            journal.attribute(run, write.key, write.value)
    for deletion in deletions:
        existing = run.channels.get(deletion.channel_name)
        if existing is not None:
            kept = deque(m for m in existing if m.message_id != deletion.message_id)
            if len(kept) != len(existing):
                journal.channel_message(run, deletion.message_id, None)
            run.channels[deletion.channel_name] = kept
    for message in publishes:
        stored = pb.ChannelMessage(
            channel_name=message.channel_name,
            value=message.value,
            message_id=f"{run.run_id[:8]}-{run.next_message}",
        )
        run.next_message += 1
        run.channels.setdefault(message.channel_name, deque()).append(stored)
        journal.channel_message(run, stored.message_id, stored)
    if publishes:
        journal.run(run)


def is_loaded(key: str, loads: Iterable[str]) -> bool:
    """Whether ``key`` is one of ``loads`` or in a whole map (``NAME/``) among them."""
    return any(key == load or (load.endswith("/") and key.startswith(load)) for load in loads)


def load_state(
    run: Run,
    request: Any,
    map_loads: Sequence[str],
    channel_loads: Sequence[str],
    channel_map_loads: Sequence[str],
    sent: Callable[[pb.Value], pb.Value] | None = None,
) -> None:
    """Copy the plain Attributes, the loaded map instances and Channels into a task ``request``.

    ``sent``: how a task carries an Attribute's value (`BlobStore.sent`).
    """
    request.attributes.extend(run.attributes.loaded(map_loads, sent))
    for name, queue in sorted(run.channels.items()):
        if not queue:
            continue
        request.channel_infos[name].size = len(queue)
        if name in channel_loads or ("/" in name and is_loaded(name, channel_map_loads)):
            request.loaded_channel_messages[name].messages.extend(queue)
    request.loaded_attribute_map_instances.extend(map_loads)
    request.loaded_channel_names.extend(channel_loads)
    request.loaded_channel_map_instances.extend(channel_map_loads)


def take_messages(run: Run, condition: pb.ChannelCondition, reserved: int = 0) -> list[pb.Value]:
    """Pop the messages a satisfied Channel condition consumes (leaving ``reserved``); an emptied Channel is dropped."""
    queue = run.channels.get(condition.channel_name, deque())
    taken = [queue.popleft() for _ in range(messages_to_take(condition, len(queue), reserved))]
    for message in taken:
        run.journal.channel_message(run, message.message_id, None)
    values = [message.value for message in taken]
    if not queue:
        run.channels.pop(condition.channel_name, None)
    return values


def skip_timer(execution: Execution, condition_id: str, index: int | None, now: float) -> bool:
    """Mark one pending Timer of a waiting execution as fired, by index or else by condition ID.

    Returns whether the Timer was pending (it exists, has not fired and was not skipped).
    """
    assert execution.waiting is not None
    timers = execution.waiting.timer_conditions
    if index is None:
        index = next((i for i, timer in enumerate(timers) if timer.condition_id == condition_id), None)
    if index is None or not 0 <= index < len(timers) or index in execution.skipped_timers:
        return False
    if index < len(execution.timer_deadlines) and execution.timer_deadlines[index] <= now:
        return False
    execution.skipped_timers.add(index)
    return True


def add_result(run: Run, execution: Execution, close: pb.CloseDecision) -> None:
    """Keep a closing decision's output (if it has one) among the run's results."""
    if close.HasField("close_input"):
        output = pb.StepCompletionOutput(
            completed_step_type=execution.step_type,
            completed_step_execution_id=execution.id,
            completed_step_output=close.close_input,
        )
        run.results.append(output)
        run.journal.result(run, len(run.results), output)


def is_reuse_refused(latest: Run, policy: int) -> bool:
    """Whether a new start of ``latest``'s Flow ID is refused under the ID-reuse ``policy``."""
    return (
        latest.running
        or policy in (pb.ID_REUSE_POLICY_UNSPECIFIED, pb.ID_REUSE_POLICY_DISALLOW_REUSE)
        or (
            policy == pb.ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY
            and latest.status == pb.FLOW_STATUS_COMPLETED
        )
    )


def worker_target(options: pb.FlowStartOptions, default: str) -> str:
    """Where a run's tasks go: ``"pull"``, a listening Worker's address, or ``default``."""
    if options.HasField("flow_config_override"):
        advertised = options.flow_config_override.worker_target
        if advertised.is_pull_mode:
            return "pull"
        if advertised.address:
            return str(advertised.address)
    return default
