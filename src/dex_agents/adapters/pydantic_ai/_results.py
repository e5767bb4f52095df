"""Tool results in both directions: session records to Pydantic AI, tool Step runs to the session.

A tool Step keeps what the tool gave Pydantic AI as a value, in the call's
runner state (`dex_agents.adapters.pydantic_ai._tool_state`): the return part
(its ``content`` of any type, ``metadata``, ``retry`` info) and the
``ToolReturn.content`` and ``.tools`` that went beside it. The record's text
(``output``, ``error``) stays what the model would read, for display.

Resume (records to `DeferredToolResults`), built by hand because
``DeferredToolRequests.build_results`` refuses approvals for calls that sit in
``calls``, where every deferred call lives:

| record status     | result                                                          |
|-------------------|-----------------------------------------------------------------|
| ``succeeded``, a kept value | ``calls[id] = ToolReturn(content, content=, metadata=, tools=)`` as the tool gave them |
| ``succeeded``, text only | ``calls[id] = ToolReturn(output)``; parsed JSON for typed tool parts |
| ``failed``, a kept ``retried`` part | ``calls[id] = ModelRetry``, then the kept part in its place (`_retries`) |
| ``failed``, a kept ``failed`` part | ``calls[id] = ToolFailed(<the tool's message>)``          |
| ``failed``, the tool ran out of retries | `TurnFailedError` with Pydantic AI's message (a plain run raises it) |
| ``rejected``      | ``approvals[id] = ToolDenied(rejection message)``               |
| ``rejected``, no message | ``approvals[id] = ToolDenied()`` (Pydantic AI's text, as ``approvals={id: False}``) |
| ``expired``       | ``approvals[id] = ToolDenied(EXPIRED_REJECTION_MESSAGE)``       |
| ``failed``, nothing kept | ``calls[id] = ToolFailed("The tool call failed: <error>")`` |
| ``outcome_unknown`` | ``calls[id] = ToolFailed(OUTCOME_UNKNOWN_TOOL_RESULT)``       |
| ``not_applied``   | ``calls[id] = ToolFailed(NOT_APPLIED_TOOL_RESULT)``             |

A call whose result came from outside (``submit_tool_result``: the record's
``result_interrupt_id`` is set) resumes as a plain run resumed with
``DeferredToolResults`` would: ``succeeded`` gives ``calls[id]`` the submitted
JSON value itself, ``failed`` gives ``calls[id] = ModelRetry(error)`` (Pydantic
AI's retry feedback); ``expired`` and ``cancelled`` are denials as above.

A denial only counts as one in ``approvals``; in ``calls`` Pydantic AI would
hand the model the ``ToolDenied`` object as a successful return. Records
written before values were kept hold text only and resume as "text only" and
"nothing kept" above.

Tool Step (one run's end to a result):

| the run ends with                                   | result                                   |
|-----------------------------------------------------|------------------------------------------|
| a ``success`` return                                | its text as the model would see it, the value kept |
| a ``retried`` or ``failed`` return                  | `ToolExecutionError` (recorded ``failed``), the part kept |
| Pydantic AI's ``UnexpectedModelBehavior``: the tool ran out of retries | `ToolExecutionError`, the message kept |
| `DeferredToolRequests` with the call in ``approvals`` | `ToolApprovalRequestedError`: it asked for approval |
| `DeferredToolRequests.calls`, tool ``external``      | `ToolResultDeferredError`: the result comes from outside |
| `DeferredToolRequests.calls`, any other tool (``CallDeferred``) | `ToolResultDeferredError` as well              |

A bare ``str`` return keeps no value: its text is the value. Nor does a value
whose kept JSON is over `KEPT_VALUE_MAX_BYTES` (the default
``max_tool_output_bytes``, the bound the record's text is cut to): its text,
cut with a notice as before, resumes instead. A retry for the
model is a ``failed`` record, never a Step retry: the effect rules decide Step
retries as for any other result.
"""

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, assert_never

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ModelRetry, ToolDenied, ToolFailed, ToolReturn
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequestPart,
    ModelResponse,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from dex_agents.adapters.pydantic_ai._capabilities import ToolDefinitions
