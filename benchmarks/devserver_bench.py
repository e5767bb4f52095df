"""Step round trips per second on the dev server over loopback gRPC (not a timed test).

Run: ``python -m benchmarks.devserver_bench [--steps 300] [--flows 100] [--steps-per-flow 20] [--in-memory]``.

A trivial Flow runs one Step execution after another (``go_to`` itself until its
counter reaches 0), so every Step is one full round trip: the server dispatches
``execute`` to a pull Worker, the Worker runs the handler and returns the decision,
and the server commits it and schedules the next execution. Server, Worker and
Client share one process and one event loop here, so the CPU per Step printed (the process's, over each phase) is
the server's, the Worker's and the Client's together: compare it between two server
versions. The server keeps its data in a temporary data dir (each Step completion one SQLite commit, fsynced; concurrent
Flows share commits) unless ``--in-memory``; the commit count and the time the
writer spent in commits are printed.
"""

import argparse
import asyncio
import importlib.metadata
import platform
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import dex
from dex import AsyncContext, StepDecision, StepList

from dex_agents.testing.devserver import DevServer


class Count(dex.Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        if input <= 1:
            return dex.graceful_complete(context.step_execution_id)
        return dex.go_to(Count, input - 1)


class CountFlow(dex.Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Count())


async def _run(steps: int, flows: int, steps_per_flow: int, *, in_memory: bool) -> None:
    flow = CountFlow()
    registry = dex.Registry([flow], allow_async_handlers=True)
    with tempfile.TemporaryDirectory() as directory:
        worker_cache = dex.open_blob_cache(dex.BlobCacheConfig(str(Path(directory) / "w"), 8 << 20))
        client_cache = dex.open_blob_cache(dex.BlobCacheConfig(str(Path(directory) / "c"), 8 << 20))
        data_dir = None if in_memory else Path(directory) / "data"
        async with DevServer(data_dir=data_dir) as server:
            options = dex.WorkerOptions(
                server_address=server.address,
                pull=dex.PullWorkerOptions(max_concurrent_tasks=64, stop_drain_timeout=timedelta(seconds=1)),
            )
            worker = dex.AsyncWorker(registry, worker_cache, options)
            serving = asyncio.create_task(worker.start())
            await worker.wait_pull_registered(timeout=30)
            client_options = dex.ClientOptions(server_address=server.address)
            async with dex.AsyncClient(registry, client_cache, client_options) as client:
                await client.start_flow(flow, "warm-up", 5)
                await client.wait_for_flow("warm-up")

                started, cpu = time.perf_counter(), time.process_time()
                await client.start_flow(flow, "trivial", steps)
                result = await client.wait_for_flow("trivial")
                single, single_cpu = time.perf_counter() - started, time.process_time() - cpu
                assert result.single_output(str) == f"Count-{steps}"

                started, cpu = time.perf_counter(), time.process_time()
                ids = [f"concurrent-{i}" for i in range(flows)]
                await asyncio.gather(*(client.start_flow(flow, flow_id, steps_per_flow) for flow_id in ids))
                await asyncio.gather(*(client.wait_for_flow(flow_id) for flow_id in ids))
                concurrent, concurrent_cpu = time.perf_counter() - started, time.process_time() - cpu
            stats = server.commit_stats()
            data_bytes = server.data_bytes()
            await worker.stop()
            await serving
        worker_cache.close()
        client_cache.close()
    total = flows * steps_per_flow
    print(f"Python {platform.python_version()} ({platform.python_implementation()}, {sys.platform})")
    print(f"dex-python-sdk {importlib.metadata.version('dex-python-sdk')}, grpcio {grpc_version()}")
    print(
        f"trivial Flow:        {steps} Steps in {single:.3f} s = {steps / single:,.0f} Step round trips/s, "
        f"{single_cpu / steps * 1000:.3f} ms CPU per Step"
    )
    print(
        f"{flows} concurrent Flows: {total} Steps ({steps_per_flow} each) in {concurrent:.3f} s"
        f" = {total / concurrent:,.0f} Step round trips/s, {concurrent_cpu / total * 1000:.3f} ms CPU per Step"
    )
    if in_memory:
        print("engine in memory: nothing committed")
        return
    per_commit = stats.seconds / stats.commits * 1000 if stats.commits else 0.0
    steps_run = steps + total + 5
    print(
        f"commits: {stats.commits} for {steps_run} Steps ({stats.rows} rows), {per_commit:.2f} ms each "
        f"(writer thread, fsync included); data dir {data_bytes / 1024:,.0f} KiB"
    )


def grpc_version() -> str:
    return importlib.metadata.version("grpcio")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.devserver_bench", description=__doc__)
    parser.add_argument("--steps", type=int, default=300, help="Steps of the single trivial Flow")
    parser.add_argument("--flows", type=int, default=100, help="concurrent Flows")
    parser.add_argument("--steps-per-flow", type=int, default=20, help="Steps of each concurrent Flow")
    parser.add_argument("--in-memory", action="store_true", help="the dev server keeps nothing (no commits)")
    args = parser.parse_args(argv)
    asyncio.run(_run(args.steps, args.flows, args.steps_per_flow, in_memory=args.in_memory))


if __name__ == "__main__":
    main()
