"""The errors `AgentSessionClient` raises for what Dex refused, each one line saying what to do.

Each is a `DexAgentsError` and also the SDK's own error type, with the same
status details, so code that catches the SDK's error keeps working:

- `SessionUnavailableError` (`dex.FlowNotActiveOrNotFoundError`): no session
  has the ID, or it has ended and the call needs a running one.
- `SessionAlreadyExistsError` (`dex.FlowAlreadyStartedError`): ``start_session``
  of an ID that a session (or another Flow) already has.
- `NoWorkerError` (`dex.WorkerInvocationError`): Dex found no Worker to run the
  call: no Worker serves the Flow type (none registered it, or the listening
  Worker sessions are routed to does not answer).

`translated_errors` turns the SDK's errors into these around one Client call.
"""

import contextlib
from collections.abc import Iterator
from typing import Any, cast

import dex
import grpc  # type: ignore[import-untyped]  # grpcio ships no stubs
from dex.dexpb import dex_pb2 as pb
from grpc_status import rpc_status  # type: ignore[import-untyped]  # grpcio-status ships no stubs

from dex_agents.domain.errors import DexAgentsError


class SessionUnavailableError(DexAgentsError, dex.FlowNotActiveOrNotFoundError):
    """No session has this ID, or it has ended and the call needs a running one.

    It is Dex's `dex.FlowNotActiveOrNotFoundError` too, with the same status
    details, so code that catches the SDK's error keeps working.
    """


class SessionAlreadyExistsError(DexAgentsError, dex.FlowAlreadyStartedError):
    """A session (or another Flow) already has this ID: `AgentSessionClient.start_session` started nothing.

    `AgentSessionClient.ensure_session` starts a session only when none has the ID.
    It is Dex's `dex.FlowAlreadyStartedError` too, with the same status details.
    """


class NoWorkerError(DexAgentsError, dex.WorkerInvocationError):
    """No Worker serves the session's Flow type, so Dex had nothing to run the call on.

    Start a Worker that registers the Flow (`AgentContainer.worker`,
    `dex_agents.testing.run_agent_worker`, or the application's own) against the
    same Dex server, then call again. It is Dex's `dex.WorkerInvocationError`
    too, with the same status and Worker details.
    """


NO_WORKER_REASONS = frozenset(
    {pb.DISPATCH_TASK_ERROR_REASON_NO_WORKER_AVAILABLE, pb.DISPATCH_TASK_ERROR_REASON_UNKNOWN_NAME}
)
"""Dex's reasons for not dispatching a task that mean no Worker serves it."""


def dispatch_reason(error: dex.WorkerInvocationError) -> int:
    """Dex's ``DispatchTaskErrorReason`` for ``error`` (0 when the server sent none).

    The SDK keeps only the Worker's error fields; the reason is in the status
    details of the gRPC error it translated (``error.__cause__``).
    """
    cause = error.__cause__
    if not isinstance(cause, grpc.RpcError):
        return 0
    try:
        status = rpc_status.from_call(cast(Any, cause))
    except (ValueError, AttributeError):  # not a call with status details: no reason given
        return 0
    if status is None:
        return 0
    for packed in status.details:
        details = pb.ServiceErrorResponse()
        if packed.Is(details.DESCRIPTOR):
            packed.Unpack(details)
            return int(details.dispatch_task_error_reason)
    return 0


def _no_worker(error: dex.WorkerInvocationError, flow_type: str) -> NoWorkerError:
    said = " ".join((error.worker_error_detail or error.detail).split())
    return NoWorkerError(
        error.code,
        error.sub_status,
        f"no Worker serves Flow type {flow_type!r} on this Dex server ({said}): start a Worker that "
        "registers this Flow (AgentContainer.worker(), dex_agents.testing.run_agent_worker) and call again",
        error.operation,
        error.flow_id,
        error.worker_code,
        error.worker_error_type,
        error.worker_error_detail,
    )


@contextlib.contextmanager
def translated_errors(flow_type: str) -> Iterator[None]:
    """Raise the SDK errors of the block as the session errors above (others pass unchanged)."""
    try:
        yield
    except (SessionUnavailableError, SessionAlreadyExistsError, NoWorkerError):
        raise
    except dex.FlowNotActiveOrNotFoundError as error:
        raise SessionUnavailableError(
            error.code,
            error.sub_status,
            f"session {error.flow_id!r} does not exist or has ended: {error.detail}",
            error.operation,
            error.flow_id,
        ) from error
    except dex.FlowAlreadyStartedError as error:
        raise SessionAlreadyExistsError(
            error.code,
            error.sub_status,
            f"a session with ID {error.flow_id!r} already exists (start_session started nothing; "
            "ensure_session starts one only when none has the ID)",
            error.operation,
            error.flow_id,
        ) from error
    except dex.WorkerInvocationError as error:
        if dispatch_reason(error) in NO_WORKER_REASONS:
            raise _no_worker(error, flow_type) from error
        raise