from dex_agents.adapters.pydantic_ai._tool_state import ToolCallState
from dex_agents.application.runner import (
    ToolApprovalRequestedError,
    ToolExecutionResult,
    ToolResultDeferredError,
    TurnFailedError,
)
from dex_agents.domain.errors import RunnerContractError, ToolExecutionError
from dex_agents.domain.failure_note import describe_tool_call_outcome
from dex_agents.domain.limits import DEFAULT_MAX_TOOL_OUTPUT_BYTES
from dex_agents.domain.tools import AgentToolCall, ToolCallStatus

KEPT_VALUE_MAX_BYTES = DEFAULT_MAX_TOOL_OUTPUT_BYTES
"""The largest kept value (its state text, in UTF-8 bytes); a larger one is not kept and the record's text resumes."""


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


def _return_part(parts: Iterable[ModelRequestPart], tool_call_id: str) -> ToolReturnPart | None:
    return next(
        (part for part in parts if isinstance(part, ToolReturnPart) and part.tool_call_id == tool_call_id), None
    )


def _kept_return(
    parts: Sequence[ModelRequestPart], part: ToolReturnPart, restore: Callable[[str, object], object] | None
) -> ToolReturn[Any]:
    """The ``ToolReturn`` that gives a resumed run back what the tool gave its Step's run."""
    value = part.content if restore is None else restore(part.tool_name, part.content)
    content = next((p.content for p in parts if isinstance(p, UserPromptPart)), None)
    tools = next((list(p.tools_added) for p in parts if isinstance(p, ToolAvailabilityDeltaPart)), None)
    return ToolReturn(return_value=value, content=content, metadata=part.metadata, tools=tools)


def _failure(record: AgentToolCall, state: ToolCallState) -> Any:
    """The answer to a ``failed`` call: what its Step kept, else the record's text."""
    if state.exceeded is not None:
        # A plain run raises UnexpectedModelBehavior here; the turn fails with its message.
        raise TurnFailedError(state.exceeded)
    part = None if state.result is None else _return_part(state.result, record.tool_call_id)
    if part is None:
        return ToolFailed(describe_tool_call_outcome(record))
    message = part.content if isinstance(part.content, str) else part.model_response_str(wrap_if_error=False)
    if part.outcome == "retried":
        return ModelRetry(message)
    return ToolFailed(message)


