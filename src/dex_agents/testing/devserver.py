"""The dev server for tests, and its test knobs.

``dex_agents.devserver`` is the engine itself (`DevServer`, `DevServerConfig`,
`DevServerProcess`), re-exported here for tests. The knobs that only tests turn live
here: `TEST_RETRY_DELAY_SCALE` (real back-off shape, a hundredth of the time),
`ServerClock` (``DevServer.clock``: ``advance`` moves the server's time) and the
history readers `read_history_events` / `read_step_history`, which read a run's
history over the public wire API and so work on a real Dex server too.
"""

import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver import (
    EXECUTE_COMPLETED_EVENT,
    HEARTBEAT_TIMEOUT,
    METHOD_TIMEOUT,
    NO_WORKER_AVAILABLE,
    UNKNOWN_NAME,
    WORKER_DISCONNECTED,
    WORKER_UNAVAILABLE,
    AttemptRecord,
    DevServer,
    DevServerConfig,
    DevServerProcess,
    StepHistoryEntry,
    step_history,
)
from dex_agents.devserver._clock import ServerClock

TEST_RETRY_DELAY_SCALE = 0.01
"""The ``DevServerConfig.retry_delay_scale`` tests use: real back-off shape, a hundredth of its time."""

__all__ = [
    "EXECUTE_COMPLETED_EVENT",
    "HEARTBEAT_TIMEOUT",
    "METHOD_TIMEOUT",
    "NO_WORKER_AVAILABLE",
    "TEST_RETRY_DELAY_SCALE",
    "UNKNOWN_NAME",
    "WORKER_DISCONNECTED",
    "WORKER_UNAVAILABLE",
    "AttemptRecord",
    "DevServer",
    "DevServerConfig",
    "DevServerProcess",
    "ServerClock",
    "StepHistoryEntry",
    "read_history_events",
    "read_step_history",
    "step_history",
]


async def read_history_events(address: str, flow_id: str, run_id: str = "") -> list[pb.FlowHistoryEvent]:
    """Read a run's whole history with ``FlowService.GetHistoryEvents`` (any Dex server).

    Args:
        address: The FlowService ``host:port``.
        flow_id: The Flow ID.
        run_id: The run; ``""`` reads the latest run (on real Dex take it from
            ``AsyncClient.describe_flow``).

    Returns:
        Every event, oldest first.
    """
    events: list[pb.FlowHistoryEvent] = []
    async with grpc.aio.insecure_channel(address) as channel:
        if not run_id:
            summary = channel.unary_unary(
                "/dex.FlowService/GetFlowSummary",
                request_serializer=pb.GetFlowSummaryRequest.SerializeToString,
                response_deserializer=pb.GetFlowSummaryResponse.FromString,
            )
            response = await summary(pb.GetFlowSummaryRequest(flow_id=flow_id))
            run_id = response.flow_execution_id.run_id
        method = channel.unary_unary(
            "/dex.FlowService/GetHistoryEvents",
            request_serializer=pb.GetHistoryEventsRequest.SerializeToString,
            response_deserializer=pb.GetHistoryEventsResponse.FromString,
        )
        token = b""
        while True:
            page = await method(pb.GetHistoryEventsRequest(flow_id=flow_id, run_id=run_id, next_page_token=token))
            events.extend(page.events)
            if not page.next_page_token:
                return events
            token = page.next_page_token


async def read_step_history(address: str, flow_id: str, run_id: str = "") -> list[StepHistoryEntry]:
    """Read the Step method events of a run over gRPC (any Dex server).

    Args:
        address: The FlowService ``host:port``.
        flow_id: The Flow ID.
        run_id: The run; ``""`` reads the latest run.

    Returns:
        The Step method events, oldest first.
    """
    return step_history(await read_history_events(address, flow_id, run_id))
