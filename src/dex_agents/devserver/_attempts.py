"""Attempts of a Step method: dispatch to a Worker, method and heartbeat timeouts, retries with back-off.

`MethodAttempts.run_method` takes the method's locks and holds them across
every attempt and back-off until the method call ends (as real Dex does),
builds its task request (loaded state, condition results, last heartbeat),
dispatches it, and on a failure waits `retry_delay` (scaled by the config)
until the retry policy's attempts or total duration run out. Every attempt is logged as an `AttemptRecord`.
"""

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any, Literal

from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._blobs import BlobStore
from dex_agents.devserver._clock import ServerClock
from dex_agents.devserver._config import DevServerConfig
from dex_agents.devserver._errors import ServiceError
from dex_agents.devserver._state import Execution, Run, acquire, load_state, release
from dex_agents.devserver._streams import Streams
from dex_agents.devserver._workers import WORKER_DISCONNECTED, AttemptError, ListeningWorkers, PullWorkers

Method = Literal["wait_for", "execute"]

HEARTBEAT_TIMEOUT = "dex.devserver.HeartbeatTimeout"
METHOD_TIMEOUT = "dex.devserver.MethodTimeout"


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt of one Step method, as the dev server ran it.

    Attributes:
        flow_id: The Flow instance.
        step_execution_id: ``<StepType>-<n>``.
        step_type: The Step type.
        method: ``"wait_for"`` or ``"execute"``.
        attempt: One-based attempt number.
        started_at: Fake-clock Unix seconds when the attempt was dispatched.
        ended_at: Fake-clock Unix seconds when it ended.
        error_type: ``""`` for a success, else the Worker's or the dev server's error type.
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


@dataclass(frozen=True)
class Completed:
    """A method that returned: the Worker's response, on its final attempt."""

    response: Any
    attempt: int
    started_at: float


@dataclass(frozen=True)
class Failed:
    """A method whose attempts ran out: the last error, on its final attempt."""

    error: AttemptError
    attempt: int
    started_at: float


def retry_delay(retry: pb.RetryPolicy, attempt: int, failure: AttemptError, config: DevServerConfig) -> float:
    """The back-off after failed ``attempt``: the Worker's retry-after, else exponential up to the maximum."""
    if failure.retry_after_seconds > 0:
        return float(failure.retry_after_seconds)
    initial = retry.initial_interval_seconds or config.default_initial_retry_interval.total_seconds()
    coefficient = retry.backoff_coefficient or config.default_backoff_coefficient
    maximum = retry.maximum_interval_seconds or config.default_maximum_interval.total_seconds()
    return float(min(initial * coefficient ** (attempt - 1), maximum))


def _forget_heartbeat(execution: Execution) -> None:
    execution.last_heartbeat = None


