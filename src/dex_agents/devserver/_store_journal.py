"""`StoreJournal`: the engine's changes as rows of its data dir's `Store`, and their encoding."""

import base64
import json
from typing import Any

from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._attempts import AttemptRecord
from dex_agents.devserver._journal import Journal
from dex_agents.devserver._state import Execution, Run
from dex_agents.devserver._store import DROPPED_SEQUENCE, Store, StoreWriteError, Values
from dex_agents.devserver._streams import StreamEntry


def encode(message: Any) -> str:
    """A protobuf message as base64 text (for the JSON state columns)."""
    return base64.b64encode(message.SerializeToString()).decode("ascii")


def decode(message_type: Any, text: str | None) -> Any:
    """The protobuf message ``encode`` wrote, or ``None``."""
    return None if text is None else message_type.FromString(base64.b64decode(text))


def message_position(message_id: str) -> int:
    """The position of a Channel message in its run: the number its server message ID ends with."""
    return int(message_id.rpartition("-")[2])


def run_state(run: Run) -> str:
    """Everything of a run's own row (not its Attributes, Channels, executions or history), as JSON."""
    return json.dumps(
        {
            "first_run_id": run.first_run_id,
            "flow_type": run.flow_type,
            "request_id": run.request_id,
            "started_at": run.started_at,
            "worker_target": run.worker_target,
            "status": run.status,
            "closed_at": run.closed_at,
            "error_type": run.error_type,
            "error_message": run.error_message,
            "graceful": run.graceful,
            "closing": run.closing,
            "close_request": run.close_request,
            "counters": run.counters,
            "next_message": run.next_message,
            "next_wait": run.next_wait,
            "pending_skips": run.pending_skips,
        },
        separators=(",", ":"),
    )


def _encoded(execution: Execution, name: str, message: Any) -> str | None:
    """``encode(message)``, computed once per message object an execution field holds."""
    if message is None:
        return None
    cached = execution.encoded.get(name)
    if cached is not None and cached[0] is message:
        return cached[1]
    text = encode(message)
    execution.encoded[name] = (message, text)
    return text


def execution_state(execution: Execution) -> str:
    """A Step execution's phase, condition, Timers, locals, results and attempt, as JSON."""
    return json.dumps(
        {
            "step_type": execution.step_type,
            "movement": _encoded(execution, "movement", execution.movement),
            "from_id": execution.from_id,
            "recovery": _encoded(execution, "recovery", execution.recovery),
            "started_at": execution.started_at,
            "phase": str(execution.phase),
            "waiting": _encoded(execution, "waiting", execution.waiting),
            "wait_sequence": execution.wait_sequence,
            "timer_deadlines": execution.timer_deadlines,
            "skipped_timers": sorted(execution.skipped_timers),
            "results": _encoded(execution, "results", execution.results),
            "locals": {key: encode(value) for key, value in execution.locals.items()},
            "last_heartbeat": None if execution.last_heartbeat is None else encode(execution.last_heartbeat),
            "method": execution.method,
            "attempt": execution.attempt,
            "first_attempt_at": execution.first_attempt_at,
            "output_seen": execution.output_seen,
            "retry_at": execution.retry_at,
            "skipped_delay": execution.skipped_delay,
        },
        separators=(",", ":"),
    )


