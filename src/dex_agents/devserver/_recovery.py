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
from dex_agents.devserver._engine import Engine
from dex_agents.devserver._state import Execution, Phase, Run
from dex_agents.devserver._store import Store
from dex_agents.devserver._store_journal import decode
from dex_agents.devserver._streams import StreamEntry


def _run(row: tuple[Any, ...]) -> Run:
    run_id, flow_id, position, text = row
    state = json.loads(text)
    close_request = state["close_request"]
    return Run(
        flow_id=flow_id,
        run_id=run_id,
        first_run_id=state["first_run_id"],
        flow_type=state["flow_type"],
        request_id=state["request_id"],
        started_at=state["started_at"],
        worker_target=state["worker_target"],
        status=state["status"],
        closed_at=state["closed_at"],
        error_type=state["error_type"],
        error_message=state["error_message"],
        graceful=state["graceful"],
        closing=state["closing"],
        close_request=None if close_request is None else (close_request[0], close_request[1], close_request[2]),
        counters=state["counters"],
        next_message=state["next_message"],
        next_wait=state["next_wait"],
        pending_skips=[(skip[0], skip[1], skip[2]) for skip in state["pending_skips"]],
        position=position,
    )


def _execution(execution_id: str, text: str) -> Execution:
    state = json.loads(text)
    return Execution(
        id=execution_id,
        step_type=state["step_type"],
        movement=decode(pb.StepMovement, state["movement"]),
        from_id=state["from_id"],
        recovery=decode(pb.RecoveryErrorInfo, state["recovery"]),
        started_at=state["started_at"],
        phase=Phase(state["phase"]),
        waiting=decode(pb.WaitingCondition, state["waiting"]),
        wait_sequence=state["wait_sequence"],
        timer_deadlines=list(state["timer_deadlines"]),
        skipped_timers=set(state["skipped_timers"]),
        results=decode(pb.ConditionResults, state["results"]),
        locals={key: decode(pb.Value, value) for key, value in state["locals"].items()},
        last_heartbeat=decode(pb.Value, state["last_heartbeat"]),
        method=state["method"],
        attempt=state["attempt"],
        first_attempt_at=state["first_attempt_at"],
        output_seen=state["output_seen"],
        retry_at=state["retry_at"],
        skipped_delay=state["skipped_delay"],
        task_resumed=True,
    )


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