@dataclass(eq=False)
class MethodAttempts:
    """Runs Step methods' attempts on the Workers and logs each attempt."""

    config: DevServerConfig
    clock: ServerClock
    streams: Streams
    blobs: BlobStore
    pull: PullWorkers
    listening: ListeningWorkers
    log: list[AttemptRecord] = field(default_factory=list, init=False)
    grace_until: float = field(default=0.0, init=False)
    """Loop time until which a task waits longer for a Worker (Workers reconnect after a restart)."""

    async def run_method(self, run: Run, execution: Execution, method: Method) -> Completed | Failed:
        """Run ``method`` until an attempt returns or the retry policy gives up.

        An execution read from the data dir goes on with the attempts it had: a method that
        was backing off waits for its stored retry time (on the server's clock, so the time
        the server was down counts); an attempt that was running is redelivered under the
        rules of a lost Worker: dispatched again when it had sent nothing, else failed
        (``dex.devserver.WorkerDisconnected``) and retried as its retry policy says.
        """
        options = execution.movement.step_options
        is_wait = method == "wait_for"
        retry = options.wait_for_retry_policy if is_wait else options.execute_retry_policy
        maximum_attempts: int | None = retry.maximum_attempts or self.config.default_maximum_attempts
        total = retry.total_duration_seconds or self.config.default_total_retry_duration.total_seconds()
        lock_keys = sorted(
            set(options.wait_for_lock_attribute_keys if is_wait else options.execute_lock_attribute_keys)
        )
        if execution.method != method or execution.first_attempt_at is None:
            execution.method = method
            execution.attempt = 0
            execution.first_attempt_at = self.clock.now()
            execution.output_seen = False
            execution.retry_at = None
            execution.skipped_delay = 0.0
            _forget_heartbeat(execution)
        owner = f"{execution.id}:{method}"
        await acquire(run, lock_keys, owner)
        try:
            return await self._attempts(run, execution, method, retry, maximum_attempts, total)
        finally:
            release(run, owner)

    def _resumed_failure(self, execution: Execution) -> AttemptError | None:
        """The failure of an attempt that ran when the server stopped, or ``None`` to dispatch it again."""
        if execution.attempt == 0 or execution.retry_at is not None:
            return None
        if not execution.output_seen and self.config.redeliver_before_first_output:
            execution.attempt -= 1  # the same attempt again, as for a Worker lost before its first output
            return None
        return AttemptError(WORKER_DISCONNECTED, "the dev server restarted while the attempt ran")

    async def _attempts(
        self,
        run: Run,
        execution: Execution,
        method: Method,
        retry: pb.RetryPolicy,
        maximum_attempts: int | None,
        total: float,
    ) -> Completed | Failed:
        """Attempts and back-offs of one method call, with its locks held throughout."""
        first_attempt = execution.first_attempt_at
        assert first_attempt is not None
        request: Any = None
        failure = self._resumed_failure(execution) if execution.task_resumed else None
        execution.task_resumed = False
        if execution.retry_at is not None:
            await self.clock.sleep_until(execution.retry_at)
        while True:
            started = self.clock.now()
            if failure is None:
                execution.attempt += 1
                execution.output_seen = False
                execution.retry_at = None
                run.journal.execution(run, execution, progress=True)
                attempt = execution.attempt
                if request is None:
                    request = self._method_request(run, execution, method)
                context = request.context
                context.attempt = attempt
                # The server's clock, as superdurable/dex sets it (server/service/common/retry/
                # step_activity_attempt.go: scheduledTime.Unix() of the first attempt, kept on retries).
                context.first_attempt_timestamp = int(first_attempt)
                context.ClearField("last_heartbeat_value")
                if execution.last_heartbeat is not None:
                    context.last_heartbeat_value.CopyFrom(execution.last_heartbeat)
                try:
                    response = await self._attempt(run, execution, method, request)
                except AttemptError as error:
                    failure = error
                else:
                    self._log(run, execution, method, attempt, started, None, None)
                    return Completed(response, attempt, first_attempt)
            attempt = execution.attempt
            delay = retry_delay(retry, attempt, failure, self.config)
            elapsed = self.clock.now() - first_attempt + execution.skipped_delay
            exhausted = (maximum_attempts is not None and attempt >= maximum_attempts) or (elapsed + delay > total)
            self._log(run, execution, method, attempt, started, failure, None if exhausted else delay)
            if exhausted:
                return Failed(failure, attempt, first_attempt)
            failure = None
            scaled = delay * self.config.retry_delay_scale
            execution.skipped_delay += delay - scaled
            execution.retry_at = self.clock.now() + scaled
            run.journal.execution(run, execution, progress=True)
            if scaled > 0:
                await self.clock.sleep_until(execution.retry_at)

    def _log(
        self,
        run: Run,
        execution: Execution,
        method: str,
        attempt: int,
        started: float,
        failure: AttemptError | None,
        delay: float | None,
    ) -> None:
        record = AttemptRecord(
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
        self.log.append(record)
        run.journal.attempt(len(self.log), record)

    def _method_request(self, run: Run, execution: Execution, method: Method) -> Any:
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
            load_state(
                run,
                request,
                options.wait_for_load_attribute_map_instances,
                options.wait_for_load_channel_names,
                options.wait_for_load_channel_map_instances,
                self.blobs.sent,
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
            load_state(
                run,
                request,
                options.execute_load_attribute_map_instances,
                options.execute_load_channel_names,
                options.execute_load_channel_map_instances,
                self.blobs.sent,
            )
        self.blobs.offload_task(request, attributes=False)
        return request

    async def call_worker(self, run: Run, kind: str, request: Any, on_frame: Any) -> Any:
        """Dispatch one task (``wait_for``, ``execute`` or ``rpc``) to the run's Workers."""
        wait = max(self.config.dispatch_wait.total_seconds(), self.grace_until - asyncio.get_running_loop().time())
        if run.worker_target == "pull":
            return await self.pull.call(run.flow_type, kind, request, on_frame, wait)
        if kind == "rpc":
            return await self.listening.call_rpc(run.worker_target, request, wait)
        return await self.listening.call_step(run.worker_target, kind, request, on_frame, wait)

    async def _attempt(self, run: Run, execution: Execution, method: Method, request: Any) -> Any:
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
        last_activity = [started]

        def on_frame(output: Any) -> None:
            kind = output.WhichOneof("output")
            first = not execution.output_seen
            execution.output_seen = True
            if kind == "heartbeat":
                heartbeat = output.heartbeat
                execution.last_heartbeat = heartbeat.value if heartbeat.HasField("value") else None
            if first or kind == "heartbeat":
                # One row, queued before the frame's Stream message: a reader that saw the message as
                # durable finds the attempt's output seen after a restart too (it is not sent again).
                run.journal.execution(run, execution, progress=True)
            if kind == "stream_write":
                write = output.stream_write
                # A Step's Stream write is fire-and-forget: a rejected write is dropped.
                with contextlib.suppress(ServiceError):
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

        call = asyncio.ensure_future(self.call_worker(run, method, request, on_frame))
        timed_out: list[AttemptError] = []

        def watch() -> None:
            # Activity only moves the deadline later, so the watch waits for the deadline it knows and
            # looks again then (a clock timer, not a task: waking on every frame would cost a few tasks each).
            now = self.clock.now()
            if now >= started + method_timeout:
                error = AttemptError(METHOD_TIMEOUT, f"{method} exceeded its {method_timeout:g} s timeout")
            elif now >= last_activity[0] + heartbeat_timeout:
                error = AttemptError(HEARTBEAT_TIMEOUT, f"no heartbeat for {heartbeat_timeout:g} s")
            else:
                timer[0] = self.clock.call_at(
                    min(started + method_timeout, last_activity[0] + heartbeat_timeout), watch
                )
                return
            if call.cancel():  # a call that already returned keeps its result
                timed_out.append(error)

        timer = [self.clock.call_at(min(started + method_timeout, started + heartbeat_timeout), watch)]
        try:
            return await call
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if timed_out and (current is None or not current.cancelling()):
                raise timed_out[0] from None
            raise
        finally:
            timer[0].cancel()
            if not call.done():
                call.cancel()
