"""The client's answers to what a turn waits for: an approval (`resolve_interrupt`) or an external tool result.

Both retry a lock conflict (a Step holding ``PENDING_INTERRUPTS``) for up to
`LOCK_CONFLICT_RETRY`: Dex holds a Step's lock through its retry back-off.
"""

import enum
import json

from dex_agents.application.rpcs.resolve_interrupt import request_refusal
from dex_agents.application.rpcs.submit_tool_result import raise_for_tool_result_answer
from dex_agents.application.rpcs.submit_tool_result import request_refusal as result_refusal
from dex_agents.domain.errors import InvalidInputError
from dex_agents.domain.interrupts import ResolveInterruptRequest, SubmitToolResultAnswer, SubmitToolResultRequest
from dex_agents.domain.json_values import JsonValue
from dex_agents.domain.limits import InputProblem
from dex_agents.infrastructure.dex._client_events import AgentEventMessage as AgentEventMessage
from dex_agents.infrastructure.dex._client_rpc import LOCK_CONFLICT_RETRY as LOCK_CONFLICT_RETRY
from dex_agents.infrastructure.dex._client_rpc import LockBackoff, SessionRpc, raise_if
from dex_agents.infrastructure.dex._client_waits import RECHECK_INTERVAL as RECHECK_INTERVAL
from dex_agents.infrastructure.dex._client_waits import MessageReceipt as MessageReceipt
from dex_agents.infrastructure.dex.session_errors import NoWorkerError as NoWorkerError
from dex_agents.infrastructure.dex.session_errors import SessionAlreadyExistsError as SessionAlreadyExistsError
from dex_agents.infrastructure.dex.session_errors import SessionUnavailableError as SessionUnavailableError


class _Unset(enum.Enum):
    UNSET = "unset"


_UNSET = _Unset.UNSET


class SessionAnswers(SessionRpc):
    """Answers to a turn's pending interrupts."""

    async def resolve_interrupt(
        self,
        session_id: str,
        interrupt_id: str,
        *,
        approved: bool,
        rejection_message: str | None = None,
        approver: str | None = None,
        call_digest: str | None = None,
    ) -> bool:
        """Answer a pending approval; ``False`` when it is not pending (answered, cancelled, or expired).

        An approval expires on the engine's clock: its deadline is a Dex Timer
        measured by the server, and no Worker clock is asked.

        ``approver`` names who answered; the call's record, its stored
        `ToolOutcome` and the ``interrupt_resolved`` event keep it.
        ``call_digest`` is the pending interrupt's ``call_digest`` as the
        approver saw it: a call whose digest differs is failed, not run
        (``None`` binds the approval to the interrupt's digest). A lock
        conflict with a running Step (which keeps its lock through its retry
        back-off) is retried for 30 seconds, pausing 50 ms doubling to 1 s,
        then raised.

        Raises:
            InvalidInputError: the interrupt ID or the rejection message is refused; nothing was sent.
            dex.RpcLockConflictError: the conflict outlasted the retries.
        """
        self._check_session_id(session_id)
        request = ResolveInterruptRequest(
            interrupt_id=interrupt_id,
            approved=approved,
            rejection_message=rejection_message,
            approver=approver,
            call_digest=call_digest,
        )
        raise_if(request_refusal(request, self._flow.options))
        accepted = await self._call_through_lock_conflicts(self._flow.resolve_interrupt, session_id, request)
        return bool(accepted)

    async def submit_tool_result(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        result: JsonValue | _Unset = _UNSET,
        error: str | None = None,
    ) -> None:
        """Give a call waiting for its result from outside (a pending ``tool_result`` interrupt) its result.

        Exactly one of ``result`` (any JSON value: what the model sees as the tool's return value, as
        ``DeferredToolResults(calls={id: result})`` gives it in a plain Pydantic AI run) and ``error`` (the
        model sees it as Pydantic AI's retry feedback, as ``ModelRetry(error)`` would). A call waits for
        its result when its tool is an external tool (``ExternalToolset``) or raised ``CallDeferred``; the
        snapshot lists it in ``pending_interrupts`` with kind ``tool_result``, and ``interrupt_raised`` says
        so. A lock conflict is retried as for `resolve_interrupt`, and a call about to wait (its interrupt
        not raised yet) is tried again for the same 30 seconds.

        Raises:
            InvalidInputError: the ID is refused, neither or both of ``result`` and ``error`` were given,
                ``result`` has no JSON form, or either is over ``max_tool_output_bytes``; nothing was sent.
            UnknownToolCallError: the active turn has no such call.
            ToolResultAlreadySubmittedError: the call has its result (submitted, expired or cancelled).
            NotAwaitingToolResultError: the call waits for approval, or runs its own tool.
            dex.RpcLockConflictError: the conflict outlasted the retries.
        """
        self._check_session_id(session_id)
        request = _tool_result_request(tool_call_id, result, error)
        raise_if(result_refusal(request, self._flow.options))
        backoff = LockBackoff()
        while True:
            answer = SubmitToolResultAnswer(
                await self._call_through_lock_conflicts(self._flow.submit_tool_result, session_id, request)
            )
            if answer is not SubmitToolResultAnswer.NOT_YET_WAITING or not await backoff.pause():
                break
        raise_for_tool_result_answer(answer, tool_call_id)


def _tool_result_request(tool_call_id: str, result: "JsonValue | _Unset", error: str | None) -> SubmitToolResultRequest:
    """The request of `AgentSessionClient.submit_tool_result`, with ``result`` as JSON text.

    Raises:
        InvalidInputError: ``result`` has no JSON form.
    """
    if result is _UNSET:
        return SubmitToolResultRequest(tool_call_id=tool_call_id, error=error)
    try:
        text = json.dumps(result, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as cause:
        raise InvalidInputError(
            f"refused: the tool result has no JSON form ({cause})", problem=InputProblem.NOT_JSON, field="result"
        ) from cause
    return SubmitToolResultRequest(tool_call_id=tool_call_id, result=text, error=error)
