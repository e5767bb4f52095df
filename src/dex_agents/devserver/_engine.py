"""The emulated Dex server rules: Flows, Step executions, decisions, RPCs and Streams.

Everything here runs on one asyncio loop, so each commit (a method's writes,
publishes, deletions and decision) is applied without an ``await`` in between: it is
atomic. The run's state and its commit live in ``_state``, condition matching in
``_conditions``, method attempts and back-off in ``_attempts``, history events in
``_history``; `Engine` drives Step executions through its base
``_executions.StepExecutions`` and finds runs through ``_lookup.RunLookup``. The rules
and their sources are listed in ``docs/dev-server.md``.
"""

import asyncio
import contextlib
import uuid
from typing import Any

import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._attempts import AttemptRecord, MethodAttempts
from dex_agents.devserver._attribute_waits import AttributeWaits
from dex_agents.devserver._blobs import BlobStore
from dex_agents.devserver._clock import ServerClock
from dex_agents.devserver._config import DevServerConfig
from dex_agents.devserver._errors import (
    ServiceError,
    already_started,
    flow_closing,
    flow_not_active,
    invalid_argument,
    lock_conflict,
    long_poll_timeout,
    reserved_character_refusal,
)
from dex_agents.devserver._executions import StepExecutions
from dex_agents.devserver._history import flow_started, flow_summary, history_page, record, rpc_completed
from dex_agents.devserver._journal import NULL_JOURNAL, Journal
from dex_agents.devserver._lookup import RunLookup
from dex_agents.devserver._state import (
    Phase,
    Run,
    commit,
    first_set,
    is_reuse_refused,
    load_state,
    release,
    skip_timer,
    worker_target,
)
from dex_agents.devserver._store import StoreWriteError
from dex_agents.devserver._store_journal import DROPPED_JOURNAL
from dex_agents.devserver._stream_requests import StreamRequests
from dex_agents.devserver._streams import Streams
from dex_agents.devserver._workers import AttemptError, ListeningWorkers, PullWorkers


