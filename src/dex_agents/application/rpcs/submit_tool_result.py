"""``submit_tool_result``: the result of a call waiting for it from outside (locks ``PENDING_INTERRUPTS``).

The request names the call by its tool-call ID and holds exactly one of a
result (JSON text, the tool's return value as the model sees it) or an error
text (the model sees it as Pydantic AI's retry feedback). The checks
(`request_refusal`, the same at the client): the ID as an interrupt ID, the
result one JSON value, either text within ``max_tool_output_bytes`` and free
of lone surrogates and NUL. Then, by what the session holds:

| the call                                             | answer                  |
|------------------------------------------------------|-------------------------|
| has a pending ``tool_result`` interrupt              | ``accepted`` (1)        |
| has a pending approval                               | ``not_awaiting_result`` |
| is ``awaiting_result``, its interrupt not raised yet | ``not_yet_waiting`` (2) |
| is ``awaiting_result``, its interrupt answered       | ``already_answered``    |
| is final and waited for a result                     | ``already_answered``    |
| is any other record of the turn                      | ``not_awaiting_result`` |
| has no record                                        | ``unknown_call``        |

(1) The interrupt is removed and the answer published, in the RPC's one
commit. (2) The client tries again for a while.

RPCs cannot write live events; ``AwaitToolApproval`` writes
``interrupt_resolved`` when it applies the answer.
"""

import json
from typing import assert_never

import attrs

from dex_agents.application.inputs import id_refusal
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import InterruptStore, ResolutionPublisher, ToolCallStore
from dex_agents.application.wiring import Wired
from dex_agents.domain.errors import (
    InvalidInputError,
    NotAwaitingToolResultError,
    ToolResultAlreadySubmittedError,
    UnknownToolCallError,
)
from dex_agents.domain.interrupts import InterruptKind, SubmitToolResultAnswer, SubmitToolResultRequest
from dex_agents.domain.limits import InputProblem, check_input_text, describe_input_problem, utf8_size
from dex_agents.domain.tools import ToolCallStatus


@attrs.frozen(kw_only=True)
class SubmitToolResult(Wired):
    """Accepts the outside result of a call waiting for it."""

    interrupts: InterruptStore
    resolutions: ResolutionPublisher
    tool_calls: ToolCallStore
    options: AgentSessionOptions

    async def execute(self, request: SubmitToolResultRequest) -> SubmitToolResultAnswer:
        """Accept the result, or say why not."""
        if request_refusal(request, self.options) is not None:
            return SubmitToolResultAnswer.REFUSED
        pending = self.interrupts.get()
        interrupt = next((i for i in pending if i.tool_call_id == request.tool_call_id), None)
        if interrupt is not None and interrupt.kind is InterruptKind.TOOL_RESULT:
            self.interrupts.set([i for i in pending if i.interrupt_id != interrupt.interrupt_id])
            self.resolutions.publish(request.resolution(interrupt))
            return SubmitToolResultAnswer.ACCEPTED
        if interrupt is not None:
            return SubmitToolResultAnswer.NOT_AWAITING_RESULT
        record = self.tool_calls.get(request.tool_call_id)
        if record is None:
            return SubmitToolResultAnswer.UNKNOWN_CALL
        if record.status is ToolCallStatus.AWAITING_RESULT:
            return (
                SubmitToolResultAnswer.ALREADY_ANSWERED
                if record.result_raised
                else SubmitToolResultAnswer.NOT_YET_WAITING
            )
        if record.is_final and record.has_external_result:
            return SubmitToolResultAnswer.ALREADY_ANSWERED
        return SubmitToolResultAnswer.NOT_AWAITING_RESULT


def request_refusal(request: SubmitToolResultRequest, options: AgentSessionOptions) -> InvalidInputError | None:
    """Return the error refusing ``request`` before it is looked at, or ``None``."""
    refused = id_refusal(request.tool_call_id, field="tool_call_id", what="the tool call ID", allow_slash=False)
    if refused is not None:
        return refused
    if (request.result is None) == (request.error is None):
        return InvalidInputError(
            "refused: give exactly one of result and error", problem=InputProblem.NOT_JSON, field="result"
        )
    field, what = ("result", "the tool result") if request.error is None else ("error", "the tool error")
    text = request.result if request.error is None else request.error
    if not isinstance(text, str):
        return InvalidInputError(f"refused: {what} must be text", problem=InputProblem.NOT_TEXT, field=field)
    limit = options.max_tool_output_bytes
    problem = check_input_text(text, max_bytes=limit, allow_blank=field == "result")
    if problem is None and field == "result":
        try:
            json.loads(text)
        except ValueError:
            problem = InputProblem.NOT_JSON
    if problem is None:
        return None
    message = describe_input_problem(problem, what=what, size=utf8_size(text), max_bytes=limit)
    return InvalidInputError(f"refused: {message}", problem=problem, field=field)


def raise_for_tool_result_answer(answer: SubmitToolResultAnswer, tool_call_id: str) -> None:
    """Raise the error of a ``submit_tool_result`` answer; return for ``accepted``.

    Raises:
        UnknownToolCallError, ToolResultAlreadySubmittedError, NotAwaitingToolResultError, InvalidInputError:
            as `AgentSessionClient.submit_tool_result` says.
    """
    match answer:
        case SubmitToolResultAnswer.ACCEPTED:
            return
        case SubmitToolResultAnswer.UNKNOWN_CALL:
            raise UnknownToolCallError(
                f"the session's active turn has no tool call {tool_call_id!r}", tool_call_id=tool_call_id
            )
        case SubmitToolResultAnswer.ALREADY_ANSWERED:
            raise ToolResultAlreadySubmittedError(
                f"tool call {tool_call_id!r} has its result already (submitted, expired or cancelled)",
                tool_call_id=tool_call_id,
            )
        case SubmitToolResultAnswer.NOT_AWAITING_RESULT | SubmitToolResultAnswer.NOT_YET_WAITING:
            raise NotAwaitingToolResultError(
                f"tool call {tool_call_id!r} does not wait for a result from outside "
                "(it waits for approval, runs its own tool, or is not waiting yet)",
                tool_call_id=tool_call_id,
            )
        case SubmitToolResultAnswer.REFUSED:
            raise InvalidInputError(
                "refused: the session refused the tool result", problem=InputProblem.NOT_JSON, field="result"
            )
        case _:
            assert_never(answer)
