"""The emulated Dex server rules: Flows, Step executions, state, conditions, retries, RPCs.

Everything here runs on one asyncio loop, so each commit (a method's writes, publishes,
deletions and decision) is applied without an ``await`` in between: it is atomic.
The rules and their sources are listed in ``docs/fake-dex.md``.
"""

import asyncio
import contextlib
import itertools
import uuid
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb
from google.protobuf import duration_pb2, timestamp_pb2  # type: ignore[import-untyped]

from dex_agents.testing.fake_dex._blobs import BlobStore
from dex_agents.testing.fake_dex._clock import ManualClock
from dex_agents.testing.fake_dex._config import FakeDexConfig
from dex_agents.testing.fake_dex._errors import (
    ServiceError,
    already_started,
    flow_not_active,
    flow_not_found,
    invalid_argument,
    lock_conflict,
    long_poll_timeout,
)
from dex_agents.testing.fake_dex._streams import Streams
from dex_agents.testing.fake_dex._workers import (
    AttemptError,
    ListeningWorkers,
    PullWorkers,
)

Method = Literal["wait_for", "execute"]

HEARTBEAT_TIMEOUT = "dex.fake.HeartbeatTimeout"
METHOD_TIMEOUT = "dex.fake.MethodTimeout"

_RUNNING = pb.FLOW_STATUS_RUNNING
_COMPLETED = pb.CONDITION_STATUS_COMPLETED
_WAITING = pb.CONDITION_STATUS_WAITING


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt of one Step method, as the fake ran it.

    Attributes:
        flow_id: The Flow instance.
        step_execution_id: ``<StepType>-<n>``.
        step_type: The Step type.
        method: ``"wait_for"`` or ``"execute"``.
        attempt: One-based attempt number.
        started_at: Fake-clock Unix seconds when the attempt was dispatched.
        ended_at: Fake-clock Unix seconds when it ended.
        error_type: ``""`` for a success, else the Worker's or the fake's error type.
        error_detail: The failure detail, ``""`` for a success.
        next_delay_seconds: The computed (unscaled) back-off before the next attempt, or
            ``None`` when no attempt follows.
    """

    flow_id: str
    step_execution_id: str
    step_type: str
    method: str
    attempt: int
    started_at: float
    ended_at: float
    error_type: str
    error_detail: str
    next_delay_seconds: float | None

    @property
    def succeeded(self) -> bool:
        """Whether the attempt returned a result."""
        return not self.error_type


class _Attributes:
    """A run's Attributes, indexed so a load costs what it returns, not what is stored."""

    def __init__(self) -> None:
        self.plain: dict[str, pb.Value] = {}
        self.maps: dict[str, dict[str, pb.Value]] = {}

    def set(self, key: str, value: pb.Value) -> None:
        name, slash, _ = key.partition("/")
        if slash:
            self.maps.setdefault(name, {})[key] = value
        else:
            self.plain[key] = value

    def delete(self, key: str) -> None:
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

    def loaded(self, map_loads: Sequence[str]) -> list[pb.KV]:
        """Every plain Attribute plus the loaded map instances (``NAME/`` = whole map)."""
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
        return [pb.KV(key=key, value=value) for key, value in sorted(entries.items())]


@dataclass(eq=False)
class _Execution:
    id: str
    step_type: str
    movement: pb.StepMovement
    from_id: str
    recovery: pb.RecoveryErrorInfo | None
    started_at: float
    phase: str = "wait_for"
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


@dataclass(eq=False)
class _Run:
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
    attributes: _Attributes = field(default_factory=_Attributes)
    channels: dict[str, deque[pb.ChannelMessage]] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    executions: dict[str, _Execution] = field(default_factory=dict)
    locks: dict[str, str] = field(default_factory=dict)
    lock_released: asyncio.Event = field(default_factory=asyncio.Event)
    history: list[pb.FlowHistoryEvent] = field(default_factory=list)
    results: list[pb.StepCompletionOutput] = field(default_factory=list)
    graceful: bool = False
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    pending_skips: list[tuple[str, str, int | None]] = field(default_factory=list)
    wait_sequence: "itertools.count[int]" = field(default_factory=lambda: itertools.count(1))
    message_sequence: "itertools.count[int]" = field(default_factory=lambda: itertools.count(1))

    @property
    def running(self) -> bool:
        return self.status == _RUNNING


@dataclass(frozen=True)
class _Completed:
    response: Any
    attempt: int
    started_at: float


@dataclass(frozen=True)
class _Failed:
    error: AttemptError
    attempt: int
    started_at: float


def _timestamp(seconds: float) -> Any:
    value = timestamp_pb2.Timestamp()
    value.FromNanoseconds(int(seconds * 1e9))
    return value


def _duration(seconds: float) -> Any:
    value = duration_pb2.Duration()
    value.FromNanoseconds(int(max(seconds, 0.0) * 1e9))
    return value


def _forget_heartbeat(execution: "_Execution") -> None:
    execution.last_heartbeat = None


def _is_loaded(key: str, loads: Iterable[str]) -> bool:
    return any(key == load or (load.endswith("/") and key.startswith(load)) for load in loads)