class Engine(StepExecutions, RunLookup):
    """The dev server's server side: it owns every Flow run and drives its Step executions."""

    def __init__(self, config: DevServerConfig, clock: ServerClock, journal: Journal = NULL_JOURNAL) -> None:
        self.config = config
        self.clock = clock
        self.journal = journal
        self.pull = PullWorkers(
            redeliver_before_output=config.redeliver_before_first_output,
            redeliver_after_output=config.redeliver_after_output,
        )
        self.listening = ListeningWorkers(
            redeliver_before_output=config.redeliver_before_first_output,
            redeliver_after_output=config.redeliver_after_output,
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self.reloaded = asyncio.Event()
        """Set (and replaced) each time the engine has read its data dir again after a failed commit."""
        self._clear()

    def _clear(self) -> None:
        """Start with no runs, Streams, blobs or attempts (a new server, or one about to reload its data dir)."""
        self.streams = Streams(self.config, self.journal)
        self.blobs = BlobStore(self.config.blob_threshold_bytes, self.journal)
        self.stream_requests = StreamRequests(
            streams=self.streams,
            config=self.config,
            clock=self.clock,
            journal=self.journal,
            require_run=self.run,
            cap_wait=self._capped,
        )
        self._runs: dict[str, list[Run]] = {}
        self.attribute_waits = AttributeWaits(
            self.run, self.journal, lambda: self.reloaded, self.config.default_long_poll.total_seconds(), self._capped
        )
        self._methods = MethodAttempts(self.config, self.clock, self.streams, self.blobs, self.pull, self.listening)
        self.dispatch_grace_until = 0.0
        """Loop time until which a dispatch waits longer for Workers (they reconnect after a restart)."""

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        """Cancel every Step execution and close Worker channels."""
        await self._cancel_tasks()
        await self.listening.close()

    async def _cancel_tasks(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def forget_all(self) -> None:
        """Stop every execution and drop all state, writing nothing of it (before a reload from the data dir)."""
        for run in self.runs():
            run.journal = DROPPED_JOURNAL
        self.streams.drop(DROPPED_JOURNAL)
        await self._cancel_tasks()
        self._clear()

    def reloaded_from_disk(self) -> None:
        """Wake the long polls that wait for the server to read its data dir again."""
        reloaded, self.reloaded = self.reloaded, asyncio.Event()
        reloaded.set()

    def grant_dispatch_grace(self, seconds: float) -> None:
        """Let tasks wait up to ``seconds`` from now for a Worker (after a restart, Workers reconnect with back-off)."""
        self._methods.grace_until = asyncio.get_running_loop().time() + seconds

    def attach(self, journal: Journal) -> None:
        """Journal every change from now on (the server has a data dir); the engine holds nothing yet."""
        self.journal = journal
        self._clear()

    def restore_attempt(self, record: AttemptRecord) -> None:
        """Put back an attempt record read from the data dir."""
        self._methods.log.append(record)

    def complete_if_done(self, run: Run) -> None:
        """Complete a gracefully completing run that has no execution left."""
        self._maybe_complete(run)

    def _capped(self, seconds: float) -> float:
        """A Client's long-poll wait or RPC timeout, cut to the server's maximum (60 s)."""
        return min(seconds, self.config.max_wait_seconds)

    # ------------------------------------------------------------------ client API

    def start_flow(self, request: pb.StartFlowRequest) -> str:
        """Start a run (``StartFlow``) and return its run ID."""
        if not request.flow_id or not request.flow_type:
            raise invalid_argument("flow_id and flow_type are required")
        for name, value in (("flow ID", request.flow_id), *_step_types(request)):
            refused = reserved_character_refusal(name, value)
            if refused is not None:
                raise invalid_argument(refused)
        options = request.flow_start_options
        previous = self._runs.get(request.flow_id, [])
        if previous:
            latest = previous[-1]
            policy = options.id_reuse_policy
            if latest.running and policy == pb.ID_REUSE_POLICY_ALLOW_TERMINATE_IF_RUNNING:
                self._close(latest, pb.FLOW_STATUS_TERMINATED, 0, "terminated by a new start")
            elif is_reuse_refused(latest, policy):
                ignore = options.flow_already_started_options.ignore_already_started_error
                if ignore and request.request_id and request.request_id == latest.request_id:
                    return latest.run_id
                raise already_started(request.flow_id)
        run_id = str(uuid.uuid4())
        run = Run(
            flow_id=request.flow_id,
            run_id=run_id,
            first_run_id=previous[0].first_run_id if previous else run_id,
            flow_type=request.flow_type,
            request_id=request.request_id,
            started_at=self.clock.now(),
            worker_target=worker_target(options, self.config.default_worker_target),
            position=len(previous),
            journal=self.journal,
        )
        run.journal.run(run)
        for write in options.attributes:
            if write.value.WhichOneof("kind") != "null_value":
                run.attributes.set(write.key, write.value)
                run.journal.attribute(run, write.key, write.value)
        self._runs.setdefault(request.flow_id, []).append(run)
        record(
            run,
            self.clock.now(),
            flow_started_or_continued=flow_started(run, request),
        )
        if request.start_step_type:
            self._schedule(
                run,
                pb.StepMovement(
                    step_type=request.start_step_type,
                    step_input=request.step_input,
                    step_options=request.step_options,
                ),
                "",
            )
        self.journal.flush()
        return run_id

    def add_run(self, run: Run) -> None:
        """Put back a run read from the data dir (its Flow ID's runs are added oldest first)."""
        run.journal = self.journal
        self._runs.setdefault(run.flow_id, []).append(run)

    def runs(self) -> list[Run]:
        """Every run, of every Flow ID."""
        return [run for runs in self._runs.values() for run in runs]

    def stop_flow(self, request: pb.StopFlowRequest) -> None:
        """Terminate a run at once, or signal CANCEL / FAIL (``StopFlow``).

        CANCEL and FAIL are signals, as in real Dex: the run is *closing* at once (its
        executions are cancelled; requests that need an active run get
        ``FLOW_CLOSING``) and closes ``stop_close_delay`` later.
        """
        run = self.active_run(request.flow_id, request.run_id)
        if request.stop_type == pb.STOP_TYPE_TERMINATE:
            self._close(run, pb.FLOW_STATUS_TERMINATED, 0, request.reason)
            return
        status: int = pb.FLOW_STATUS_CANCELED
        error_type: int = 0
        if request.stop_type == pb.STOP_TYPE_FAIL:
            status, error_type = pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_CLIENT_API_FAILING_FLOW
        run.closing = True
        run.close_request = (status, error_type, request.reason)
        self._cancel_where(run, lambda _: True)
        run.journal.run(run)
        self.journal.flush()
        self.close_later(run)

    def close_later(self, run: Run) -> None:
        """Close a run whose CANCEL / FAIL stop was accepted, ``stop_close_delay`` from now."""
        assert run.close_request is not None
        _ = self._spawn(self._close_later(run, *run.close_request))

    async def _close_later(self, run: Run, status: int, error_type: int, reason: str) -> None:
        await asyncio.sleep(self.config.stop_close_delay.total_seconds())
        self._close(run, status, error_type, reason)

    async def wait_for_flow(self, request: pb.WaitForFlowRequest) -> pb.FlowResult:
        """Wait until the run closes (``WaitForFlow``) and return its result.

        A close whose commit fails is not answered: the wait goes on with the run the
        server reads back from its data dir (where the run is still open).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._capped(
            request.wait_time_seconds or self.config.default_long_poll.total_seconds()
        )
        while True:
            run = self.run(request.flow_id, request.run_id)
            reloaded = self.reloaded
            if run.running:
                # A reload drops this Run and reads a new one from disk: wait for that too, or this
                # poll would wait on a Run nothing closes any more.
                if not await first_set((run.closed, reloaded), max(deadline - loop.time(), 0.0)):
                    raise long_poll_timeout(f"flow {request.flow_id} is still running")
                if not run.closed.is_set():
                    continue
            try:
                await self.journal.durable(run.journal_seq, sync=False)
            except StoreWriteError:
                try:
                    await asyncio.wait_for(reloaded.wait(), max(deadline - loop.time(), 0.0))
                except TimeoutError:
                    raise long_poll_timeout(f"flow {request.flow_id} is still running") from None
                continue
            return pb.FlowResult(
                flow_status=run.status,  # type: ignore[arg-type]
                results=run.results if request.needs_results else [],
                error_type=run.error_type,  # type: ignore[arg-type]
                error_message=run.error_message,
            )

    def summary(self, request: pb.GetFlowSummaryRequest) -> pb.GetFlowSummaryResponse:
        """Describe the run (``GetFlowSummary``)."""
        run = self.run(request.flow_id, request.run_id)
        return flow_summary(run)

    def history(self, request: pb.GetHistoryEventsRequest) -> pb.GetHistoryEventsResponse:
        """Return one page of the run's history (``GetHistoryEvents``)."""
        run = self.run(request.flow_id, request.run_id)
        return history_page(run, request, self.config.history_page_size)

    def skip_timer(self, request: pb.SkipTimerRequest) -> None:
        """Fire one pending Timer now (``SkipTimer``); anything else is ``INVALID_ARGUMENT``.

        With ``keep_early_timer_skips`` a skip for an execution that does not wait yet
        is kept and applied when it starts waiting (lenient).
        """
        run = self.active_run(request.flow_id, request.run_id)
        index = request.timer_condition_index if request.HasField("timer_condition_index") else None
        if not request.step_execution_id or (index is None and not request.timer_condition_id):
            raise invalid_argument("skip_timer needs a step execution ID and one Timer selector")
        execution = run.executions.get(request.step_execution_id)
        if execution is not None and execution.phase == Phase.WAITING:
            if not skip_timer(execution, request.timer_condition_id, index, self.clock.now()):
                raise invalid_argument(f"no pending Timer {index or request.timer_condition_id!r}")
            run.journal.execution(run, execution)
            self._evaluate(run)
        elif self.config.keep_early_timer_skips:
            run.pending_skips.append((request.step_execution_id, request.timer_condition_id, index))
            run.journal.run(run)
        else:
            raise invalid_argument(f"step execution {request.step_execution_id!r} has no pending Timer")

    async def invoke_rpc(self, request: pb.InvokeRPCRequest) -> pb.InvokeRPCResponse:
        """Run an RPC on a Worker and commit its effects atomically (``InvokeRPC``)."""
        run = self.run(request.flow_id, request.run_id)
        locks = sorted(set(request.lock_attribute_keys))
        transactional = bool(locks) or request.is_transactional
        if not run.running and transactional:
            raise flow_not_active(request.flow_id)
        if run.closing and transactional:
            raise flow_closing(request.flow_id)
        held = [key for key in locks if key in run.locks]
        if held:
            raise lock_conflict(held)
        owner = f"rpc:{uuid.uuid4()}"
        for key in locks:
            run.locks[key] = owner
        try:
            worker_request = pb.InvokeWorkerRPCRequest(
                context=pb.Context(
                    flow_id=run.flow_id,
                    run_id=run.run_id,
                    flow_started_timestamp=int(run.started_at),
                ),
                flow_type=run.flow_type,
                rpc_name=request.rpc_name,
                input=request.input,
            )
            load_state(
                run,
                worker_request,
                request.load_attribute_map_instances,
                request.load_channel_names,
                request.load_channel_map_instances,
                self.blobs.sent,
            )
            self.blobs.offload_task(worker_request, attributes=False)
            timeout = self._capped(request.timeout_seconds or self.config.default_rpc_timeout.total_seconds())
            try:
                response = await asyncio.wait_for(self._methods.call_worker(run, "rpc", worker_request, None), timeout)
            except AttemptError as error:
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                    f"RPC {request.rpc_name} failed: {error.detail}",
                    worker_error=error.worker_error(),
                    dispatch_reason=error.dispatch_reason,
                ) from error
            except TimeoutError:
                raise ServiceError(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    pb.ERROR_SUB_STATUS_REQUEST_TIMEOUT,
                    f"RPC {request.rpc_name} timed out after {timeout} s",
                ) from None
            has_effects = bool(
                response.upsert_attributes
                or response.publish_to_channel
                or response.delete_from_channel
                or response.step_decision.next_steps
                or response.step_decision.cancel_step_types
            )
            if not run.running or run.closing:
                if has_effects:
                    raise flow_closing(request.flow_id) if run.running else flow_not_active(request.flow_id)
                await self.journal.durable(run.journal_seq, sync=False)  # a query: no commit of its own
                return pb.InvokeRPCResponse(output=response.output)
            commit(
                run,
                response.upsert_attributes,
                response.publish_to_channel,
                response.delete_from_channel,
                strict_deletions=transactional,
            )
            for step_type in response.step_decision.cancel_step_types:
                self._cancel_where(run, lambda e, t=step_type: e.step_type == t)
            for movement in response.step_decision.next_steps:
                self._schedule(run, movement, "")
            record(
                run,
                self.clock.now(),
                rpc_execution_completed=rpc_completed(request, response),
            )
            self._evaluate(run)
            self.journal.flush()
            await self.journal.durable(run.journal_seq)
            return pb.InvokeRPCResponse(output=response.output)
        finally:
            release(run, owner)

    # ------------------------------------------------------------------ clock

    def advance_clock(self, seconds: float) -> None:
        """Move the server's clock forward (kept in the data dir) and fire what fell due."""
        self.clock.advance(seconds)
        self.journal.meta("clock_offset", repr(self.clock.offset))
        self.notify_clock()

    def notify_clock(self) -> None:
        """Re-evaluate every waiting condition (after the clock moved)."""
        for runs in self._runs.values():
            for run in runs:
                with contextlib.suppress(Exception):
                    self._evaluate(run)


def _step_types(request: pb.StartFlowRequest) -> list[tuple[str, str]]:
    """The start Step type and every failure-proceed Step type its options reach (real Dex checks them all)."""
    types = [("step type", request.start_step_type)]
    options = request.step_options if request.HasField("step_options") else None
    while options is not None:
        types.append(("step type", options.execute_failure_proceed_step_type))
        has_next = options.HasField("execute_failure_proceed_step_options")
        options = options.execute_failure_proceed_step_options if has_next else None
    return types