class StoreJournal(Journal):
    """Writes every change to a `Store` (the dev server with a data dir)."""

    enabled = True

    def __init__(self, store: Store) -> None:
        self._store = store

    @property
    def sequence(self) -> int:
        return self._store.sequence

    def _put(self, run: Run, table: str, key: tuple[Any, ...], values: Values, urgent: bool) -> None:
        run.journal_seq = self._store.put(table, key, values, urgent=urgent)

    def run(self, run: Run, *, urgent: bool = False) -> None:
        # Made when the row is sealed: a run's row changes several times in one engine step.
        self._put(run, "runs", (run.run_id,), lambda: (run.flow_id, run.position, run_state(run)), urgent)

    def attribute(self, run: Run, key: str, value: pb.Value | None) -> None:
        self._put(run, "attributes", (run.run_id, key), None if value is None else (value.SerializeToString(),), False)

    def channel_message(self, run: Run, message_id: str, message: pb.ChannelMessage | None) -> None:
        values = None if message is None else (message.SerializeToString(),)
        self._put(run, "channel_messages", (run.run_id, message_position(message_id)), values, False)

    def execution(self, run: Run, execution: Execution, *, urgent: bool = False, progress: bool = False) -> None:
        key = (run.run_id, execution.id)
        # Made when the row is sealed: scheduling, an attempt's start and its first frame often share a commit.
        values = lambda: (execution_state(execution),)  # noqa: E731 - a closure the row keeps
        if progress:
            self._store.put("executions", key, values)
        else:
            self._put(run, "executions", key, values, urgent)

    def execution_done(self, run: Run, execution_id: str) -> None:
        self._put(run, "executions", (run.run_id, execution_id), None, False)

    def history(self, run: Run, event: pb.FlowHistoryEvent) -> None:
        self._put(run, "history", (run.run_id, event.event_id), (event.SerializeToString(),), False)

    def result(self, run: Run, position: int, output: pb.StepCompletionOutput) -> None:
        self._put(run, "results", (run.run_id, position), (output.SerializeToString(),), False)

    def stream_message(self, flow_type: str, name: str, entry: StreamEntry) -> None:
        values = (
            flow_type,
            name,
            entry.flow_id,
            entry.source,
            entry.created_at,
            entry.size,
            entry.value.SerializeToString(),
        )
        entry.journal_seq = self._store.put("stream_messages", (entry.sequence,), values)

    def stream_trimmed(self, sequence: int) -> None:
        self._store.put("stream_messages", (sequence,), None)

    def blob(self, blob_id: str, value: pb.Value) -> None:
        self._store.put("blobs", (blob_id,), (value.SerializeToString(),))

    def attempt(self, number: int, record: AttemptRecord) -> None:
        # vars(), not dataclasses.asdict: the fields are plain values, and asdict deep-copies each one.
        state = json.dumps(vars(record), separators=(",", ":"))
        self._store.put("attempts", (number,), (record.flow_id, state))

    def meta(self, key: str, value: str) -> None:
        self._store.put("meta", (key,), (value,), urgent=True)

    def flush(self) -> None:
        self._store.flush()

    async def durable(self, sequence: int | None = None, *, sync: bool = True) -> None:
        await self._store.durable(sequence, sync=sync)


class DroppedJournal(Journal):
    """The journal of runs and Streams a reload dropped: what a late change to them would wait for is refused.

    A request that was being served when the server dropped its state (after a failed
    commit) may still change the objects it holds; those changes are kept nowhere, so
    whatever waits for them to be on disk gets `StoreWriteError`, never a success.
    """

    enabled = True

    def _drop(self, run: Run) -> None:
        run.journal_seq = DROPPED_SEQUENCE

    def run(self, run: Run, *, urgent: bool = False) -> None:
        self._drop(run)

    def attribute(self, run: Run, key: str, value: pb.Value | None) -> None:
        self._drop(run)

    def channel_message(self, run: Run, message_id: str, message: pb.ChannelMessage | None) -> None:
        self._drop(run)

    def execution(self, run: Run, execution: Execution, *, urgent: bool = False, progress: bool = False) -> None:
        self._drop(run)

    def execution_done(self, run: Run, execution_id: str) -> None:
        self._drop(run)

    def history(self, run: Run, event: pb.FlowHistoryEvent) -> None:
        self._drop(run)

    def result(self, run: Run, position: int, output: pb.StepCompletionOutput) -> None:
        self._drop(run)

    def stream_message(self, flow_type: str, name: str, entry: StreamEntry) -> None:
        entry.journal_seq = DROPPED_SEQUENCE

    async def durable(self, sequence: int | None = None, *, sync: bool = True) -> None:
        raise StoreWriteError("the dev server dropped this change after a failed commit; it read its data again")


DROPPED_JOURNAL = DroppedJournal()
"""The journal `Engine.forget_all` gives what it drops."""
