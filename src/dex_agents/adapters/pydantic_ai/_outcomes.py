"""How a model Step's run end becomes its outcome: the requested calls (with their policies and context) or the turn.

- `step_outcome`: a run that ends with `DeferredToolRequests` becomes `ToolCallsRequested` (one
  `DeferredToolCall` per requested call, in the order of the model response: `requested_calls`), with the
  run state; any other end becomes `TurnCompleted` with the turn's messages.
- `deferred_call`: a call's policy (`AgentTurnContext.resolve_tool_policy` with `framework_effect`; a tool
  declared ``requires_approval=True`` or a call Pydantic AI routed to ``approvals`` always requires approval;
  a tool with a reconcile probe is ``reconcilable``) and its ``framework_state``: the context of the plain run
  that runs it (`dex_agents.adapters.pydantic_ai._tool_context`) and its tool's retry count in the turn
  (`dex_agents.adapters.pydantic_ai._tool_state`).
- `check_answered_calls`: a run that answered a call no Dex Step ran fails the attempt (but for the
  "not executed" answers of calls beside an output that ended the run under ``end_strategy='early'``).

A response that gives the output beside function tool calls (under ``'graceful'`` or ``'exhaustive'``,
where the model Step's run got it without its output calls: `ModelStepRecord.unstripped`) is stored whole
in the run state, its output calls listed in ``output_call_ids``: the resumed run processes them with
the calls' results and ends with that output, as a plain run does.
"""

from collections.abc import Mapping, Sequence
from dataclasses import replace

import attrs
from pydantic_ai import DeferredToolRequests, _tool_execution
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RunUsage, UsageLimits

from dex_agents.adapters.pydantic_ai import _history
from dex_agents.adapters.pydantic_ai._capabilities import (
    ModelStepRecord,
)
from dex_agents.adapters.pydantic_ai._retries import (
    turn_retries,
)
from dex_agents.adapters.pydantic_ai._run_nodes import resumed_run_step
from dex_agents.adapters.pydantic_ai._tool_context import (
    ContextTexts,
    PreparedFields,
    ToolStepContext,
    reads_run_messages,
)
from dex_agents.adapters.pydantic_ai._usage import (
    check_tool_calls,
    copy_usage,
    usage_since,
)
from dex_agents.adapters.pydantic_ai.reconcile import tool_has_probe
from dex_agents.application.runner import (
    AgentTurnContext,
)
from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.tools import ToolEffect
from dex_agents.domain.turns import AgentTurnOutcome, DeferredToolCall, ToolCallsRequested, TurnCompleted

NOT_EXECUTED_BESIDE_OUTPUT: str = getattr(
    _tool_execution,
    "_TOOL_SKIPPED_FINAL_ALREADY_PROCESSED",  # private: a release that renames it gets 2.68's text
    "Tool not executed - a final result was already processed.",
)
"""What Pydantic AI answers a function tool call with when an output beside it ended the run (``'early'``)."""

SEARCH_TOOLS_KIND = "tool-search"
"""The ``tool_kind`` of Pydantic AI's ``search_tools``."""


def framework_effect(definition: ToolDefinition | None) -> ToolEffect | None:
    """Return the effect a tool's definition implies, or ``None`` when it implies none."""
    if definition is None:
        return None
    if definition.tool_kind == SEARCH_TOOLS_KIND:
        return ToolEffect.READ
    annotations = (definition.metadata or {}).get("annotations")
    if isinstance(annotations, Mapping):
        if annotations.get("readOnlyHint") is True:
            return ToolEffect.READ
        if annotations.get("idempotentHint") is True:
            return ToolEffect.IDEMPOTENT_WRITE
    return None


def check_answered_calls(
    new_messages: Sequence[ModelMessage], supplied: frozenset[str], output_tool_names: set[str]
) -> None:
    """Fail when a run answered a tool call that no Dex Step ran.

    Pydantic AI's own ``retried`` answers (invalid arguments, unknown or
    unavailable tools), output tool returns and the "not executed" answers of
    calls beside an output that ended the run are not tool calls a Step runs.

    Raises:
        RunnerContractError: such an answer is in ``new_messages``.
    """
    for message in new_messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if (
                isinstance(part, ToolReturnPart)
                and part.outcome != "retried"
                and part.tool_call_id not in supplied
                and part.tool_name not in output_tool_names
                and part.content != NOT_EXECUTED_BESIDE_OUTPUT
            ):
                raise RunnerContractError(
                    f"Pydantic AI answered tool call {part.tool_call_id!r} ({part.tool_name!r}) that no Dex Step "
                    "ran; a capability that handles deferred tool calls itself (HandleDeferredToolCalls) "
                    "conflicts with Dex Steps"
                )


def requested_calls(output: DeferredToolRequests, turn_messages: Sequence[ModelMessage]) -> list[ToolCallPart]:
    """Return the deferred calls in the order of the model response that asked for them."""
    deferred = {call.tool_call_id: call for call in [*output.calls, *output.approvals]}
    last_response = next((m for m in reversed(turn_messages) if isinstance(m, ModelResponse)), None)
    parts = [] if last_response is None else last_response.parts
    ordered = [
        deferred.pop(part.tool_call_id)
        for part in parts
        if isinstance(part, ToolCallPart) and part.tool_call_id in deferred
    ]
    ordered.extend(deferred.values())
    return ordered


