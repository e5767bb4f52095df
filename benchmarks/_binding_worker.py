"""The Worker child of the binding benchmark: serves the bench agent and times every task it runs.

Pull mode (the default, what `AgentContainer` builds): every task the pull Worker
receives (a Step's ``wait_for`` or ``execute``, or an RPC) is timed around the SDK's
task handler (``dex._pull_worker.PullStream._execute``, private to the SDK 1.23.0):
from the decoded task to its last frame queued on the pull stream. That span holds
the SDK's value hydration, the ``InvocationContext``, our Step or RPC, the runner, the
result's mapping to protobuf and the frame sends; it leaves out only gRPC's receive
and the protobuf parse of the task.

Listening mode (``$BINDING_BENCH_LISTEN=host:port``): the Worker serves Dex's calls
on that address, and the same span is taken around the SDK's dispatcher
(``AsyncWorkerDispatcher.invoke_*``).

One JSON line per task goes to ``$BINDING_BENCH_RECORDS``:

- ``cpu``: CPU time of the Worker's event-loop thread over the span (``time.thread_time``),
  ``t0``/``t1`` that thread's CPU clock at the span's start and end;
- ``wall``: elapsed time of the span;
- ``p0``/``p1``: the Worker process's CPU time (all threads, ``time.process_time``) at
  the span's start and end, so the driver can charge a whole turn's process CPU;
- ``bytes``: the size of the task's request as received.

``$BINDING_BENCH_FLOW`` names another module whose ``build_flow()`` the Worker serves
(default: `benchmarks._binding_agent`; the long-session shapes use `benchmarks._long_agent`).

With ``$BINDING_BENCH_PROFILE`` set, the whole Worker runs under pyinstrument (not a
project dependency: install it into the venv yourself) and writes its text report
there, and the session beside it (``.pyisession``).
"""

import asyncio
import importlib
import json
import os
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TextIO

import dex
from dex import _pull_worker
from dex._async_worker_dispatcher import AsyncWorkerDispatcher
from dex.dexpb import dex_pb2 as pb

from dex_agents import AgentSessionFlow, codec_registry
from dex_agents.testing import run_agent_worker
from dex_agents.testing.stack import READY_FILE_ENV, SERVER_ADDRESS_ENV

RECORDS_ENV = "BINDING_BENCH_RECORDS"
PROFILE_ENV = "BINDING_BENCH_PROFILE"
LISTEN_ENV = "BINDING_BENCH_LISTEN"
FLOW_ENV = "BINDING_BENCH_FLOW"
DEFAULT_FLOW_MODULE = "benchmarks._binding_agent"


def build_flow() -> AgentSessionFlow:
    """Return the Flow of ``$BINDING_BENCH_FLOW``'s module (the binding bench agent's by default)."""
    module = importlib.import_module(os.environ.get(FLOW_ENV) or DEFAULT_FLOW_MODULE)
    return module.build_flow()  # type: ignore[no-any-return]


Request = pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | pb.InvokeWorkerRPCRequest


class _Timer:
    def __init__(self, out: TextIO) -> None:
        self._out = out

    def start(self) -> tuple[float, float, float]:
        return time.process_time(), time.thread_time(), time.perf_counter()

    def stop(self, began: tuple[float, float, float], kind: str, request: Request) -> None:
        p0, t0, w0 = began
        wall = time.perf_counter() - w0
        t1 = time.thread_time()
        p1 = time.process_time()
        name = request.rpc_name if isinstance(request, pb.InvokeWorkerRPCRequest) else request.step_type
        record = {"kind": kind, "name": name, "flow": request.context.flow_id, "wall": wall}
        record |= {"cpu": t1 - t0, "t0": t0, "t1": t1, "p0": p0, "p1": p1, "bytes": request.ByteSize()}
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()


def instrument_pull(timer: _Timer) -> None:
    """Time every task of every pull stream of this process."""
    original = _pull_worker.PullStream._execute  # noqa: SLF001 - the SDK's task handler is what is timed

    async def timed(self: _pull_worker.PullStream, task: pb.PollWorkerTask) -> None:
        began = timer.start()
        try:
            await original(self, task)
        finally:
            kind = task.WhichOneof("request") or ""
            timer.stop(began, kind, getattr(task, kind))

    _pull_worker.PullStream._execute = timed  # type: ignore[method-assign]  # noqa: SLF001


def instrument_dispatcher(timer: _Timer) -> None:
    """Time every call of the SDK's dispatcher (listening mode)."""
    cls: Any = AsyncWorkerDispatcher

    def stream(kind: str, original: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
        async def timed(self: AsyncWorkerDispatcher, request: Request, *args: Any) -> AsyncIterator[Any]:
            began = timer.start()
            try:
                async for output in original(self, request, *args):
                    yield output
            finally:
                timer.stop(began, kind, request)

        return timed

    original_rpc = cls.invoke_rpc

    async def timed_rpc(self: AsyncWorkerDispatcher, request: pb.InvokeWorkerRPCRequest, *args: Any) -> Any:
        began = timer.start()
        try:
            return await original_rpc(self, request, *args)
        finally:
            timer.stop(began, "rpc", request)

    cls.invoke_wait_for = stream("wait_for", cls.invoke_wait_for)
    cls.invoke_execute = stream("execute", cls.invoke_execute)
    cls.invoke_rpc = timed_rpc


async def serve_listening(bind_address: str) -> None:
    """Serve the bench agent in listening mode until SIGTERM."""
    registry = dex.Registry([build_flow()], codec_registry(), allow_async_handlers=True)
    cache_dir = tempfile.TemporaryDirectory(prefix="bench-worker-", ignore_cleanup_errors=True)
    cache = dex.open_blob_cache(dex.BlobCacheConfig(cache_dir.name, 64 * 1024 * 1024))
    options = dex.WorkerOptions(server_address=os.environ[SERVER_ADDRESS_ENV], bind_address=bind_address)
    worker = dex.AsyncWorker(registry, cache, options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    serving = asyncio.create_task(worker.start())
    try:
        while not worker._bound_port and not serving.done():  # noqa: ASYNC110, SLF001 - the SDK signals no bind
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        Path(os.environ[READY_FILE_ENV]).touch()
        await stop.wait()
    finally:
        await worker.stop()
        await serving
        cache.close()
        cache_dir.cleanup()


def serve() -> None:
    listen = os.environ.get(LISTEN_ENV)
    if listen:
        asyncio.run(serve_listening(listen))
    else:
        run_agent_worker([build_flow()])


def main() -> None:
    records = Path(os.environ[RECORDS_ENV])
    profile_path = os.environ.get(PROFILE_ENV)
    with records.open("a", encoding="utf-8") as out:
        timer = _Timer(out)
        if os.environ.get(LISTEN_ENV):
            instrument_dispatcher(timer)
        else:
            instrument_pull(timer)
        if not profile_path:
            serve()
            return
        profiler: Any = importlib.import_module("pyinstrument").Profiler(async_mode="disabled", interval=0.001)
        profiler.start()
        try:
            serve()
        finally:
            profiler.stop()
            Path(profile_path).write_text(profiler.output_text(unicode=True, color=False, show_all=False))
            profiler.last_session.save(str(Path(profile_path).with_suffix(".pyisession")))


if __name__ == "__main__":
    main()