def deferred_tool_results(
    tool_call_ids: Iterable[str],
    records: Mapping[str, AgentToolCall],
    *,
    typed: frozenset[str],
    restore: Callable[[str, object], object] | None = None,
) -> DeferredToolResults:
    """Return the results of the calls a resumed run answers, from their final records.

    ``restore(tool_name, value)`` rebuilds a kept return value JSON could not carry
    (`dex_agents.adapters.pydantic_ai._return_types`).

    Raises:
        RunnerContractError: a call has no record, or its record is not final.
        TurnFailedError: a call's tool ran out of retries in its Step.
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
                state = ToolCallState.decode(record.framework_state)
                part = None if state.result is None else _return_part(state.result, tool_call_id)
                if part is not None and part.outcome == "success" and state.result is not None:
                    calls[tool_call_id] = _kept_return(state.result, part, restore)
                else:
                    value = _returned_value(record.output or "", typed=tool_call_id in typed)
                    calls[tool_call_id] = ToolReturn(value)
            case ToolCallStatus.REJECTED if record.rejection_message is None:
                approvals[tool_call_id] = ToolDenied()  # Pydantic AI's own text, as a plain run denied with False
            case ToolCallStatus.REJECTED | ToolCallStatus.EXPIRED | ToolCallStatus.CANCELLED:
                approvals[tool_call_id] = ToolDenied(describe_tool_call_outcome(record))
            case ToolCallStatus.FAILED:
                calls[tool_call_id] = _failure(record, ToolCallState.decode(record.framework_state))
            case ToolCallStatus.OUTCOME_UNKNOWN | ToolCallStatus.NOT_APPLIED:
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


def kept_retries(tool_call_ids: Iterable[str], records: Mapping[str, AgentToolCall]) -> dict[str, ToolReturnPart]:
    """Return the ``retried`` parts the tool Steps of these calls kept, by call ID."""
    kept: dict[str, ToolReturnPart] = {}
    for tool_call_id in tool_call_ids:
        record = records.get(tool_call_id)
        if record is None or record.status is not ToolCallStatus.FAILED:
            continue
        state = ToolCallState.decode(record.framework_state)
        part = None if state.result is None else _return_part(state.result, tool_call_id)
        if part is not None and part.outcome == "retried":
            kept[tool_call_id] = part
    return kept


def ran_out_of_retries(display: str, message: str, state: ToolCallState) -> ToolExecutionError:
    """The tool Step's result when Pydantic AI gave up on the tool: its ``UnexpectedModelBehavior`` ``message`` kept.

    ``display`` is the record's error text.
    """
    return ToolExecutionError(display, framework_state=ToolCallState(retries=state.retries, exceeded=message).encode())


def tool_step_output(
    output: object,
    record: AgentToolCall,
    tools: ToolDefinitions,
    state: ToolCallState | None = None,
) -> ToolExecutionResult:
    """Return a tool Step run's result (its text and the value kept in ``state``), or raise as the module table says.

    ``output`` is the run's output: the request parts that answer the call.

    Raises:
        ToolExecutionError: the call failed in a way the model should see.
        ToolApprovalRequestedError: the tool asked for approval before acting (``ApprovalRequired``).
        ToolResultDeferredError: the call's result comes from outside (an external tool, or ``CallDeferred``).
        RunnerContractError: the run ended without a result for the call.
    """
    kept = ToolCallState() if state is None else state
    if isinstance(output, DeferredToolRequests):
        if any(call.tool_call_id == record.tool_call_id for call in output.approvals):
            raise ToolApprovalRequestedError(
                f"tool {record.tool_name!r} asked for approval of call {record.tool_call_id!r}"
            )
        if any(call.tool_call_id == record.tool_call_id for call in output.calls):
            raise ToolResultDeferredError(f"tool {record.tool_name!r} deferred call {record.tool_call_id!r}")
        raise RunnerContractError(
            f"the tool Step run of call {record.tool_call_id!r} ({record.tool_name!r}) deferred other calls"
        )
    parts: list[ModelRequestPart] = list(output) if isinstance(output, list) else []
    for part in parts:
        if isinstance(part, ToolReturnPart) and part.tool_call_id == record.tool_call_id:
            own = _own_parts(parts, part)
            if part.outcome == "success" and _text_is_the_value(own, part):
                # The record's text resumes as this very value: keep no parts (the common case; nothing is
                # written to find that out). The state still replaces the model Step's: the context it
                # carried (prompt, usage, prepared definition) was for this Step alone, and the finished record
                # is read by every later model Step of the turn.
                return ToolExecutionResult(
                    part.model_response_str(), framework_state=ToolCallState(retries=kept.retries).encode() or "{}"
                )
            value = kept.with_result(own).encode()
            if value is not None and len(value.encode()) > KEPT_VALUE_MAX_BYTES:
                # Kept whole it would pass the bound the text is cut to: the (cut) text resumes, as before.
                value = None
            match part.outcome:
                case "success":
                    return ToolExecutionResult(part.model_response_str(), framework_state=value)
                case "failed" | "retried":
                    raise ToolExecutionError(part.model_response_str(wrap_if_error=False), framework_state=value)
                case "denied" | "interrupted":
                    raise ToolExecutionError(f"The tool call was {part.outcome}: {part.model_response_str()}")
                case _:
                    assert_never(part.outcome)
    raise RunnerContractError(
        f"the tool Step run of call {record.tool_call_id!r} ({record.tool_name!r}) ended without its result"
    )


def _text_is_the_value(own: Sequence[ModelRequestPart], part: ToolReturnPart) -> bool:
    """Whether the record's text alone gives a resumed run this return back (a plain ``str``, nothing beside)."""
    return len(own) == 1 and isinstance(part.content, str) and part.metadata is None and part.tool_kind is None


def _own_parts(parts: Sequence[ModelRequestPart], part: ToolReturnPart) -> list[ModelRequestPart]:
    """The call's return part and what went beside it (one call ran: its user content and tool reveals)."""
    beside = [
        p
        for p in parts
        if isinstance(p, UserPromptPart)
        or (isinstance(p, ToolAvailabilityDeltaPart) and p.tool_call_id in (None, part.tool_call_id))
    ]
    return [part, *beside]
