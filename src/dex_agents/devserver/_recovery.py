"""Starting from a data dir: read every run back into the engine and drive its executions on.

What the engine reads back, and how each part goes on (the restart rules of
``docs/dev-server.md``):

- runs with their Attributes, AttributeMap instances, Channel messages, results and
  history; Streams (resume tokens keep counting from the last one); blobs; the attempt
  log; the clock's offset;
- a Step execution goes on from its phase: ``wait_for`` or ``execute`` attempts as
  `MethodAttempts.run_method` says for a resumed one (an attempt that was running is
  redelivered like one whose Worker was lost), a wait takes its condition again with
  the Timer deadlines it had (on the server's clock, so a Timer that fell due while the
  server was down fires at once: an approval deadline that passed is expired);
- a run that was closing after a CANCEL / FAIL stop closes; a run that completed
  gracefully but had executions left completes when they end.

Real Dex keeps this state in its persistence (``dexcli dev``: a SQLite file), and a
Step attempt that was running when its server died is retried after its timeout
(``server/service/interpreter/temporal``, activities with their retry policies); the
dev server redelivers at once.
"""

import json
from collections import deque
from typing import Any

from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._attempts import AttemptRecord
from dex_agents.devserver._data_dir import StoreError
from dex_agents.devserver._engine import Engine
from dex_agents.devserver._state import Execution, Phase, Run
from dex_agents.devserver._store import Store
from dex_agents.devserver._store_journal import decode
from dex_agents.devserver._streams import StreamEntry

_EXECUTION_MESSAGES = {
    "movement": pb.StepMovement,
    "recovery": pb.RecoveryErrorInfo,
    "waiting": pb.WaitingCondition,
    "results": pb.ConditionResults,
    "last_heartbeat": pb.Value,
}
"""The fields of an execution's row that `execution_state` stores as encoded protobuf messages."""


def _unreadable(table: str, key: str, error: Exception) -> StoreError:
    return StoreError(
        f"a row of the data dir's {table} table ({key}) is not one this dex-agents wrote ({error!r}); move the data "
        "dir away or delete it to start empty (its sessions are lost), or use another --data DIR"
    )


def _run(row: tuple[Any, ...]) -> Run:
    """A run from its row: the fields `run_state` wrote, by name, with its tuples back from JSON lists."""
    run_id, flow_id, position, text = row
    try:
        state = json.loads(text)
        close_request = state["close_request"]
        state["close_request"] = None if close_request is None else tuple(close_request)
        state["pending_skips"] = [tuple(skip) for skip in state["pending_skips"]]
        return Run(flow_id=flow_id, run_id=run_id, position=position, **state)
    except (KeyError, TypeError, ValueError) as error:
        raise _unreadable("runs", run_id, error) from error


def _execution(execution_id: str, text: str) -> Execution:
    """An execution from its row: the fields `execution_state` wrote, by name, decoded; its task resumed."""
    try:
        state = json.loads(text)
        for name, message_type in _EXECUTION_MESSAGES.items():
            state[name] = decode(message_type, state[name])
        state["phase"] = Phase(state["phase"])
        state["skipped_timers"] = set(state["skipped_timers"])
        state["locals"] = {key: decode(pb.Value, value) for key, value in state["locals"].items()}
        return Execution(id=execution_id, task_resumed=True, **state)
    except (KeyError, TypeError, ValueError) as error:
        raise _unreadable("executions", execution_id, error) from error


def load(engine: Engine, store: Store) -> int:
    """Read the data dir into a fresh ``engine``; return how many runs it holds."""
    for (value,) in store.rows("SELECT value FROM meta WHERE key = 'clock_offset'"):
        engine.clock.restore_offset(float(value))
    runs: dict[str, Run] = {}
    for row in store.rows("SELECT run_id, flow_id, position, state FROM runs ORDER BY flow_id, position"):
        run = _run(row)
        runs[run.run_id] = run
        engine.add_run(run)
    for run_id, key, value in store.rows("SELECT run_id, key, value FROM attributes ORDER BY run_id, key"):
        runs[run_id].attributes.set(key, pb.Value.FromString(value))
    for run_id, _, blob in store.rows(
        "SELECT run_id, position, message FROM channel_messages ORDER BY run_id, position"
    ):
        message = pb.ChannelMessage.FromString(blob)
        runs[run_id].channels.setdefault(message.channel_name, deque()).append(message)
    for run_id, _, blob in store.rows("SELECT run_id, position, output FROM results ORDER BY run_id, position"):
        runs[run_id].results.append(pb.StepCompletionOutput.FromString(blob))
    for run_id, _, blob in store.rows("SELECT run_id, event_id, event FROM history ORDER BY run_id, event_id"):
        runs[run_id].history.append(pb.FlowHistoryEvent.FromString(blob))
    for run_id, execution_id, text in store.rows("SELECT run_id, execution_id, state FROM executions"):
        runs[run_id].executions[execution_id] = _execution(execution_id, text)
    for sequence, flow_type, name, flow_id, source, created_at, size, value in store.rows(
        "SELECT sequence, flow_type, name, flow_id, source, created_at, size, value FROM stream_messages "
        "ORDER BY sequence"
    ):
        entry = StreamEntry(sequence, flow_id, pb.Value.FromString(value), source, created_at, size)
        engine.streams.restore(flow_type, name, entry)
    for blob_id, value in store.rows("SELECT blob_id, value FROM blobs"):
        engine.blobs.restore(blob_id, pb.Value.FromString(value))
    for _, text in store.rows("SELECT id, record FROM attempts ORDER BY id"):
        engine.restore_attempt(AttemptRecord(**json.loads(text)))
    for run in runs.values():
        if not run.running:
            run.closed.set()
    return len(runs)


def resume(engine: Engine) -> None:
    """Drive every active execution of the engine's open runs on, and close what was closing."""
    for run in engine.runs():
        if not run.running:
            continue
        executions = sorted(run.executions.values(), key=lambda e: (e.wait_sequence == 0, e.wait_sequence, e.id))
        run.executions.clear()
        if run.closing and run.close_request is not None:
            engine.close_later(run)
            continue
        for execution in executions:
            engine.resume(run, execution)
        engine.complete_if_done(run)


async def reload(engine: Engine, store: Store) -> None:
    """After a failed commit: drop the engine's state, read the data dir again and go on from it.

    Whatever the failed commit held never reached disk and nothing of it was answered,
    so the Steps it completed run again (as after a restart).
    """
    await engine.forget_all()
    store.reset()
    load(engine, store)
    resume(engine)
    engine.reloaded_from_disk()
