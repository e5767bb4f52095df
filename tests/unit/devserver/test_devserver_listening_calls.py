"""The dev server's calls to listening Workers: an attempt ends when its result arrives, not its stream."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._workers import ListeningWorkers

EXECUTE = "/dex.WorkerService/InvokeExecuteMethod"


class SlowToCloseWorker:
    """A ``WorkerService`` whose execute stream sends a heartbeat and the result, then ends only when told."""

    def __init__(self) -> None:
        self.may_end = asyncio.Event()
        self.ended = asyncio.Event()
        self.cancelled = False

    async def execute(self, request: pb.InvokeExecuteMethodRequest, context: Any) -> AsyncIterator[Any]:
        yield pb.InvokeExecuteMethodOutput(heartbeat=pb.StepMethodHeartbeat())
        yield pb.InvokeExecuteMethodOutput(result=pb.InvokeExecuteMethodResponse(record_events=[pb.KV(key="done")]))
        try:
            await self.may_end.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.ended.set()

    def handler(self) -> Any:
        method = grpc.unary_stream_rpc_method_handler(
            self.execute,
            request_deserializer=pb.InvokeExecuteMethodRequest.FromString,
            response_serializer=pb.InvokeExecuteMethodOutput.SerializeToString,
        )
        return grpc.method_handlers_generic_handler("dex.WorkerService", {"InvokeExecuteMethod": method})


async def _serving(worker: SlowToCloseWorker) -> tuple[Any, str]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((worker.handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def test_a_step_call_returns_its_result_while_the_workers_stream_is_still_open() -> None:
    worker = SlowToCloseWorker()
    server, address = await _serving(worker)
    workers = ListeningWorkers()
    frames: list[Any] = []
    try:
        # The guard only stops a hang: a call that waited for the stream's end would never return here.
        result = await asyncio.wait_for(
            workers.call_step(address, "execute", pb.InvokeExecuteMethodRequest(), frames.append, 10.0), 30.0
        )
        assert [event.key for event in result.record_events] == ["done"]
        assert [frame.WhichOneof("output") for frame in frames] == ["heartbeat"]
        assert not worker.ended.is_set()
        worker.may_end.set()
        await asyncio.wait_for(worker.ended.wait(), 30.0)
        assert not worker.cancelled  # the call was kept until the Worker ended it
    finally:
        await workers.close()
        await server.stop(None)


async def test_closing_cancels_the_calls_whose_stream_is_still_open() -> None:
    worker = SlowToCloseWorker()
    server, address = await _serving(worker)
    workers = ListeningWorkers()
    try:
        await asyncio.wait_for(workers.call_step(address, "execute", pb.InvokeExecuteMethodRequest(), None, 10.0), 30.0)
        await workers.close()
        for _ in range(200):
            if worker.cancelled:
                break
            await asyncio.sleep(0.01)
        assert worker.cancelled
        assert not worker.ended.is_set()
    finally:
        await server.stop(None)
