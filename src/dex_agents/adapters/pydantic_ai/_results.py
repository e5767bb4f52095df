"""Tool results in both directions: session records to Pydantic AI, tool Step runs to the session.

Resume (records to `DeferredToolResults`), built by hand because
``DeferredToolRequests.build_results`` refuses approvals for calls that sit in
``calls``, where every deferred call lives:

| record status     | result                                                          |
|-------------------|-----------------------------------------------------------------|
| ``succeeded``     | ``calls[id] = ToolReturn(output)``; parsed JSON for typed tool parts |
| ``rejected``      | ``approvals[id] = ToolDenied(rejection message)``               |
| ``expired``       | ``approvals[id] = ToolDenied(EXPIRED_REJECTION_MESSAGE)``       |
| ``failed``        | ``calls[id] = ToolFailed("The tool call failed: <error>")``     |
| ``outcome_unknown`` | ``calls[id] = ToolFailed(OUTCOME_UNKNOWN_TOOL_RESULT)``       |
| ``not_applied``   | ``calls[id] = ToolFailed(NOT_APPLIED_TOOL_RESULT)``             |

A call whose result came from outside (``submit_tool_result``: the record's
``result_interrupt_id`` is set) resumes as a plain run resumed with
``DeferredToolResults`` would: ``succeeded`` gives ``calls[id]`` the submitted
JSON value itself, ``failed`` gives ``calls[id] = ModelRetry(error)`` (Pydantic
AI's retry feedback); ``expired`` and ``cancelled`` are denials as above.

A denial only counts as one in ``approvals``; in ``calls`` Pydantic AI would
hand the model the ``ToolDenied`` object as a successful return.

Tool Step (one run's end to a result):

| the run ends with                                   | result                                   |
|-----------------------------------------------------|------------------------------------------|
| a ``success`` return                                | its text as the model would see it       |
| a ``retried`` or ``failed`` return                  | `ToolExecutionError` (recorded ``failed``) |
| `DeferredToolRequests` with the call in ``approvals`` | `ToolExecutionError`: asked for approval |
| `DeferredToolRequests.calls`, tool ``external``      | `ToolResultDeferredError`: the result comes from outside |
| `DeferredToolRequests.calls`, any other tool (``CallDeferred``) | `ToolResultDeferredError` as well              |
"""

import json
from collections.abc import Iterable, Mapping
from typing import Any, assert_never

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolDenied, ToolFailed, ToolReturn
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, ToolReturnPart

from dex_agents.adapters.pydantic_ai._capabilities import ToolDefinitions
from dex_agents.application.runner import ToolResultDeferredError
from dex_agents.domain.errors import RunnerContractError, ToolExecutionError
from dex_agents.domain.failure_note import describe_tool_call_outcome
from dex_agents.domain.tools import AgentToolCall, ToolCallStatus

ASKED_FOR_APPROVAL = (
    "The tool asked for approval while it ran (ApprovalRequired); it needs a ToolPolicy with "
    "requires_approval=True to run in a Dex session."
)
"""The failure the model sees for a tool that raised ``ApprovalRequired`` in its Step."""


def typed_call_ids(messages: Iterable[ModelMessage]) -> frozenset[str]:
    """Return the IDs of calls to tools with typed parts (such as ``search_tools``)."""
    return frozenset(
        part.tool_call_id
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart) and part.tool_kind is not None
    )


def _returned_value(output: str, *, typed: bool) -> object:
    if not typed:
        return output
    try:
        value: object = json.loads(output)
    except ValueError:
        return output
    return value


def deferred_tool_results(
    tool_call_ids: Iterable[str], records: Mapping[str, AgentToolCall], *, typed: frozenset[str]
) -> DeferredToolResults:
    """Return the results of the calls a resumed run answers, from their final records.

    Raises:
        RunnerContractError: a call has no record, or its record is not final.
    """
    calls: dict[str, Any] = {}
    approvals: dict[str, Any] = {}
    for tool_call_id in tool_call_ids:
        record = records.get(tool_call_id)
        if record is None:
            raise RunnerContractError(f"the turn has no record of tool call {tool_call_id!r}")
        match record.status:
            case ToolCallStatus.SUCCEEDED if record.has_external_result:
                calls[tool_call_id] = json.loads(record.output or "null")
            case ToolCallStatus.FAILED if record.has_external_result:
                calls[tool_call_id] = ModelRetry(record.error or "The tool call failed.")
            case ToolCallStatus.SUCCEEDED:
                value = _returned_value(record.output or "", typed=tool_call_id in typed)
                calls[tool_call_id] = ToolReturn(value)
            case ToolCallStatus.REJECTED | ToolCallStatus.EXPIRED | ToolCallStatus.CANCELLED:
                approvals[tool_call_id] = ToolDenied(describe_tool_call_outcome(record))
            case ToolCallStatus.FAILED | ToolCallStatus.OUTCOME_UNKNOWN | ToolCallStatus.NOT_APPLIED:
                calls[tool_call_id] = ToolFailed(describe_tool_call_outcome(record))
            case (
                ToolCallStatus.QUEUED
                | ToolCallStatus.PENDING
                | ToolCallStatus.AWAITING_APPROVAL
                | ToolCallStatus.AWAITING_RESULT
                | ToolCallStatus.APPROVED
                | ToolCallStatus.RECONCILING
            ):
                raise RunnerContractError(
                    f"tool call {tool_call_id!r} has no result yet (status {record.status.value!r})"
                )
            case _:
                assert_never(record.status)
    return DeferredToolResults(calls=calls, approvals=approvals)


def tool_step_output(output: object, record: AgentToolCall, tools: ToolDefinitions) -> str:
    """Return the text of a tool Step run's result, or raise as the module table says.

    Raises:
        ToolExecutionError: the call failed in a way the model should see.
        ToolResultDeferredError: the call's result comes from outside (an external tool, or ``CallDeferred``).
        RunnerContractError: the run ended without a result for the call.
    """
    if isinstance(output, DeferredToolRequests):
        if any(call.tool_call_id == record.tool_call_id for call in output.approvals):
            raise ToolExecutionError(ASKED_FOR_APPROVAL)
        if any(call.tool_call_id == record.tool_call_id for call in output.calls):
            raise ToolResultDeferredError(f"tool {record.tool_name!r} deferred call {record.tool_call_id!r}")
        raise RunnerContractError(
            f"the tool Step run of call {record.tool_call_id!r} ({record.tool_name!r}) deferred other calls"
        )
    parts: list[object] = list(output) if isinstance(output, list) else []
    for part in parts:
        if isinstance(part, ToolReturnPart) and part.tool_call_id == record.tool_call_id:
            match part.outcome:
                case "success":
                    return part.model_response_str()
                case "failed" | "retried":
                    raise ToolExecutionError(part.model_response_str(wrap_if_error=False))
                case "denied" | "interrupted":
                    raise ToolExecutionError(f"The tool call was {part.outcome}: {part.model_response_str()}")
                case _:
                    assert_never(part.outcome)
    raise RunnerContractError(
        f"the tool Step run of call {record.tool_call_id!r} ({record.tool_name!r}) ended without its result"
    )
