"""Profile the Worker's per-task work in-process, without gRPC: capture one turn, replay it many times.

Run ``python -m benchmarks.binding_profile [--messages 20] [--repeat 2000] [--profile out.txt]``.
Not part of ``python -m benchmarks``: it is the tool behind ``docs/performance.md``.

1. The dev server and an in-process pull Worker run one seeded session of the binding
   benchmark's agent (``benchmarks._binding_agent``) to ``--messages`` stored messages;
   every task of one more tool turn is captured as the Worker received it (the
   ``send_user_message`` RPC, ``AwaitUserMessage``, ``RunModel``, ``CallTool``,
   ``ResumeTurn``, ``RunModel``, the next ``AwaitUserMessage.wait_for``).
2. Everything stops; the captured tasks are replayed ``--repeat`` times through a
   fresh ``AsyncWorkerDispatcher`` of the SDK, the same object a Worker hands its
   tasks to, so the numbers are the dispatcher's work (value hydration, context,
   our Step, the runner, the result's protobuf) with no gRPC and no pull-stream
   churn. CPU per task is ``time.thread_time`` over each replay.
3. With ``--profile FILE`` the replay runs under pyinstrument (install it yourself; it
   is not a project dependency) or, with ``--cprofile``, under the stdlib's cProfile.

The Worker-process numbers of ``benchmarks.binding_bench`` minus these are what the
SDK's pull streams and gRPC add per task.
"""

import argparse
import asyncio
import cProfile
import importlib
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import dex
from dex import _pull_worker
from dex._async_value_hydrator import AsyncValueHydrator
from dex._async_worker_dispatcher import AsyncWorkerDispatcher
from dex._server_protocol import NegotiatedServerProtocol
from dex._value_mapper import ValueMapper
from dex.dexpb import dex_pb2 as pb

from benchmarks._binding_agent import build_flow
from dex_agents import AgentSessionClient, codec_registry
from dex_agents.testing import DevServer

Task = pb.PollWorkerTask


def _label(task: Task) -> str:
    kind = task.WhichOneof("request") or ""
    if kind == "rpc":
        return f"rpc {task.rpc.rpc_name}"
    request = task.wait_for if kind == "wait_for" else task.execute
    return f"{kind} {request.step_type}"


async def capture_turn(messages: int, workdir: Path) -> tuple[dex.Registry, list[Task]]:
    """Return the Registry and every task of one tool turn at ``messages`` stored messages."""
    flow = build_flow()
    registry = dex.Registry([flow], codec_registry(), allow_async_handlers=True)
    captured: list[Task] = []
    original = _pull_worker.PullStream._execute  # noqa: SLF001 - tasks are captured where the SDK handles them

    async def capture(self: _pull_worker.PullStream, task: Task) -> None:
        copy = Task()
        copy.CopyFrom(task)
        captured.append(copy)
        await original(self, task)

    _pull_worker.PullStream._execute = capture  # type: ignore[method-assign]  # noqa: SLF001
    try:
        async with DevServer() as server:
            cache = dex.open_blob_cache(dex.BlobCacheConfig(str(workdir / "cache"), 8 * 1024 * 1024))
            options = dex.WorkerOptions(
                server_address=server.address,
                pull=dex.PullWorkerOptions(max_concurrent_tasks=4, stop_drain_timeout=timedelta(seconds=1)),
            )
            worker = dex.AsyncWorker(registry, cache, options)
            serving = asyncio.create_task(worker.start())
            await worker.wait_pull_registered(timeout=10)
            try:
                async with dex.AsyncClient(registry, cache, dex.ClientOptions(server_address=server.address)) as client:
                    sessions = AgentSessionClient(client, flow)
                    await sessions.start_session("s", f"seed {messages - 1}")
                    await _settle(captured, lambda: _idle(captured, 1))
                    mark = len(captured)
                    await sessions.send_user_message("s", "tool")
                    await _settle(captured, lambda: _idle(captured, 2))
            finally:
                await worker.stop()
                await serving
                cache.close()
    finally:
        _pull_worker.PullStream._execute = original  # type: ignore[method-assign]  # noqa: SLF001
    return registry, captured[mark:]


