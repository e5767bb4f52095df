"""How the dev server reaches Workers: pull-mode task streams and listening ``WorkerService``s."""

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._errors import worker_error_from_rpc_error

FrameHandler = Callable[[Any], None]
"""Receives each progress frame (``heartbeat`` / ``stream_write`` output) of a Step call."""

WORKER_DISCONNECTED = "dex.devserver.WorkerDisconnected"
WORKER_UNAVAILABLE = "dex.devserver.WorkerUnavailable"
NO_WORKER_AVAILABLE = "dex.devserver.NoWorkerAvailable"
UNKNOWN_NAME = "dex.devserver.UnknownName"
PROTOCOL_ERROR = "dex.devserver.WorkerProtocolError"

_STEP_PATHS: dict[str, tuple[str, Any]] = {
    "wait_for": (
        "/dex.WorkerService/InvokeWaitForMethod",
        pb.InvokeWaitForMethodOutput,
    ),
    "execute": (
        "/dex.WorkerService/InvokeExecuteMethod",
        pb.InvokeExecuteMethodOutput,
    ),
}
_RPC_PATH = "/dex.WorkerService/InvokeWorkerRPC"


class AttemptError(Exception):
    """One failed Worker call: the Worker's own error or a transport/dispatch failure."""

    def __init__(
        self,
        error_type: str,
        detail: str,
        *,
        retry_after_seconds: int = 0,
        stack_trace: str = "",
        grpc_status: int = 2,
        dispatch_reason: int = 0,
        from_worker: bool = False,
    ) -> None:
        super().__init__(detail)
        self.error_type = error_type
        self.detail = detail
        self.retry_after_seconds = retry_after_seconds
        self.stack_trace = stack_trace
        self.grpc_status = grpc_status
        self.dispatch_reason = dispatch_reason
        self.from_worker = from_worker

    @classmethod
    def from_worker_error(cls, error: pb.WorkerErrorResponse) -> "AttemptError":
        """Build the failure a Worker reported in its ``WorkerErrorResponse``."""
        return cls(
            error.error_type,
            error.detail,
            retry_after_seconds=error.retry_after_seconds,
            stack_trace=error.stack_trace,
            grpc_status=error.grpc_status or 2,
            from_worker=True,
        )

    def worker_error(self) -> pb.WorkerErrorResponse:
        """Return the failure as a ``WorkerErrorResponse`` (for ``ServiceErrorResponse``)."""
        return pb.WorkerErrorResponse(
            detail=self.detail,
            error_type=self.error_type,
            stack_trace=self.stack_trace,
            retry_after_seconds=self.retry_after_seconds,
            grpc_status=self.grpc_status,
        )


@dataclass(eq=False)
class _PullTask:
    task_id: str
    kind: str
    on_frame: FrameHandler | None
    future: "asyncio.Future[Any]"
    has_output: bool = False


@dataclass(frozen=True)
class _Rejected:
    reason: int


@dataclass(frozen=True)
class _Redeliver:
    """The stream closed before the task produced any output: dispatch it again."""


@dataclass(eq=False)
class _PullStream:
    queue: str
    app_worker_id: str
    flow_types: frozenset[str]
    outbox: "asyncio.Queue[pb.PollWorkerTaskResponse]" = field(default_factory=asyncio.Queue)
    current: _PullTask | None = None
    declined: bool = False
    alive: bool = True


