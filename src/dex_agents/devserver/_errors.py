"""gRPC statuses with the packed ``ServiceErrorResponse`` the SDK turns into typed errors."""

from typing import Any

import grpc  # type: ignore[import-untyped]
from dex.dexpb import dex_pb2 as pb
from google.protobuf import any_pb2  # type: ignore[import-untyped]
from google.rpc import status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status  # type: ignore[import-untyped]


class ServiceError(Exception):
    """A FlowService failure: gRPC code, Dex sub-status and the Worker's error, if any."""

    def __init__(
        self,
        code: Any,
        sub_status: int,
        detail: str,
        *,
        worker_error: pb.WorkerErrorResponse | None = None,
        dispatch_reason: int = 0,
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.sub_status = sub_status
        self.detail = detail
        self.worker_error = worker_error
        self.dispatch_reason = dispatch_reason

    def to_status(self) -> Any:
        """Return the ``grpc.Status`` carrying the packed ``ServiceErrorResponse``."""
        response = service_error_response(
            self.detail, self.sub_status, worker_error=self.worker_error, dispatch_reason=self.dispatch_reason
        )
        packed = any_pb2.Any()
        packed.Pack(response)
        return rpc_status.to_status(status_pb2.Status(code=self.code.value[0], message=self.detail, details=[packed]))


def service_error_response(
    detail: str, sub_status: int, *, worker_error: pb.WorkerErrorResponse | None = None, dispatch_reason: int = 0
) -> pb.ServiceErrorResponse:
    """The ``ServiceErrorResponse`` of a failure, with the Worker's own error when there is one."""
    response = pb.ServiceErrorResponse(
        detail=detail,
        sub_status=sub_status,  # type: ignore[arg-type]
        dispatch_task_error_reason=dispatch_reason,  # type: ignore[arg-type]
    )
    if worker_error is not None:
        response.original_worker_error_detail = worker_error.detail
        response.original_worker_error_type = worker_error.error_type
        response.original_worker_error_status = worker_error.grpc_status
        response.original_worker_error_stack_trace = worker_error.stack_trace
    return response


def flow_not_found(flow_id: str) -> ServiceError:
    """Unknown Flow (``FlowNotFoundError`` / ``FlowNotActiveOrNotFoundError`` in the SDK)."""
    return ServiceError(grpc.StatusCode.NOT_FOUND, pb.ERROR_SUB_STATUS_FLOW_NOT_EXISTS, f"flow {flow_id} not found")


def flow_not_active(flow_id: str) -> ServiceError:
    """A closed Flow where an active one is needed (``FlowNotActiveOrNotFoundError``)."""
    return ServiceError(
        grpc.StatusCode.NOT_FOUND,
        pb.ERROR_SUB_STATUS_FLOW_NOT_EXISTS,
        f"flow {flow_id} is not active",
    )


def flow_closing(flow_id: str) -> ServiceError:
    """A request for a Flow that is closing after a CANCEL or FAIL stop (``FlowClosingError``)."""
    return ServiceError(
        grpc.StatusCode.FAILED_PRECONDITION,
        pb.ERROR_SUB_STATUS_FLOW_CLOSING,
        f"flow {flow_id} is closing",
    )


def already_started(flow_id: str) -> ServiceError:
    """Duplicate Flow ID (``FlowAlreadyStartedError``)."""
    return ServiceError(
        grpc.StatusCode.ALREADY_EXISTS,
        pb.ERROR_SUB_STATUS_FLOW_ALREADY_STARTED,
        f"flow {flow_id} already started",
    )


def lock_conflict(keys: list[str]) -> ServiceError:
    """A held Attribute lock (``RpcLockConflictError``)."""
    return ServiceError(
        grpc.StatusCode.ABORTED,
        pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
        f"one or more attribute keys are locked: {', '.join(keys)}",
    )


def long_poll_timeout(what: str) -> ServiceError:
    """A long poll that ended without a result (``LongPollTimeoutError``)."""
    return ServiceError(
        grpc.StatusCode.DEADLINE_EXCEEDED,
        pb.ERROR_SUB_STATUS_LONG_POLL_TIME_OUT,
        f"long poll timed out: {what}",
    )


RESERVED_ID_CHARACTERS = ("/", "$", ":")
"""What a Flow ID or Step type in ``StartFlow`` may not contain.

Real Dex, ``server/service/identifiers.go`` (``flowIDReservedCharacters``):
``/`` separates blob path segments, ``$`` the date prefix from the Flow ID in
blob keys, and ``:`` marks the server's own Flow namespaces (``SubFlow:``).
"""


def reserved_character_refusal(name: str, value: str) -> str | None:
    """Real Dex's message for ``value`` with a reserved character (``ValidateFlowID``), or ``None``.

    ``name`` is ``"flow ID"`` or ``"step type"``; the message is Go's
    ``fmt.Errorf("%s contains reserved character %q", ...)``.
    """
    for character in RESERVED_ID_CHARACTERS:
        if character in value:
            return f'{name} contains reserved character "{character}"'
    return None


def invalid_argument(detail: str) -> ServiceError:
    """A malformed request."""
    return ServiceError(grpc.StatusCode.INVALID_ARGUMENT, pb.ERROR_SUB_STATUS_UNCATEGORIZED, detail)


def worker_error_from_rpc_error(error: Any) -> pb.WorkerErrorResponse | None:
    """Unpack the ``WorkerErrorResponse`` a listening Worker packs into its gRPC status."""
    try:
        status = rpc_status.from_call(error)
    except ValueError:
        return None
    if status is None:
        return None
    for packed in status.details:
        candidate = pb.WorkerErrorResponse()
        if packed.Is(candidate.DESCRIPTOR):
            packed.Unpack(candidate)
            return candidate
    return None