def _idle(captured: list[Task], waits: int) -> bool:
    return sum(_label(t) == "wait_for AwaitUserMessage" for t in captured) >= waits


async def _settle(captured: list[Task], done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the turn did not finish; captured {[_label(t) for t in captured]}")
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)


def dispatcher_for(registry: dex.Registry, cache: dex.BlobCache) -> AsyncWorkerDispatcher:
    protocol = NegotiatedServerProtocol()
    protocol.record_version(3)
    hydrator = AsyncValueHydrator(None, cache)  # type: ignore[arg-type]  # no blobs: never called
    return AsyncWorkerDispatcher(registry, ValueMapper(registry.codec_registry), hydrator, protocol)


def replayer(dispatcher: AsyncWorkerDispatcher, task: Task) -> Callable[[], Awaitable[None]]:
    kind = task.WhichOneof("request")

    async def drain(outputs: AsyncIterator[Any]) -> None:
        async for _ in outputs:
            pass

    if kind == "execute":
        return lambda: drain(dispatcher.invoke_execute(task.execute))
    if kind == "wait_for":
        return lambda: drain(dispatcher.invoke_wait_for(task.wait_for))

    async def rpc() -> None:
        await dispatcher.invoke_rpc(task.rpc)

    return rpc


async def replay(dispatcher: AsyncWorkerDispatcher, tasks: list[Task], repeat: int) -> dict[str, list[float]]:
    labels = [_label(task) for task in tasks]
    labels = [
        f"{label} #{labels[:i].count(label) + 1}" if labels.count(label) > 1 else label
        for i, label in enumerate(labels)
    ]
    calls = [(label, replayer(dispatcher, task)) for label, task in zip(labels, tasks, strict=True)]
    times: dict[str, list[float]] = {label: [] for label, _ in calls}
    for _ in range(repeat):
        for label, call in calls:
            began = time.thread_time()
            await call()
            times[label].append(time.thread_time() - began)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1000)
    parser.add_argument("--profile", help="write a profile of the replay to this file")
    parser.add_argument("--cprofile", action="store_true", help="profile with cProfile instead of pyinstrument")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="binding-profile-", ignore_cleanup_errors=True) as workdir:
        profile(args, Path(workdir))


def profile(args: argparse.Namespace, workdir: Path) -> None:
    registry, tasks = asyncio.run(capture_turn(args.messages, workdir))
    cache = dex.open_blob_cache(dex.BlobCacheConfig(str(workdir / "replay-cache"), 8 * 1024 * 1024))
    try:
        dispatcher = dispatcher_for(registry, cache)
        asyncio.run(replay(dispatcher, tasks, 20))  # warm-up
        profiler: Any = None
        if args.profile and args.cprofile:
            profiler = cProfile.Profile()
            profiler.enable()
        elif args.profile:
            profiler = importlib.import_module("pyinstrument").Profiler(async_mode="disabled", interval=0.0002)
            profiler.start()
        times = asyncio.run(replay(dispatcher, tasks, args.repeat))
    finally:
        cache.close()
    if profiler is not None:
        if args.cprofile:
            profiler.disable()
            with Path(args.profile).open("w") as out:
                pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(60)
        else:
            profiler.stop()
            Path(args.profile).write_text(profiler.output_text(unicode=True, color=False))
            profiler.last_session.save(str(Path(args.profile).with_suffix(".pyisession")))

    python = sys.version.split()[0]
    print(f"## Dispatcher replay at {args.messages} stored messages ({args.repeat} repeats, Python {python})")
    total = 0.0
    for label, values in times.items():
        median = statistics.median(values)
        total += median
        print(f"{label:32} {median * 1e6:8.0f} us")
    print(f"{'one tool turn, all tasks':32} {total * 1e6:8.0f} us")
    if args.profile:
        print(f"profile: {args.profile}")


if __name__ == "__main__":
    main()