class PullWorkers:
    """Serves ``WorkerTaskService.PollWorkerTask`` and dispatches tasks to its streams.

    A stream is idle when it has no task; a task goes to any idle stream whose Worker
    registered the task's Flow type. A stream that breaks fails its task at once
    (``dex.devserver.WorkerDisconnected``), so a SIGKILLed Worker's attempt is retried on
    whichever Worker is alive.
    """

    def __init__(self, *, redeliver_before_output: bool = True, redeliver_after_output: bool = False) -> None:
        self._redeliver_before_output = redeliver_before_output
        self._redeliver_after_output = redeliver_after_output  # DevServerConfig.redeliver_after_output
        self._streams: list[_PullStream] = []
        self._changed = asyncio.Event()
        self._task_ids = itertools.count(1)
        self._background: set[asyncio.Task[None]] = set()

    def registered_worker_ids(self, flow_type: str | None = None) -> set[str]:
        """Return the app Worker IDs with a live stream (for ``flow_type`` if given)."""
        return {
            stream.app_worker_id
            for stream in self._streams
            if stream.alive and (flow_type is None or flow_type in stream.flow_types)
        }

    def _notify(self) -> None:
        for stream in self._streams:
            stream.declined = False
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def serve(self, context: Any) -> None:
        """Run one ``PollWorkerTask`` stream until the Worker closes or loses it."""
        first = await context.read()
        if first is grpc.aio.EOF:
            return
        if first.WhichOneof("frame") != "register":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "first frame must register")
            return
        register = first.register
        stream = _PullStream(register.queue, register.app_worker_id, frozenset(register.flow_types))
        await context.write(
            pb.PollWorkerTaskResponse(registered=pb.PollWorkerTaskRegistered(supports_unknown_name_rejection=True))
        )
        self._streams.append(stream)
        self._notify()
        writer = asyncio.create_task(self._write_loop(stream, context))
        self._background.add(writer)
        writer.add_done_callback(self._background.discard)
        try:
            while True:
                request = await context.read()
                if request is grpc.aio.EOF:
                    return
                self._handle(stream, request)
        finally:
            stream.alive = False
            writer.cancel()
            with contextlib.suppress(ValueError):
                self._streams.remove(stream)
            task, stream.current = stream.current, None
            if task is not None and not task.future.done():
                if self._redelivers(task):
                    task.future.set_result(_Redeliver())
                else:
                    task.future.set_exception(
                        AttemptError(WORKER_DISCONNECTED, "the Worker's task stream broke mid-call")
                    )
            self._notify()

    def _redelivers(self, task: _PullTask) -> bool:
        """Whether a task whose stream broke is dispatched again at the same attempt."""
        if not task.has_output:
            return task.kind == "rpc" or self._redeliver_before_output
        return task.kind != "rpc" and self._redeliver_after_output

    @staticmethod
    async def _write_loop(stream: _PullStream, context: Any) -> None:
        with contextlib.suppress(Exception):
            while True:
                await context.write(await stream.outbox.get())

    def _handle(self, stream: _PullStream, request: pb.PollWorkerTaskRequest) -> None:
        kind = request.WhichOneof("frame")
        task = stream.current
        if kind == "reject":
            if task is not None and task.task_id == request.reject.task_id:
                stream.current = None
                stream.declined = True
                if not task.future.done():
                    task.future.set_result(_Rejected(request.reject.reason))
            return
        if kind != "task_frame" or task is None or task.task_id != request.task_frame.task_id:
            return
        frame = request.task_frame
        task.has_output = True
        task.has_output = True
        output = frame.WhichOneof("output")
        final: Any = None
        if output == "worker_error":
            final = AttemptError.from_worker_error(frame.worker_error)
        elif output == "rpc":
            final = frame.rpc
        elif output in ("wait_for", "execute"):
            step_output = frame.wait_for if output == "wait_for" else frame.execute
            if step_output.WhichOneof("output") == "result":
                final = step_output.result
            elif task.on_frame is not None and not task.future.done():
                task.on_frame(step_output)
        if final is None:
            return
        stream.current = None
        if not task.future.done():
            if isinstance(final, AttemptError):
                task.future.set_exception(final)
            else:
                task.future.set_result(final)
        self._notify()

    def _pick(self, flow_type: str, excluded: set[str]) -> _PullStream | None:
        # Newest first: a Worker retires its older idle streams, so a task sent to the
        # newest idle stream is least likely to cross the Worker's half-close.
        for stream in reversed(self._streams):
            if (
                stream.alive
                and stream.current is None
                and not stream.declined
                and flow_type in stream.flow_types
                and stream.app_worker_id not in excluded
            ):
                return stream
        return None

    async def call(
        self,
        flow_type: str,
        kind: str,
        request: Any,
        on_frame: FrameHandler | None,
        dispatch_wait: float,
    ) -> Any:
        """Dispatch one task and return its result message.

        Args:
            flow_type: The Flow type the task belongs to.
            kind: ``"wait_for"``, ``"execute"`` or ``"rpc"``.
            request: The Worker request message.
            on_frame: Receives progress frames of Step methods.
            dispatch_wait: Real seconds to wait for an idle Worker stream.

        Returns:
            The method's response message.

        Raises:
            AttemptError: The Worker failed the call, disconnected or never came.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + dispatch_wait
        excluded: set[str] = set()
        while True:
            stream = self._pick(flow_type, excluded)
            if stream is None:
                serving = self.registered_worker_ids(flow_type)
                if excluded and serving <= excluded:
                    raise AttemptError(
                        UNKNOWN_NAME,
                        f"no Worker registered the {kind} target of Flow type {flow_type}",
                        dispatch_reason=pb.DISPATCH_TASK_ERROR_REASON_UNKNOWN_NAME,
                    )
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise AttemptError(
                        NO_WORKER_AVAILABLE,
                        f"no pull Worker for Flow type {flow_type} took the task",
                        dispatch_reason=pb.DISPATCH_TASK_ERROR_REASON_NO_WORKER_AVAILABLE,
                    )
                changed = self._changed
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), remaining)
                continue
            task = _PullTask(f"task-{next(self._task_ids)}", kind, on_frame, loop.create_future())
            stream.current = task
            stream.outbox.put_nowait(
                pb.PollWorkerTaskResponse(task=pb.PollWorkerTask(task_id=task.task_id, **{kind: request}))
            )
            try:
                outcome = await task.future
            except asyncio.CancelledError:
                if stream.current is task:
                    stream.outbox.put_nowait(
                        pb.PollWorkerTaskResponse(cancel_task=pb.PollWorkerTaskCancelTask(task_id=task.task_id))
                    )
                raise
            if isinstance(outcome, _Redeliver):
                deadline = loop.time() + dispatch_wait
                continue
            if isinstance(outcome, _Rejected):
                if outcome.reason in (
                    pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_STEP,
                    pb.POLL_WORKER_TASK_REJECT_REASON_UNKNOWN_RPC,
                ):
                    excluded.add(stream.app_worker_id)
                continue
            return outcome


_CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class ListeningWorkers:
    """Calls listening Workers' ``WorkerService`` at their advertised addresses.

    An address that refuses connections is retried (the same attempt) until
    ``dispatch_wait`` passes, like a pull Worker that is not there yet; a call that breaks after the Worker
    sent output fails the attempt. A Step's ``result`` is its last output: the attempt ends as it arrives.
    """

    def __init__(self, *, redeliver_before_output: bool = True, redeliver_after_output: bool = False) -> None:
        self._redeliver_before_output = redeliver_before_output
        self._redeliver_after_output = redeliver_after_output  # DevServerConfig.redeliver_after_output
        self._channels: dict[str, Any] = {}
        self._methods: dict[tuple[str, str], Any] = {}
        """Multi-callables by (address, method path): made once per channel, not per call."""
        self._closing: set[Any] = set()  # calls whose result came, until their stream ends (collected: cancelled)

    def _method(self, channel: Any, address: str, path: str, request_type: Any, response_type: Any) -> Any:
        method = self._methods.get((address, path))
        if method is None:
            method = self._methods[address, path] = (
                channel.unary_unary(
                    path,
                    request_serializer=request_type.SerializeToString,
                    response_deserializer=response_type.FromString,
                )
                if path == _RPC_PATH
                else channel.unary_stream(
                    path,
                    request_serializer=request_type.SerializeToString,
                    response_deserializer=response_type.FromString,
                )
            )
        return method

    def _channel(self, address: str) -> Any:
        channel = self._channels.get(address)
        if channel is None:
            channel = grpc.aio.insecure_channel(address, options=_CHANNEL_OPTIONS)
            self._channels[address] = channel
        return channel

    async def _ready(self, address: str, deadline: float) -> Any:
        channel = self._channel(address)
        if channel.get_state() is grpc.ChannelConnectivity.READY:
            return channel  # connected: no task and timer per call to learn it
        remaining = deadline - asyncio.get_running_loop().time()
        try:
            await asyncio.wait_for(channel.channel_ready(), max(remaining, 0.0))
        except TimeoutError:
            raise AttemptError(
                NO_WORKER_AVAILABLE,
                f"no listening Worker answered at {address}",
                dispatch_reason=pb.DISPATCH_TASK_ERROR_REASON_NO_WORKER_AVAILABLE,
            ) from None
        return channel

    async def call_step(
        self, address: str, kind: str, request: Any, on_frame: FrameHandler | None, dispatch_wait: float
    ) -> Any:
        """Call ``InvokeWaitForMethod``/``InvokeExecuteMethod`` and return its result."""
        path, output_type = _STEP_PATHS[kind]
        deadline = asyncio.get_running_loop().time() + dispatch_wait
        while True:
            channel = await self._ready(address, deadline)
            call = self._method(channel, address, path, type(request), output_type)(request)
            result: Any = None
            has_output = False
            try:
                while (output := await call.read()) is not grpc.aio.EOF:
                    has_output = True
                    if output.WhichOneof("output") == "result":
                        result = output.result
                        break
                    if on_frame is not None:
                        on_frame(output)
            except grpc.aio.AioRpcError as error:
                if _unreachable(error) and not has_output and self._redeliver_before_output:
                    continue
                if _unreachable(error) and has_output and self._redeliver_after_output:
                    continue
                raise _listening_failure(error, has_output) from error
            finally:
                if result is None or call.done():
                    call.cancel()
                else:
                    self._closing.add(call)
                    call.add_done_callback(self._closing.discard)
            if result is None:
                raise AttemptError(PROTOCOL_ERROR, "the Worker ended the call without a result")
            return result

    async def call_rpc(self, address: str, request: pb.InvokeWorkerRPCRequest, dispatch_wait: float) -> Any:
        """Call ``InvokeWorkerRPC`` and return its response."""
        deadline = asyncio.get_running_loop().time() + dispatch_wait
        while True:
            channel = await self._ready(address, deadline)
            method = self._method(channel, address, _RPC_PATH, pb.InvokeWorkerRPCRequest, pb.InvokeWorkerRPCResponse)
            try:
                return await method(request)
            except grpc.aio.AioRpcError as error:
                if _unreachable(error):
                    continue
                raise _listening_failure(error, False) from error

    async def close(self) -> None:
        """Close every cached channel."""
        channels, self._channels = self._channels, {}
        self._methods.clear()
        for call in list(self._closing):
            call.cancel()
        for channel in channels.values():
            await channel.close(None)


def _unreachable(error: Any) -> bool:
    return bool(error.code() == grpc.StatusCode.UNAVAILABLE and worker_error_from_rpc_error(error) is None)


def _listening_failure(error: Any, has_output: bool) -> AttemptError:
    if (worker_error := worker_error_from_rpc_error(error)) is not None:
        return AttemptError.from_worker_error(worker_error)
    kind = WORKER_DISCONNECTED if has_output else WORKER_UNAVAILABLE
    return AttemptError(kind, f"{error.code().name}: {error.details()}", grpc_status=error.code().value[0])
