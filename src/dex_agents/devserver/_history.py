"""Builders of a run's history events (``GetHistoryEvents``), as real Dex records them.

A history event gets the next event ID and the server clock's time; Step method
events carry their input, output and context (final attempt, start, duration
and the last failure).
"""

from dataclasses import dataclass
from typing import Any

from dex.dexpb import dex_pb2 as pb
from google.protobuf import duration_pb2, timestamp_pb2  # type: ignore[import-untyped]

from dex_agents.devserver._attempts import Completed, Failed, Method
from dex_agents.devserver._errors import invalid_argument, service_error_response
from dex_agents.devserver._state import Execution, Run
from dex_agents.devserver._workers import AttemptError


def timestamp(seconds: float) -> Any:
    """A protobuf Timestamp of Unix ``seconds``."""
    value = timestamp_pb2.Timestamp()
    value.FromNanoseconds(int(seconds * 1e9))
    return value


def duration(seconds: float) -> Any:
    """A protobuf Duration of ``seconds`` (never negative)."""
    value = duration_pb2.Duration()
    value.FromNanoseconds(int(max(seconds, 0.0) * 1e9))
    return value


def record(run: Run, now: float, **payload: Any) -> None:
    """Append one history event (``payload`` names its kind) at ``now``."""
    event = pb.FlowHistoryEvent(event_id=len(run.history) + 1, event_time=timestamp(now), **payload)
    run.history.append(event)
    run.journal.history(run, event)


def method_failure(error: AttemptError, attempt: int) -> pb.StepMethodFailure:
    """The failure of a method's last attempt, as history and results report it."""
    return pb.StepMethodFailure(
        backend_error=error.detail,
        attempt=attempt,
        details=service_error_response(
            error.detail,
            pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
            worker_error=error.worker_error(),
            dispatch_reason=error.dispatch_reason,
        ),
    )


def _event_context(
    execution: Execution, attempt: int, started_at: float, now: float, failure: AttemptError | None
) -> pb.StepMethodEventContext:
    context = pb.StepMethodEventContext(
        step_execution_id=execution.id,
        from_step_execution_id=execution.from_id,
        step_type=execution.step_type,
        final_attempt=attempt,
        started_time=timestamp(started_at),
        duration=duration(now - started_at),
    )
    if failure is not None:
        context.last_failure_info.CopyFrom(method_failure(failure, attempt))
    return context


