"""The gRPC surface: FlowService, WorkerTaskService and a small JSON control service."""

import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb
from google.protobuf import empty_pb2  # type: ignore[import-untyped]

from dex_agents.devserver._engine import Engine
from dex_agents.devserver._errors import ServiceError
from dex_agents.devserver._store import StoreWriteError

SERVER_VERSION = "dex-agents-devserver-1.23.0"
CONTROL_SERVICE = "dex_agents.DevServerControl"


def _unary(function: Callable[[Any], Awaitable[Any]], request_type: Any, response_type: Any) -> Any:
    async def handler(request: Any, context: Any) -> Any:
        try:
            return await function(request)
        except ServiceError as error:
            await context.abort_with_status(error.to_status())
        except StoreWriteError as error:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(error))

    return grpc.unary_unary_rpc_method_handler(
        handler,
        request_deserializer=request_type.FromString,
        response_serializer=response_type.SerializeToString,
    )


def _sync(function: Callable[[Any], Any]) -> Callable[[Any], Awaitable[Any]]:
    async def call(request: Any) -> Any:
        return function(request)

    return call


def _durable(engine: Engine, function: Callable[[Any], Any]) -> Callable[[Any], Awaitable[Any]]:
    """A Client's write, answered once it (and everything before it) is on disk."""

    async def call(request: Any) -> Any:
        response = function(request)
        await engine.journal.durable()
        return response

    return call


def _run_read(engine: Engine, function: Callable[[Any], Any]) -> Callable[[Any], Awaitable[Any]]:
    """A read about one run, answered once that run's changes are on disk (at once when they are; no sync)."""

    async def call(request: Any) -> Any:
        response = function(request)
        await engine.journal.durable(engine.run(request.flow_id, request.run_id).journal_seq, sync=False)
        return response

    return call


def flow_service_handler(engine: Engine) -> Any:
    """Return the generic handler serving ``dex.FlowService`` from ``engine``."""

    async def server_info(request: Any) -> pb.ServerInfo:
        return pb.ServerInfo(
            server_version=SERVER_VERSION,
            minimum_supported_protocol_version=1,
            current_protocol_version=3,
            server_engine=pb.SERVER_ENGINE_ZD,
        )

    async def sync_indexes(request: Any) -> pb.SyncAttributeIndexResponse:
        return pb.SyncAttributeIndexResponse()

    async def health(request: Any) -> pb.HealthInfo:
        return pb.HealthInfo(condition="SERVING", hostname=socket.gethostname())

    def start(request: pb.StartFlowRequest) -> pb.StartFlowResponse:
        return pb.StartFlowResponse(run_id=engine.start_flow(request))

    def stop(request: pb.StopFlowRequest) -> Any:
        engine.stop_flow(request)
        return empty_pb2.Empty()

    async def write(request: pb.WriteStreamRequest) -> Any:
        await engine.stream_requests.write(request)
        return empty_pb2.Empty()

    def skip(request: pb.SkipTimerRequest) -> Any:
        engine.skip_timer(request)
        return empty_pb2.Empty()

    handlers = {
        "GetServerInfo": _unary(server_info, empty_pb2.Empty, pb.ServerInfo),
        "SyncAttributeIndexes": _unary(sync_indexes, pb.SyncAttributeIndexRequest, pb.SyncAttributeIndexResponse),
        "HealthCheck": _unary(health, empty_pb2.Empty, pb.HealthInfo),
        "StartFlow": _unary(_durable(engine, start), pb.StartFlowRequest, pb.StartFlowResponse),
        "StopFlow": _unary(_durable(engine, stop), pb.StopFlowRequest, empty_pb2.Empty),
        "InvokeRPC": _unary(engine.invoke_rpc, pb.InvokeRPCRequest, pb.InvokeRPCResponse),
        "WaitForFlow": _unary(engine.wait_for_flow, pb.WaitForFlowRequest, pb.FlowResult),
        "WaitForAttribute": _unary(
            lambda r: engine.attribute_waits.wait(r), pb.WaitForAttributeRequest, pb.WaitForAttributeResponse
        ),
        "GetFlowSummary": _unary(
            _run_read(engine, engine.summary), pb.GetFlowSummaryRequest, pb.GetFlowSummaryResponse
        ),
        "GetHistoryEvents": _unary(
            _run_read(engine, engine.history), pb.GetHistoryEventsRequest, pb.GetHistoryEventsResponse
        ),
        "SkipTimer": _unary(_durable(engine, skip), pb.SkipTimerRequest, empty_pb2.Empty),
        "WriteStream": _unary(write, pb.WriteStreamRequest, empty_pb2.Empty),
        "ReadStream": _unary(lambda r: engine.stream_requests.read(r), pb.ReadStreamRequest, pb.ReadStreamResponse),
        "ListStreamMessages": _unary(
            lambda r: engine.stream_requests.list(r),
            pb.ListStreamMessagesRequest,
            pb.ListStreamMessagesResponse,
        ),
        "LoadBlobs": _unary(_sync(lambda r: engine.blobs.load(r)), pb.LoadBlobsRequest, pb.LoadBlobsResponse),
    }
    return grpc.method_handlers_generic_handler("dex.FlowService", handlers)


def worker_task_handler(engine: Engine) -> Any:
    """Return the generic handler serving ``dex.WorkerTaskService`` (pull Workers)."""

    async def poll(request_iterator: Any, context: Any) -> None:
        await engine.pull.serve(context)

    return grpc.method_handlers_generic_handler(
        "dex.WorkerTaskService",
        {
            "PollWorkerTask": grpc.stream_stream_rpc_method_handler(
                poll,
                request_deserializer=pb.PollWorkerTaskRequest.FromString,
                response_serializer=pb.PollWorkerTaskResponse.SerializeToString,
            )
        },
    )


def control_handler(engine: Engine) -> Any:
    """Return the JSON control service (``AdvanceClock``, ``Now``) for child processes."""

    async def advance(payload: bytes, context: Any) -> bytes:
        seconds = float(json.loads(payload or b"{}").get("seconds", 0))
        engine.advance_clock(seconds)
        await engine.journal.durable()
        return json.dumps({"now": engine.clock.now()}).encode()

    async def now(payload: bytes, context: Any) -> bytes:
        return json.dumps({"now": engine.clock.now()}).encode()

    return grpc.method_handlers_generic_handler(
        CONTROL_SERVICE,
        {
            "AdvanceClock": grpc.unary_unary_rpc_method_handler(advance),
            "Now": grpc.unary_unary_rpc_method_handler(now),
        },
    )
