"""How `AgentSessionClient` invokes its Flow's RPCs: errors translated, closing waited for, lock conflicts retried.

The other parts of the client (its queries, event reads, waits and answers,
in the other ``_client_*`` modules) and `AgentSessionClient` itself build on
`SessionRpc`.

A call that Dex answers with "no Worker available" (the dispatch reason
``NO_WORKER_AVAILABLE``: Dex waited for a Worker of the Flow type and none took
the call, so nothing ran) is sent again until `NO_WORKER_WAIT` has passed since
the call began, so that a read made while a Worker restarts (a crash and its
replacement, a deploy) waits for the new Worker instead of failing; then it
raises `NoWorkerError`. ``UNKNOWN_NAME`` (Workers answered, none serves the
call) is raised at once.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar, cast

import dex
from dex.dexpb import dex_pb2 as pb

from dex_agents.application.inputs import session_id_refusal
from dex_agents.domain.errors import InvalidInputError
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.infrastructure.dex.session_errors import NoWorkerError as NoWorkerError
from dex_agents.infrastructure.dex.session_errors import SessionAlreadyExistsError as SessionAlreadyExistsError
from dex_agents.infrastructure.dex.session_errors import SessionUnavailableError as SessionUnavailableError
from dex_agents.infrastructure.dex.session_errors import dispatch_reason, translated_errors

InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")

LOCK_CONFLICT_RETRY = timedelta(seconds=30)
"""How long `AgentSessionClient.resolve_interrupt` retries a lock conflict.

Longer than the back-offs of the Step that takes the lock (``AwaitToolApproval``:
Dex's default 1 s doubling, over its attempts), since Dex keeps the lock through them.
"""

LOCK_CONFLICT_PAUSE = 0.05
"""The first pause after a lock conflict, in seconds; it doubles up to `LOCK_CONFLICT_MAX_PAUSE`."""
LOCK_CONFLICT_MAX_PAUSE = 1.0
"""The longest pause between two tries of a locking RPC, in seconds."""
_STOP_WAIT = timedelta(seconds=30)

NO_WORKER_WAIT = timedelta(seconds=30)
"""How long, from its start, a call keeps asking while Dex answers that no Worker is available.

Dex itself waits for a Worker before it answers so (real Dex and the dev server:
10 s), so a call is sent a few times at most; the total covers a Worker process
that restarts on a loaded machine (a Python Worker imports for seconds).
``AgentSessionClient(no_worker_wait=...)`` changes it (``timedelta(0)``: ask once).
"""
NO_WORKER_PAUSE = 0.1
"""Seconds between two tries of a call no Worker took (Dex waited before it answered)."""


def raise_if(refused: InvalidInputError | None) -> None:
    """Raise ``refused``, when an input check refused something."""
    if refused is not None:
        raise refused


class LockBackoff:
    """The pauses between tries of a locking RPC, for `LOCK_CONFLICT_RETRY` from the first try.

    `LOCK_CONFLICT_PAUSE` first, doubling up to `LOCK_CONFLICT_MAX_PAUSE`.
    """

    def __init__(self) -> None:
        self._give_up = time.monotonic() + LOCK_CONFLICT_RETRY.total_seconds()
        self._next = LOCK_CONFLICT_PAUSE

    async def pause(self) -> bool:
        """Pause before the next try; ``False``, without pausing, once the retry window has passed."""
        if time.monotonic() >= self._give_up:
            return False
        await asyncio.sleep(self._next)
        self._next = min(self._next * 2, LOCK_CONFLICT_MAX_PAUSE)
        return True


class SessionRpc:
    """The RPC calls of one `AgentSessionFlow` through a Dex `AsyncClient`, for its sessions."""

    _client: dex.AsyncClient
    _flow: AgentSessionFlow
    _no_worker_wait: timedelta = NO_WORKER_WAIT

    @staticmethod
    def _check_session_id(session_id: str) -> None:
        raise_if(session_id_refusal(session_id))

    async def _call_through_lock_conflicts(
        self,
        rpc: Callable[[dex.Context, InputT], Awaitable[dex.RPCResult[OutputT]]],
        session_id: str,
        request: InputT,
    ) -> OutputT:
        """Invoke a locking RPC, retrying lock conflicts (backing off) for `LOCK_CONFLICT_RETRY`, then re-raising."""
        backoff = LockBackoff()
        while True:
            try:
                return await self._call(rpc, session_id, request)
            except dex.RpcLockConflictError:
                if not await backoff.pause():
                    raise

    async def _call(
        self,
        rpc: Callable[[dex.Context, InputT], Awaitable[dex.RPCResult[OutputT]]],
        session_id: str,
        request: InputT,
        *,
        options: dex.RPCInvokeOptions | None = None,
    ) -> OutputT:
        """Invoke an RPC that takes an input (the SDK types RPCs as sync functions; ours are async).

        A session that is closing (``FlowClosingError``) is waited for until it has
        closed, then the call is made once more, so the caller sees what a stopped
        session answers (`SessionUnavailableError` for a write).
        """
        self._check_session_id(session_id)
        with translated_errors(self._flow.get_flow_type()):
            try:
                result = await self._through_worker_restarts(
                    lambda: self._client.invoke_rpc(
                        cast(Any, rpc), session_id, request, options=options or dex.RPCInvokeOptions()
                    )
                )
            except dex.FlowClosingError:
                await self._closed(session_id)
                result = await self._through_worker_restarts(
                    lambda: self._client.invoke_rpc(
                        cast(Any, rpc), session_id, request, options=options or dex.RPCInvokeOptions()
                    )
                )
        return cast(OutputT, result)

    async def _through_worker_restarts(self, invoke: Callable[[], Awaitable[Any]]) -> Any:
        """Await ``invoke()``, calling it again while Dex says no Worker is available, for `NO_WORKER_WAIT`.

        Such a call reached no Worker (Dex answers so only before it dispatched),
        so sending it again cannot run anything twice.
        """
        give_up = time.monotonic() + self._no_worker_wait.total_seconds()
        while True:
            try:
                return await invoke()
            except dex.WorkerInvocationError as error:
                if (
                    dispatch_reason(error) != pb.DISPATCH_TASK_ERROR_REASON_NO_WORKER_AVAILABLE
                    or time.monotonic() + NO_WORKER_PAUSE >= give_up
                ):
                    raise
            await asyncio.sleep(NO_WORKER_PAUSE)

    async def _closed(self, session_id: str) -> None:
        """Wait until the session's Flow has closed (after a stop, the close is asynchronous)."""
        while True:
            try:
                await self._client.wait_for_flow(session_id, timeout=_STOP_WAIT)
            except dex.LongPollTimeoutError:
                continue
            return

    async def _query(
        self,
        rpc: Callable[[dex.Context], Awaitable[dex.RPCResult[OutputT]]],
        session_id: str,
        *,
        options: dex.RPCInvokeOptions | None = None,
    ) -> OutputT:
        """Invoke an RPC without input."""
        self._check_session_id(session_id)
        with translated_errors(self._flow.get_flow_type()):
            result = await self._through_worker_restarts(
                lambda: self._client.invoke_rpc(cast(Any, rpc), session_id, options=options or dex.RPCInvokeOptions())
            )
        return cast(OutputT, result)