def record_success(run: Run, execution: Execution, method: Method, outcome: Completed, now: float) -> None:
    """Record a Step method that returned (``step_wait_for_completed`` / ``step_execute_completed``)."""
    event_input = pb.StepMethodEventInput(step_input=execution.movement.step_input)
    context = _event_context(execution, outcome.attempt, outcome.started_at, now, None)
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
        record(
            run,
            now,
            step_wait_for_completed=pb.StepWaitForCompletedEvent(input=event_input, output=output, context=context),
        )
        return
    if execution.results is not None:
        event_input.condition_results.CopyFrom(execution.results)
    record(
        run,
        now,
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


def record_failure(run: Run, execution: Execution, method: Method, outcome: Failed, now: float) -> None:
    """Record a Step method whose attempts ran out (``step_wait_for_failed`` / ``step_execute_failed``)."""
    event_input = pb.StepMethodEventInput(step_input=execution.movement.step_input)
    context = _event_context(execution, outcome.attempt, outcome.started_at, now, outcome.error)
    output = pb.StepMethodFailedOutput(failure=method_failure(outcome.error, outcome.attempt))
    if method == "wait_for":
        record(
            run, now, step_wait_for_failed=pb.StepWaitForFailedEvent(input=event_input, output=output, context=context)
        )
    else:
        record(
            run, now, step_execute_failed=pb.StepExecuteFailedEvent(input=event_input, output=output, context=context)
        )


def flow_started(run: Run, request: pb.StartFlowRequest) -> pb.FlowStartedOrContinuedHistoryEvent:
    """The ``flow_started_or_continued`` event of a run ``request`` started."""
    return pb.FlowStartedOrContinuedHistoryEvent(
        flow_execution_id=pb.FlowExecutionID(flow_id=run.flow_id, run_id=run.run_id),
        flow_type=run.flow_type,
        initial_start=pb.FlowInitialStart(
            start_step_type=request.start_step_type,
            step_input=request.step_input,
            step_options=request.step_options,
            initial_attributes=[pb.KV(key=key, value=value) for key, value in run.attributes.items()],
        ),
    )


def rpc_completed(request: pb.InvokeRPCRequest, response: Any) -> pb.RpcExecutionCompletedEvent:
    """The ``rpc_execution_completed`` event of an RPC whose effects were committed."""
    return pb.RpcExecutionCompletedEvent(
        rpc_name=request.rpc_name,
        input=request.input,
        output=response.output,
        step_decision=response.step_decision,
        upsert_attributes=response.upsert_attributes,
        publish_to_channel=response.publish_to_channel,
        delete_from_channel=response.delete_from_channel,
    )


def flow_closed(run: Run) -> pb.FlowClosedHistoryEvent:
    """The ``flow_closed`` event of a run that just closed."""
    return pb.FlowClosedHistoryEvent(
        flow_status=run.status,  # type: ignore[arg-type]
        results=run.results,
        error_type=run.error_type,  # type: ignore[arg-type]
        error_message=run.error_message,
    )


def flow_summary(run: Run) -> pb.GetFlowSummaryResponse:
    """The run as ``GetFlowSummary`` describes it."""
    response = pb.GetFlowSummaryResponse(
        flow_execution_id=pb.FlowExecutionID(flow_id=run.flow_id, run_id=run.run_id),
        first_run_id=run.first_run_id,
        request_id=run.request_id,
        flow_type=run.flow_type,
        flow_status=run.status,  # type: ignore[arg-type]
        start_time=timestamp(run.started_at),
    )
    if run.closed_at is not None:
        response.close_time.CopyFrom(timestamp(run.closed_at))
    return response


def history_page(run: Run, request: pb.GetHistoryEventsRequest, default_page_size: int) -> pb.GetHistoryEventsResponse:
    """One page of the run's history; the page token is the index of the page's first event."""
    token = request.next_page_token.decode() if request.next_page_token else ""
    if token and not token.isdigit():
        raise invalid_argument("malformed history page token")
    start = int(token) if token else max(request.start_internal_event_id - 1, 0)
    size = request.estimate_page_size or default_page_size
    events = run.history[start : start + size]
    end = start + len(events)
    return pb.GetHistoryEventsResponse(
        events=events,
        next_page_token=str(end).encode() if end < len(run.history) else b"",
        next_internal_event_id=end + 1,
    )


EXECUTE_COMPLETED_EVENT = "step_execute_completed"
"""The ``FlowHistoryEvent.payload`` oneof name of a completed ``execute``."""

_STEP_EVENTS = (
    "step_wait_for_completed",
    "step_wait_for_failed",
    "step_execute_completed",
    "step_execute_failed",
)


@dataclass(frozen=True)
class StepHistoryEntry:
    """One Step method event of a Flow's history.

    Attributes:
        event_type: The payload oneof name, e.g. ``"step_execute_completed"``.
        step_type: The Step type.
        step_execution_id: ``<StepType>-<n>``.
        final_attempt: The attempt that completed (or finally failed) the method.
    """

    event_type: str
    step_type: str
    step_execution_id: str
    final_attempt: int


def step_history(events: list[pb.FlowHistoryEvent]) -> list[StepHistoryEntry]:
    """Extract the Step method events from raw history events, in order."""
    entries: list[StepHistoryEntry] = []
    for event in events:
        kind = event.WhichOneof("payload")
        if kind in _STEP_EVENTS:
            context = getattr(event, kind).context
            entries.append(StepHistoryEntry(kind, context.step_type, context.step_execution_id, context.final_attempt))
    return entries