class Engine:
    """Fake Dex's server side: it owns every Flow run and drives its Step executions."""

    def __init__(self, config: FakeDexConfig, clock: ManualClock) -> None:
        self.config = config
        self.clock = clock
        self.streams = Streams()
        self.blobs = BlobStore(config.blob_threshold_bytes)
        self.pull = PullWorkers(redeliver_before_output=config.redeliver_before_first_output)
        self.listening = ListeningWorkers(redeliver_before_output=config.redeliver_before_first_output)
        self._runs: dict[str, list[_Run]] = {}
        self._attempts: list[AttemptRecord] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        """Cancel every Step execution and close Worker channels."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.listening.close()

    def _spawn(self, coroutine: Any) -> "asyncio.Task[Any]":
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------------ lookups

    def run(self, flow_id: str, run_id: str = "") -> _Run:
        """Return the latest run of ``flow_id`` (or the exact ``run_id``).

        Raises:
            ServiceError: ``NOT_FOUND`` / ``FLOW_NOT_EXISTS`` when there is none.
        """
        runs = self._runs.get(flow_id)
        if not runs:
            raise flow_not_found(flow_id)
        if not run_id:
            return runs[-1]
        for run in runs:
            if run.run_id == run_id:
                return run
        raise flow_not_found(flow_id)

    def active_run(self, flow_id: str, run_id: str = "") -> _Run:
        """Return the run if it is still running, else raise ``FLOW_NOT_EXISTS``."""
        run = self.run(flow_id, run_id)
        if not run.running:
            raise flow_not_active(flow_id)
        return run

    def attempts(self, flow_id: str | None = None) -> list[AttemptRecord]:
        """Return every Step method attempt so far (of one Flow, if given)."""
        return [a for a in self._attempts if flow_id is None or a.flow_id == flow_id]

    def flow_ids(self) -> list[str]:
        """Return every Flow ID ever started."""
        return list(self._runs)

    # ------------------------------------------------------------------ client API

    def start_flow(self, request: pb.StartFlowRequest) -> str:
        """Start a run (``StartFlow``) and return its run ID."""
        if not request.flow_id or not request.flow_type:
            raise invalid_argument("flow_id and flow_type are required")
        options = request.flow_start_options
        previous = self._runs.get(request.flow_id, [])
        if previous:
            latest = previous[-1]
            policy = options.id_reuse_policy
            if latest.running and policy == pb.ID_REUSE_POLICY_ALLOW_TERMINATE_IF_RUNNING:
                self._close(latest, pb.FLOW_STATUS_TERMINATED, 0, "terminated by a new start")
            elif (
                latest.running
                or policy in (pb.ID_REUSE_POLICY_UNSPECIFIED, pb.ID_REUSE_POLICY_DISALLOW_REUSE)
                or (
                    policy == pb.ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY
                    and latest.status == pb.FLOW_STATUS_COMPLETED
                )
            ):
                ignore = options.flow_already_started_options.ignore_already_started_error
                if ignore and request.request_id and request.request_id == latest.request_id:
                    return latest.run_id
                raise already_started(request.flow_id)
        target = self.config.default_worker_target
        if options.HasField("flow_config_override"):
            advertised = options.flow_config_override.worker_target
            if advertised.is_pull_mode:
                target = "pull"
            elif advertised.address:
                target = advertised.address
        run_id = str(uuid.uuid4())
        run = _Run(
            flow_id=request.flow_id,
            run_id=run_id,
            first_run_id=previous[0].first_run_id if previous else run_id,
            flow_type=request.flow_type,
            request_id=request.request_id,
            started_at=self.clock.now(),
            worker_target=target,
        )
        for write in options.attributes:
            if write.value.WhichOneof("kind") != "null_value":
                run.attributes.set(write.key, write.value)
        self._runs.setdefault(request.flow_id, []).append(run)
        self._record(
            run,
            flow_started_or_continued=pb.FlowStartedOrContinuedHistoryEvent(
                flow_execution_id=pb.FlowExecutionID(flow_id=run.flow_id, run_id=run.run_id),
                flow_type=run.flow_type,
                initial_start=pb.FlowInitialStart(
                    start_step_type=request.start_step_type,
                    step_input=request.step_input,
                    step_options=request.step_options,
                    initial_attributes=[pb.KV(key=key, value=value) for key, value in run.attributes.items()],
                ),
            ),
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
        return run_id

    def stop_flow(self, request: pb.StopFlowRequest) -> None:
        """Cancel, terminate or fail an active run (``StopFlow``)."""
        run = self.active_run(request.flow_id, request.run_id)
        if request.stop_type == pb.STOP_TYPE_TERMINATE:
            self._close(run, pb.FLOW_STATUS_TERMINATED, 0, request.reason)
        elif request.stop_type == pb.STOP_TYPE_FAIL:
            self._close(
                run,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_CLIENT_API_FAILING_FLOW,
                request.reason,
            )
        else:
            self._close(run, pb.FLOW_STATUS_CANCELED, 0, request.reason)

    async def wait_for_flow(self, request: pb.WaitForFlowRequest) -> pb.FlowResult:
        """Wait until the run closes (``WaitForFlow``) and return its result."""
        run = self.run(request.flow_id, request.run_id)
        wait = request.wait_time_seconds or self.config.default_long_poll.total_seconds()
        if run.running:
            try:
                await asyncio.wait_for(run.closed.wait(), wait)
            except TimeoutError:
                raise long_poll_timeout(f"flow {request.flow_id} is still running") from None
        return pb.FlowResult(
            flow_status=run.status,  # type: ignore[arg-type]
            results=run.results if request.needs_results else [],
            error_type=run.error_type,  # type: ignore[arg-type]
            error_message=run.error_message,
        )

    def summary(self, request: pb.GetFlowSummaryRequest) -> pb.GetFlowSummaryResponse:
        """Describe the run (``GetFlowSummary``)."""
        run = self.run(request.flow_id, request.run_id)
        response = pb.GetFlowSummaryResponse(
            flow_execution_id=pb.FlowExecutionID(flow_id=run.flow_id, run_id=run.run_id),
            first_run_id=run.first_run_id,
            request_id=run.request_id,
            flow_type=run.flow_type,
            flow_status=run.status,  # type: ignore[arg-type]
            start_time=_timestamp(run.started_at),
        )
        if run.closed_at is not None:
            response.close_time.CopyFrom(_timestamp(run.closed_at))
        return response

    def history(self, request: pb.GetHistoryEventsRequest) -> pb.GetHistoryEventsResponse:
        """Return one page of the run's history (``GetHistoryEvents``)."""
        run = self.run(request.flow_id, request.run_id)
        token = request.next_page_token.decode() if request.next_page_token else ""
        if token and not token.isdigit():
            raise invalid_argument("malformed history page token")
        start = int(token) if token else max(request.start_internal_event_id - 1, 0)
        size = request.estimate_page_size or self.config.history_page_size
        events = run.history[start : start + size]
        end = start + len(events)
        return pb.GetHistoryEventsResponse(
            events=events,
            next_page_token=str(end).encode() if end < len(run.history) else b"",
            next_internal_event_id=end + 1,
        )

    def skip_timer(self, request: pb.SkipTimerRequest) -> None:
        """Fire one Timer now (``SkipTimer``); a not-yet-waiting execution keeps the skip."""
        run = self.active_run(request.flow_id, request.run_id)
        index = request.timer_condition_index if request.HasField("timer_condition_index") else None
        if not request.step_execution_id or (index is None and not request.timer_condition_id):
            raise invalid_argument("skip_timer needs a step execution ID and one Timer selector")
        execution = run.executions.get(request.step_execution_id)
        if execution is not None and execution.phase == "waiting":
            self._apply_skip(execution, request.timer_condition_id, index)
            self._evaluate(run)
        else:
            run.pending_skips.append((request.step_execution_id, request.timer_condition_id, index))

    async def invoke_rpc(self, request: pb.InvokeRPCRequest) -> pb.InvokeRPCResponse:
        """Run an RPC on a Worker and commit its effects atomically (``InvokeRPC``)."""
        run = self.run(request.flow_id, request.run_id)
        locks = sorted(set(request.lock_attribute_keys))
        transactional = bool(locks) or request.is_transactional
        if not run.running and transactional:
            raise flow_not_active(request.flow_id)
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
            self._load_state(
                run,
                worker_request,
                request.load_attribute_map_instances,
                request.load_channel_names,
                request.load_channel_map_instances,
            )
            self.blobs.offload_task(worker_request)
            timeout = request.timeout_seconds or self.config.default_rpc_timeout.total_seconds()
            try:
                response = await asyncio.wait_for(self._call_worker(run, "rpc", worker_request, None), timeout)
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
            if not run.running:
                if has_effects:
                    raise flow_not_active(request.flow_id)
                return pb.InvokeRPCResponse(output=response.output)
            self._commit(
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
            self._record(
                run,
                rpc_execution_completed=pb.RpcExecutionCompletedEvent(
                    rpc_name=request.rpc_name,
                    input=request.input,
                    output=response.output,
                    step_decision=response.step_decision,
                    upsert_attributes=response.upsert_attributes,
                    publish_to_channel=response.publish_to_channel,
                    delete_from_channel=response.delete_from_channel,
                ),
            )
            self._evaluate(run)
            return pb.InvokeRPCResponse(output=response.output)
        finally:
            self._release(run, owner)

    # ------------------------------------------------------------------ streams

    def write_stream(self, request: pb.WriteStreamRequest) -> None:
        """Append a Client message to a Stream (``WriteStream``)."""
        if not request.source:
            raise invalid_argument("a Stream write needs a source")
        self.streams.append(
            request.flow_type,
            request.stream_name,
            request.stream_capacity_bytes,
            request.flow_id,
            request.value,
            request.source,
            self.clock.now(),
        )

    async def read_stream(self, request: pb.ReadStreamRequest) -> pb.ReadStreamResponse:
        """Return the next message after the resume token (``ReadStream``), long-polling."""
        if self.config.stream_read_requires_flow:
            self.run(request.flow_id)
        wait = request.wait_time_seconds or self.config.default_long_poll.total_seconds()
        entry = await self.streams.read(
            request.flow_type, request.stream_name, request.flow_id, request.resume_token, wait
        )
        if entry is None:
            raise long_poll_timeout(f"no Stream message after {request.resume_token!r}")
        return pb.ReadStreamResponse(message=entry.to_proto())

    def list_stream(self, request: pb.ListStreamMessagesRequest) -> pb.ListStreamMessagesResponse:
        """Return a newest-first page of retained messages (``ListStreamMessages``)."""
        if request.page_size < 1:
            raise invalid_argument("page_size must be positive")
        if self.config.stream_read_requires_flow:
            self.run(request.flow_id)
        entries, token = self.streams.page(
            request.flow_type,
            request.stream_name,
            request.flow_id,
            request.page_size,
            request.before_page_token,
        )
        return pb.ListStreamMessagesResponse(messages=[entry.to_proto() for entry in entries], next_page_token=token)

    # ------------------------------------------------------------------ scheduling

    def _schedule(
        self,
        run: _Run,
        movement: pb.StepMovement,
        from_id: str,
        recovery: pb.RecoveryErrorInfo | None = None,
    ) -> None:
        number = run.counters.get(movement.step_type, 0) + 1
        run.counters[movement.step_type] = number
        execution = _Execution(
            id=f"{movement.step_type}-{number}",
            step_type=movement.step_type,
            movement=movement,
            from_id=from_id,
            recovery=recovery,
            started_at=self.clock.now(),
        )
        run.executions[execution.id] = execution
        execution.task = self._spawn(self._drive(run, execution))

    async def _drive(self, run: _Run, execution: _Execution) -> None:
        options = execution.movement.step_options
        try:
            if not options.skip_wait_for:
                wait_outcome = await self._run_method(run, execution, "wait_for")
                if isinstance(wait_outcome, _Failed):
                    self._record_failure(run, execution, "wait_for", wait_outcome)
                    if options.wait_for_failure_policy != (pb.WAIT_FOR_METHOD_FAILURE_POLICY_PROCEED_ON_FAILURE):
                        self._fail_flow(run, execution, "wait_for", wait_outcome.error)
                        return
                    execution.results = pb.ConditionResults(wait_for_failed=True)
                    execution.recovery = pb.RecoveryErrorInfo(
                        detail=wait_outcome.error.detail,
                        error_type=wait_outcome.error.error_type,
                    )
                else:
                    response = wait_outcome.response
                    self._commit(
                        run,
                        response.upsert_attributes,
                        response.publish_to_channel,
                        response.delete_from_channel,
                    )
                    for kv in response.upsert_step_exe_locals:
                        execution.locals[kv.key] = kv.value
                    self._record_success(run, execution, "wait_for", wait_outcome)
                    if response.HasField("waiting_condition"):
                        await self._wait(run, execution, response.waiting_condition)
                    else:
                        self._evaluate(run)
            execution.phase = "execute"
            outcome = await self._run_method(run, execution, "execute")
            if isinstance(outcome, _Failed):
                self._record_failure(run, execution, "execute", outcome)
                run.executions.pop(execution.id, None)
                if options.execute_failure_policy == (pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP):
                    self._schedule(
                        run,
                        pb.StepMovement(
                            step_type=options.execute_failure_proceed_step_type,
                            step_input=execution.movement.step_input,
                            step_options=options.execute_failure_proceed_step_options,
                        ),
                        execution.id,
                        pb.RecoveryErrorInfo(detail=outcome.error.detail, error_type=outcome.error.error_type),
                    )
                else:
                    self._fail_flow(run, execution, "execute", outcome.error)
                return
            response = outcome.response
            self._commit(
                run,
                response.upsert_attributes,
                response.publish_to_channel,
                response.delete_from_channel,
            )
            self._record_success(run, execution, "execute", outcome)
            run.executions.pop(execution.id, None)
            execution.phase = "done"
            self._decide(run, execution, response.step_decision)
            self._evaluate(run)
        finally:
            execution.phase = "done"
            run.executions.pop(execution.id, None)
            self._maybe_complete(run)

    async def _wait(self, run: _Run, execution: _Execution, waiting: pb.WaitingCondition) -> None:
        now = self.clock.now()
        execution.waiting = waiting
        execution.phase = "waiting"
        execution.wait_sequence = next(run.wait_sequence)
        execution.timer_deadlines = [now + t.duration_seconds for t in waiting.timer_conditions]
        for skip in [s for s in run.pending_skips if s[0] == execution.id]:
            run.pending_skips.remove(skip)
            self._apply_skip(execution, skip[1], skip[2])
        self._evaluate(run)
        watcher = self._spawn(self._watch_timers(run, execution)) if waiting.timer_conditions else None
        try:
            await execution.satisfied.wait()
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _watch_timers(self, run: _Run, execution: _Execution) -> None:
        while execution.phase == "waiting":
            now = self.clock.now()
            pending = [
                deadline
                for index, deadline in enumerate(execution.timer_deadlines)
                if index not in execution.skipped_timers and deadline > now
            ]
            if not pending:
                return
            await self.clock.sleep_until(min(pending))
            self._evaluate(run)

    @staticmethod
    def _apply_skip(execution: _Execution, condition_id: str, index: int | None) -> None:
        assert execution.waiting is not None
        timers = execution.waiting.timer_conditions
        if index is None:
            index = next((i for i, timer in enumerate(timers) if timer.condition_id == condition_id), None)
        if index is not None and 0 <= index < len(timers):
            execution.skipped_timers.add(index)

    # ------------------------------------------------------------------ methods

    async def _run_method(self, run: _Run, execution: _Execution, method: Method) -> Any:
        options = execution.movement.step_options
        is_wait = method == "wait_for"
        retry = options.wait_for_retry_policy if is_wait else options.execute_retry_policy
        maximum_attempts: int | None = retry.maximum_attempts or self.config.default_maximum_attempts
        total = retry.total_duration_seconds or self.config.default_total_retry_duration.total_seconds()
        lock_keys = sorted(
            set(options.wait_for_lock_attribute_keys if is_wait else options.execute_lock_attribute_keys)
        )
        first_attempt = self.clock.now()
        skipped_delay = 0.0
        request: Any = None
        attempt = 0
        _forget_heartbeat(execution)
        while True:
            attempt += 1
            owner = f"{execution.id}:{method}"
            await self._acquire(run, lock_keys, owner)
            try:
                if request is None:
                    request = self._method_request(run, execution, method)
                context = request.context
                context.attempt = attempt
                context.first_attempt_timestamp = int(first_attempt)
                context.ClearField("last_heartbeat_value")
                if execution.last_heartbeat is not None:
                    context.last_heartbeat_value.CopyFrom(execution.last_heartbeat)
                started = self.clock.now()
                try:
                    response = await self._attempt(run, execution, method, request)
                except AttemptError as error:
                    failure = error
                else:
                    self._log_attempt(run, execution, method, attempt, started, None, None)
                    return _Completed(response, attempt, first_attempt)
            finally:
                self._release(run, owner)
            delay = self._retry_delay(retry, attempt, failure)
            elapsed = self.clock.now() - first_attempt + skipped_delay
            exhausted = (maximum_attempts is not None and attempt >= maximum_attempts) or (elapsed + delay > total)
            self._log_attempt(run, execution, method, attempt, started, failure, None if exhausted else delay)
            if exhausted:
                return _Failed(failure, attempt, first_attempt)
            scaled = delay * self.config.retry_delay_scale
            skipped_delay += delay - scaled
            if scaled > 0:
                await self.clock.sleep_until(self.clock.now() + scaled)

    def _retry_delay(self, retry: pb.RetryPolicy, attempt: int, failure: AttemptError) -> float:
        if failure.retry_after_seconds > 0:
            return float(failure.retry_after_seconds)
        initial = retry.initial_interval_seconds or self.config.default_initial_retry_interval.total_seconds()
        coefficient = retry.backoff_coefficient or self.config.default_backoff_coefficient
        maximum = retry.maximum_interval_seconds or initial * self.config.default_maximum_interval_factor
        return float(min(initial * coefficient ** (attempt - 1), maximum))

    def _log_attempt(
        self,
        run: _Run,
        execution: _Execution,
        method: str,
        attempt: int,
        started: float,
        failure: AttemptError | None,
        delay: float | None,
    ) -> None:
        self._attempts.append(
            AttemptRecord(
                flow_id=run.flow_id,
                step_execution_id=execution.id,
                step_type=execution.step_type,
                method=method,
                attempt=attempt,
                started_at=started,
                ended_at=self.clock.now(),
                error_type="" if failure is None else failure.error_type,
                error_detail="" if failure is None else failure.detail,
                next_delay_seconds=delay,
            )
        )

    def _method_request(self, run: _Run, execution: _Execution, method: Method) -> Any:
        options = execution.movement.step_options
        context = pb.Context(
            flow_id=run.flow_id,
            run_id=run.run_id,
            flow_started_timestamp=int(run.started_at),
            step_execution_id=execution.id,
            from_step_execution_id=execution.from_id,
        )
        if execution.recovery is not None:
            context.recovery_error.CopyFrom(execution.recovery)
        request: Any
        if method == "wait_for":
            request = pb.InvokeWaitForMethodRequest(
                context=context,
                flow_type=run.flow_type,
                step_type=execution.step_type,
                step_input=execution.movement.step_input,
            )
            self._load_state(
                run,
                request,
                options.wait_for_load_attribute_map_instances,
                options.wait_for_load_channel_names,
                options.wait_for_load_channel_map_instances,
            )
        else:
            request = pb.InvokeExecuteMethodRequest(
                context=context,
                flow_type=run.flow_type,
                step_type=execution.step_type,
                step_input=execution.movement.step_input,
                step_exe_locals=[pb.KV(key=k, value=v) for k, v in execution.locals.items()],
            )
            if execution.results is not None:
                request.condition_results.CopyFrom(execution.results)
            self._load_state(
                run,
                request,
                options.execute_load_attribute_map_instances,
                options.execute_load_channel_names,
                options.execute_load_channel_map_instances,
            )
        self.blobs.offload_task(request)
        return request

    @staticmethod
    def _load_state(
        run: _Run,
        request: Any,
        map_loads: Sequence[str],
        channel_loads: Sequence[str],
        channel_map_loads: Sequence[str],
    ) -> None:
        request.attributes.extend(run.attributes.loaded(map_loads))
        for name, queue in sorted(run.channels.items()):
            if not queue:
                continue
            request.channel_infos[name].size = len(queue)
            if name in channel_loads or ("/" in name and _is_loaded(name, channel_map_loads)):
                request.loaded_channel_messages[name].messages.extend(queue)
        request.loaded_attribute_map_instances.extend(map_loads)
        request.loaded_channel_names.extend(channel_loads)
        request.loaded_channel_map_instances.extend(channel_map_loads)

    async def _call_worker(self, run: _Run, kind: str, request: Any, on_frame: Any) -> Any:
        wait = self.config.dispatch_wait.total_seconds()
        if run.worker_target == "pull":
            return await self.pull.call(run.flow_type, kind, request, on_frame, wait)
        if kind == "rpc":
            return await self.listening.call_rpc(run.worker_target, request, wait)
        return await self.listening.call_step(run.worker_target, kind, request, on_frame, wait)

    async def _attempt(self, run: _Run, execution: _Execution, method: Method, request: Any) -> Any:
        options = execution.movement.step_options
        method_timeout = (
            options.wait_for_timeout_seconds if method == "wait_for" else options.execute_timeout_seconds
        ) or self.config.default_method_timeout.total_seconds()
        heartbeat_timeout = (
            max(options.heartbeat_timeout_seconds, self.config.heartbeat_timeout_floor.total_seconds())
            if options.heartbeat_timeout_seconds
            else self.config.default_heartbeat_timeout.total_seconds()
        )
        started = self.clock.now()
        activity = asyncio.Event()
        last_activity = [started]

        def on_frame(output: Any) -> None:
            kind = output.WhichOneof("output")
            if kind == "heartbeat":
                heartbeat = output.heartbeat
                execution.last_heartbeat = heartbeat.value if heartbeat.HasField("value") else None
            elif kind == "stream_write":
                write = output.stream_write
                self.streams.append(
                    run.flow_type,
                    write.stream_name,
                    write.stream_capacity_bytes,
                    run.flow_id,
                    write.value,
                    f"#{execution.id}",
                    self.clock.now(),
                )
            execution.progress_frames += 1
            last_activity[0] = self.clock.now()
            activity.set()

        async def watchdog() -> AttemptError:
            while True:
                deadline = min(started + method_timeout, last_activity[0] + heartbeat_timeout)
                activity.clear()
                if await self.clock.sleep_until(deadline, wake=activity):
                    now = self.clock.now()
                    if now >= started + method_timeout:
                        return AttemptError(METHOD_TIMEOUT, f"{method} exceeded its {method_timeout:g} s timeout")
                    if now >= last_activity[0] + heartbeat_timeout:
                        return AttemptError(
                            HEARTBEAT_TIMEOUT,
                            f"no heartbeat for {heartbeat_timeout:g} s",
                        )

        call = asyncio.ensure_future(self._call_worker(run, method, request, on_frame))
        guard = asyncio.ensure_future(watchdog())
        try:
            await asyncio.wait({call, guard}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (call, guard):
                if not task.done():
                    task.cancel()
            await asyncio.gather(call, guard, return_exceptions=True)
        if call.done() and not call.cancelled():
            return call.result()
        raise guard.result()

    # ------------------------------------------------------------------ locks

    async def _acquire(self, run: _Run, keys: list[str], owner: str) -> None:
        while any(key in run.locks for key in keys):
            await run.lock_released.wait()
        for key in keys:
            run.locks[key] = owner

    @staticmethod
    def _release(run: _Run, owner: str) -> None:
        released = [key for key, holder in run.locks.items() if holder == owner]
        for key in released:
            del run.locks[key]
        if released:
            event, run.lock_released = run.lock_released, asyncio.Event()
            event.set()

    # ------------------------------------------------------------------ commits

    def _commit(
        self,
        run: _Run,
        writes: Sequence[pb.AttributeWrite],
        publishes: Sequence[pb.ChannelMessage],
        deletions: Sequence[pb.ChannelMessageDeletion],
        *,
        strict_deletions: bool = False,
    ) -> None:
        if strict_deletions:
            for deletion in deletions:
                queue = run.channels.get(deletion.channel_name, deque())
                if not any(m.message_id == deletion.message_id for m in queue):
                    raise ServiceError(
                        grpc.StatusCode.NOT_FOUND,
                        pb.ERROR_SUB_STATUS_CHANNEL_MESSAGE_NOT_FOUND,
                        f"channel message {deletion.message_id} not found",
                    )
        for write in writes:
            if write.value.WhichOneof("kind") in (None, "null_value"):
                run.attributes.delete(write.key)
            else:
                run.attributes.set(write.key, write.value)
        for deletion in deletions:
            existing = run.channels.get(deletion.channel_name)
            if existing is not None:
                kept = deque(m for m in existing if m.message_id != deletion.message_id)
                run.channels[deletion.channel_name] = kept
        for message in publishes:
            run.channels.setdefault(message.channel_name, deque()).append(
                pb.ChannelMessage(
                    channel_name=message.channel_name,
                    value=message.value,
                    message_id=f"{run.run_id[:8]}-{next(run.message_sequence)}",
                )
            )

    # ------------------------------------------------------------------ conditions

    def _evaluate(self, run: _Run) -> None:
        if not run.running:
            return
        waiting = sorted(
            (e for e in run.executions.values() if e.phase == "waiting"),
            key=lambda e: e.wait_sequence,
            reverse=self.config.waiter_order == "newest_first",
        )
        for execution in waiting:
            results = self._try_satisfy(run, execution)
            if results is not None:
                execution.results = results
                execution.phase = "satisfied"
                execution.satisfied.set()

    def _try_satisfy(self, run: _Run, execution: _Execution) -> pb.ConditionResults | None:
        waiting = execution.waiting
        assert waiting is not None
        now = self.clock.now()
        timers = list(waiting.timer_conditions)
        channels = list(waiting.channel_conditions)
        timer_ready = [
            index in execution.skipped_timers or now >= execution.timer_deadlines[index] for index in range(len(timers))
        ]

        def channel_ready(condition: pb.ChannelCondition) -> bool:
            size = len(run.channels.get(condition.channel_name, ()))
            if condition.HasField("at_least"):
                return size >= condition.at_least
            return condition.HasField("at_most") or size >= 1

        ready = [("timer", i, timer_ready[i]) for i in range(len(timers))] + [
            ("channel", i, channel_ready(c)) for i, c in enumerate(channels)
        ]
        kind = waiting.waiting_condition_type
        chosen: list[tuple[str, int]]
        if kind == pb.WAITING_CONDITION_TYPE_ANY_COMPLETED:
            chosen = next(([(k, i)] for k, i, r in ready if r), [])
        elif kind == pb.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED:
            by_id = {(timers[i] if k == "timer" else channels[i]).condition_id: (k, i, r) for k, i, r in ready}
            chosen = []
            for combination in waiting.condition_combinations:
                members = [by_id[c] for c in combination.condition_ids if c in by_id]
                if members and all(r for _, _, r in members):
                    chosen = [(k, i) for k, i, _ in members]
                    break
        else:
            chosen = [(k, i) for k, i, _ in ready] if all(r for _, _, r in ready) else []
        if not chosen:
            return None
        selected = set(chosen)
        results = pb.ConditionResults()
        for index, timer in enumerate(timers):
            results.timer_results.add(
                condition_id=timer.condition_id,
                condition_status=_COMPLETED if ("timer", index) in selected else _WAITING,
            )
        for index, condition in enumerate(channels):
            entry = results.channel_results.add(
                condition_id=condition.condition_id,
                channel_name=condition.channel_name,
                condition_status=_COMPLETED if ("channel", index) in selected else _WAITING,
            )
            if ("channel", index) not in selected:
                continue
            queue = run.channels.get(condition.channel_name, deque())
            if condition.HasField("at_most"):
                count = min(condition.at_most, len(queue))
            elif condition.HasField("at_least"):
                count = len(queue)
            else:
                count = min(1, len(queue))
            for _ in range(count):
                entry.values.append(queue.popleft().value)
            if not queue:
                run.channels.pop(condition.channel_name, None)
        return results

    # ------------------------------------------------------------------ decisions

    def _decide(self, run: _Run, execution: _Execution, decision: pb.StepDecision) -> None:
        for step_type in decision.cancel_step_types:
            self._cancel_where(run, lambda e, t=step_type: e.step_type == t)
        for step_type in decision.cancel_sibling_step_types:
            self._cancel_where(
                run,
                lambda e, t=step_type: e.step_type == t and e.from_id == execution.from_id,
            )
        close = decision.close_decision
        close_type = close.close_decision_type
        if close_type == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE_ON_CHANNELS_EMPTY and all(
            not run.channels.get(name) for name in close.conditional_channel_names
        ):
            self._add_result(run, execution, close)
            self._close(run, pb.FLOW_STATUS_COMPLETED, 0, "")
            return
        for movement in decision.next_steps:
            self._schedule(run, movement, execution.id)
        if close_type == pb.CLOSE_DECISION_TYPE_GRACEFUL_COMPLETE:
            self._add_result(run, execution, close)
            run.graceful = True
        elif close_type == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE:
            self._add_result(run, execution, close)
            self._close(run, pb.FLOW_STATUS_COMPLETED, 0, "")
        elif close_type == pb.CLOSE_DECISION_TYPE_FORCE_FAIL:
            self._close(
                run,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW,
                close.close_input.string_value,
            )

    @staticmethod
    def _add_result(run: _Run, execution: _Execution, close: pb.CloseDecision) -> None:
        if close.HasField("close_input"):
            run.results.append(
                pb.StepCompletionOutput(
                    completed_step_type=execution.step_type,
                    completed_step_execution_id=execution.id,
                    completed_step_output=close.close_input,
                )
            )

    def _cancel_where(self, run: _Run, predicate: Any) -> None:
        for execution in list(run.executions.values()):
            if predicate(execution):
                run.executions.pop(execution.id, None)
                execution.phase = "done"
                if execution.task is not None and execution.task is not asyncio.current_task():
                    execution.task.cancel()

    def _maybe_complete(self, run: _Run) -> None:
        if run.running and run.graceful and not run.executions:
            self._close(run, pb.FLOW_STATUS_COMPLETED, 0, "")

    def _fail_flow(self, run: _Run, execution: _Execution, method: str, error: AttemptError) -> None:
        self._close(
            run,
            pb.FLOW_STATUS_FAILED,
            pb.FLOW_ERROR_TYPE_WORKER_API_FAIL,
            f"{execution.id} {method} failed: {error.error_type}: {error.detail}",
        )

    def _close(self, run: _Run, status: int, error_type: int, message: str) -> None:
        if not run.running:
            return
        run.status = status
        run.error_type = error_type
        run.error_message = message
        run.closed_at = self.clock.now()
        self._cancel_where(run, lambda _: True)
        self._record(
            run,
            flow_closed=pb.FlowClosedHistoryEvent(
                flow_status=status,  # type: ignore[arg-type]
                results=run.results,
                error_type=error_type,  # type: ignore[arg-type]
                error_message=message,
            ),
        )
        run.closed.set()

    # ------------------------------------------------------------------ history

    def _record(self, run: _Run, **payload: Any) -> None:
        run.history.append(
            pb.FlowHistoryEvent(event_id=len(run.history) + 1, event_time=_timestamp(self.clock.now()), **payload)
        )

    def _event_context(
        self, execution: _Execution, attempt: int, started_at: float, failure: AttemptError | None
    ) -> pb.StepMethodEventContext:
        context = pb.StepMethodEventContext(
            step_execution_id=execution.id,
            from_step_execution_id=execution.from_id,
            step_type=execution.step_type,
            final_attempt=attempt,
            started_time=_timestamp(started_at),
            duration=_duration(self.clock.now() - started_at),
        )
        if failure is not None:
            context.last_failure_info.CopyFrom(self._failure(failure, attempt))
        return context

    @staticmethod
    def _failure(error: AttemptError, attempt: int) -> pb.StepMethodFailure:
        return pb.StepMethodFailure(
            backend_error=error.detail,
            attempt=attempt,
            details=pb.ServiceErrorResponse(
                detail=error.detail,
                sub_status=pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                original_worker_error_detail=error.detail,
                original_worker_error_type=error.error_type,
                original_worker_error_status=error.grpc_status,
                original_worker_error_stack_trace=error.stack_trace,
                dispatch_task_error_reason=error.dispatch_reason,  # type: ignore[arg-type]
            ),
        )

    def _record_success(self, run: _Run, execution: _Execution, method: Method, outcome: _Completed) -> None:
        event_input = pb.StepMethodEventInput(step_input=execution.movement.step_input)
        context = self._event_context(execution, outcome.attempt, outcome.started_at, None)
        response = outcome.response
        if method == "wait_for":
            output = pb.StepWaitForCompletedOutput(
                upsert_attributes=response.upsert_attributes,
                publish_to_channel=response.publish_to_channel,
                upsert_step_execution_locals=response.upsert_step_exe_locals,
                delete_from_channel=response.delete_from_channel,
            )
            if response.HasField("waiting_condition"):
                output.wait_for_condition.CopyFrom(response.waiting_condition)
            self._record(
                run,
                step_wait_for_completed=pb.StepWaitForCompletedEvent(input=event_input, output=output, context=context),
            )
            return
        if execution.results is not None:
            event_input.condition_results.CopyFrom(execution.results)
        self._record(
            run,
            step_execute_completed=pb.StepExecuteCompletedEvent(
                input=event_input,
                output=pb.StepExecuteCompletedOutput(
                    step_decision=response.step_decision,
                    upsert_attributes=response.upsert_attributes,
                    publish_to_channel=response.publish_to_channel,
                    upsert_step_execution_locals=response.upsert_step_exe_locals,
                    delete_from_channel=response.delete_from_channel,
                ),
                context=context,
            ),
        )

    def _record_failure(self, run: _Run, execution: _Execution, method: Method, outcome: _Failed) -> None:
        event_input = pb.StepMethodEventInput(step_input=execution.movement.step_input)
        context = self._event_context(execution, outcome.attempt, outcome.started_at, outcome.error)
        output = pb.StepMethodFailedOutput(failure=self._failure(outcome.error, outcome.attempt))
        if method == "wait_for":
            self._record(
                run,
                step_wait_for_failed=pb.StepWaitForFailedEvent(input=event_input, output=output, context=context),
            )
        else:
            self._record(
                run,
                step_execute_failed=pb.StepExecuteFailedEvent(input=event_input, output=output, context=context),
            )

    # ------------------------------------------------------------------ test hooks

    def waiting_executions(self, flow_id: str) -> list[str]:
        """Return the IDs of the run's executions that are waiting on a condition."""
        run = self.run(flow_id)
        return [e.id for e in run.executions.values() if e.phase == "waiting"]

    def active_executions(self, flow_id: str) -> dict[str, str]:
        """Return ``{step execution ID: phase}`` of the run's active executions."""
        run = self.run(flow_id)
        return {e.id: e.phase for e in run.executions.values()}

    def last_heartbeat(self, flow_id: str, step_execution_id: str) -> pb.Value | None:
        """Return the last heartbeat value the server holds for an active execution."""
        execution = self.run(flow_id).executions.get(step_execution_id)
        return None if execution is None else execution.last_heartbeat

    def progress_frames(self, flow_id: str, step_execution_id: str) -> int:
        """Return how many heartbeat/Stream frames an active execution sent so far."""
        execution = self.run(flow_id).executions.get(step_execution_id)
        return 0 if execution is None else execution.progress_frames

    def attribute(self, flow_id: str, key: str) -> pb.Value | None:
        """Return the raw stored value of one Attribute (physical key) or ``None``."""
        return self.run(flow_id).attributes.get(key)

    def channel_messages(self, flow_id: str, name: str) -> list[pb.ChannelMessage]:
        """Return the queued messages of one Channel (physical name), oldest first."""
        return list(self.run(flow_id).channels.get(name, ()))

    def notify_clock(self) -> None:
        """Re-evaluate every waiting condition (after the clock moved)."""
        for runs in self._runs.values():
            for run in runs:
                with contextlib.suppress(Exception):
                    self._evaluate(run)