def usage_of_last(turn_messages: Sequence[ModelMessage], responses: int) -> RunUsage:
    """The usage a run that made the last ``responses`` model requests of ``turn_messages`` has."""
    usage = RunUsage()
    answered = [message for message in turn_messages if isinstance(message, ModelResponse)]
    for response in answered[len(answered) - responses :] if responses else []:
        usage.incr(response.usage)
        usage.requests += 1
    return usage


@attrs.frozen
class StepRun:
    """What a model Step's run was given: its turn, what it learned of its tools, the turn's prompt and limits."""

    turn: AgentTurnContext
    record: ModelStepRecord
    prompt: _history.UserPrompt
    usage_limits: UsageLimits


def step_outcome(
    output: object, turn_messages: list[ModelMessage], run_usage: RunUsage, mark: RunUsage, step: StepRun
) -> AgentTurnOutcome:
    """The Step's outcome; ``run_usage`` is the turn's usage now, ``mark`` what earlier Steps reported of it.

    Raises:
        TurnFailedError: the requested calls would pass the tool call limit.
    """
    turn, record, prompt, usage_limits = step.turn, step.record, step.prompt, step.usage_limits
    usage = usage_since(run_usage, mark)
    if isinstance(output, DeferredToolRequests):
        output_call_ids: list[str] = []
        if record.unstripped is not None:
            turn_messages, output_call_ids = _unstripped(turn_messages, record.unstripped, record.output_tool_names)
        calls = requested_calls(output, turn_messages)
        # The calls from outside count here too: a plain run counts them when the run resumes with
        # their results, which in a session is this turn's next model Step, where none is counted.
        check_tool_calls(usage_limits, run_usage, len(calls), step_usage=usage)
        approvals = frozenset(call.tool_call_id for call in output.approvals)
        # The context of the plain run that runs these calls: a plain run ends at a response with a
        # call it defers (approval, external result), and the user's resumed run has no prompt and
        # counts its steps from 0 (as `resumed_run_step` does for the model Steps).
        plain_deferred = frozenset(
            call_id
            for call_id, record_of in turn.tool_calls.items()
            if record_of.interrupt_id is not None or record_of.has_external_result
        )
        run_step = resumed_run_step(turn_messages, plain_deferred)
        restarted = run_step < sum(isinstance(message, ModelResponse) for message in turn_messages)
        context = ToolStepContext(
            prompt=None if restarted else prompt,
            run_step=run_step,
            usage=usage_of_last(turn_messages, run_step) if restarted else copy_usage(run_usage),
        )
        retries = turn_retries(turn_messages)
        texts = ContextTexts(context)
        return ToolCallsRequested(
            framework_run_state=_history.RunState(
                messages=turn_messages,
                tool_call_ids=[call.tool_call_id for call in calls],
                usage=copy_usage(run_usage),
                output_call_ids=output_call_ids,
            ).encode(),
            tool_calls=[deferred_call(call, turn, record, approvals, texts, retries) for call in calls],
            usage=usage,
        )
    if turn_messages and _history.is_bare_prompt(turn_messages[0], prompt):
        turn_messages = turn_messages[1:]
    return TurnCompleted(new_messages=[_history.framework_message(m) for m in turn_messages], usage=usage)


def _unstripped(
    turn_messages: list[ModelMessage], response: ModelResponse, output_tool_names: set[str]
) -> tuple[list[ModelMessage], list[str]]:
    """``turn_messages`` with the last response holding the parts the model gave, and its output call IDs."""
    index = next(i for i in range(len(turn_messages) - 1, -1, -1) if isinstance(turn_messages[i], ModelResponse))
    last = turn_messages[index]
    assert isinstance(last, ModelResponse)
    restored = replace(last, parts=list(response.parts))
    output_call_ids = [call.tool_call_id for call in restored.tool_calls if call.tool_name in output_tool_names]
    return [*turn_messages[:index], restored, *turn_messages[index + 1 :]], output_call_ids


def deferred_call(
    call: ToolCallPart,
    turn: AgentTurnContext,
    record: ModelStepRecord,
    approvals: frozenset[str],
    texts: ContextTexts,
    retries: Mapping[str, int],
) -> DeferredToolCall:
    """The record of one requested call; ``texts`` writes its state over the response's context."""
    definition = record.tools.by_name.get(call.tool_name)
    prepared = PreparedFields.of(definition) if definition is not None else None
    new_run = False
    if definition is None and call.tool_kind == SEARCH_TOOLS_KIND:
        effect: ToolEffect | None = ToolEffect.READ
    else:
        effect = framework_effect(definition)
    policy = turn.resolve_tool_policy(call.tool_name, effect)
    asks_approval = call.tool_call_id in approvals or (definition is not None and definition.kind == "unapproved")
    if asks_approval and policy.requires_approval is not True:
        policy = attrs.evolve(policy, requires_approval=True)
    if policy.requires_approval is True or (definition is not None and definition.kind == "external"):
        # A call a plain run defers runs in the user's resumed run: a new run's context.
        new_run = True
    elif definition is not None and definition.kind == "external" and policy.requires_approval is None:
        # Nothing runs here: the result comes from outside, which is the answer a person gives.
        policy = attrs.evolve(policy, requires_approval=False)
    if tool_has_probe(definition) and not policy.reconcilable:
        policy = attrs.evolve(policy, reconcilable=True)
    return DeferredToolCall(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        arguments=call.args_as_json_str(),
        policy=policy,
        framework_state=texts.encode(prepared, new_run=new_run, retries=retries.get(call.tool_name, 0)),
        sequential=definition is not None and definition.sequential,
        external=definition is not None and definition.kind == "external",
        reads_history=reads_run_messages(definition),
    )
