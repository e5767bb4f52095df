"""What a runner's model Step returns, and the checks the session applies to it.

`TurnCompleted` ends the turn with every message it produced after its user
message; `ToolCallsRequested` asks for tool calls and carries the framework's
run state to resume from. `validate_turn_outcome` enforces the runner
contract: tool-call IDs non-empty, without ``/`` and unique within the turn,
a non-empty run state.
"""

from collections.abc import Iterable

import attrs

from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.tools import ToolPolicy
from dex_agents.domain.usage import AgentUsage


@attrs.frozen
class DeferredToolCall:
    """One tool call the model asked for, to run in its own Step.

    Positional as in the spec: ``DeferredToolCall(tool_call_id, tool_name, arguments, policy)``.
    """

    tool_call_id: str
    """The framework's ID for the call: non-empty, no ``/``, unique within the turn."""
    tool_name: str
    """The tool's name as the model called it."""
    arguments: str
    """The call's arguments as JSON text."""
    policy: ToolPolicy
    """The policy from `AgentTurnContext.resolve_tool_policy`."""
    framework_state: str | None = attrs.field(default=None, kw_only=True)
    """Runner-owned text the call's tool Step gets back as `AgentToolCall.framework_state`
    (the sagent runner's tool state); never shown to people, nor part of the approval digest."""
    sequential: bool = attrs.field(default=False, kw_only=True)
    """Whether the call runs alone, in model order: the calls before it end first, and the calls
    after it start once it ended (`dex_agents.domain.tool_order`)."""
    external: bool = attrs.field(default=False, kw_only=True)
    """Whether the call's result comes from outside the session (an external tool, such as Pydantic AI's
    ``ExternalToolset``): no tool Step runs it; it waits for ``submit_tool_result`` (after its approval,
    when it needs one)."""
    reads_history: bool = attrs.field(default=False, kw_only=True)
    """Whether the call's tool Step reads the turn's history: it then gets the model's window, its
    summary and the run state (`DeferredToolExecution.history`), at the cost of loading them."""


def _messages(messages: Iterable[FrameworkMessage]) -> tuple[FrameworkMessage, ...]:
    return tuple(messages)


def _calls(calls: Iterable[DeferredToolCall]) -> tuple[DeferredToolCall, ...]:
    return tuple(calls)


@attrs.frozen
class TurnCompleted:
    """The model gave its final answer; the turn ends: ``TurnCompleted(new_messages, usage)``."""

    new_messages: tuple[FrameworkMessage, ...] = attrs.field(converter=_messages)
    """Every message of the turn after its user message, across all its model calls."""
    usage: AgentUsage = attrs.field(factory=AgentUsage)
    """Usage of this model call only."""


@attrs.frozen
class ToolCallsRequested:
    """The model asked for tools; the session runs them and calls the model again.

    Positional as in the spec: ``ToolCallsRequested(framework_run_state, tool_calls, usage)``.
    """

    framework_run_state: str
    """What the framework needs to continue the turn after the tools; non-empty."""
    tool_calls: tuple[DeferredToolCall, ...] = attrs.field(converter=_calls)
    """The calls in model order; at least one."""
    usage: AgentUsage = attrs.field(factory=AgentUsage)
    """Usage of this model call only."""


AgentTurnOutcome = TurnCompleted | ToolCallsRequested
"""What `run_model_step` returns."""


def validate_tool_call_id(tool_call_id: str) -> None:
    """Check one tool-call ID.

    Raises:
        RunnerContractError: the ID is empty or contains ``/``.
    """
    if not tool_call_id:
        raise RunnerContractError("a tool call ID must not be empty")
    if "/" in tool_call_id:
        raise RunnerContractError(f"tool call ID {tool_call_id!r} must not contain '/'")


def validate_turn_outcome(outcome: AgentTurnOutcome, *, earlier_tool_call_ids: Iterable[str] = ()) -> None:
    """Check what a runner returned from a model Step.

    Args:
        outcome: the runner's result.
        earlier_tool_call_ids: IDs already used by tool calls of this turn.

    Raises:
        RunnerContractError: the outcome breaks the runner contract.
    """
    match outcome:
        case TurnCompleted():
            return
        case ToolCallsRequested():
            if not outcome.framework_run_state:
                raise RunnerContractError("ToolCallsRequested needs a non-empty run state")
            if not outcome.tool_calls:
                raise RunnerContractError("ToolCallsRequested needs at least one tool call")
            seen = set(earlier_tool_call_ids)
            for call in outcome.tool_calls:
                validate_tool_call_id(call.tool_call_id)
                if call.tool_call_id in seen:
                    raise RunnerContractError(f"tool call ID {call.tool_call_id!r} is used twice in one turn")
                seen.add(call.tool_call_id)


def validate_user_message(message: FrameworkMessage) -> None:
    """Check what `build_user_message` returned.

    Raises:
        RunnerContractError: it is not a `FrameworkMessage`, or its role is not ``user``.
    """
    returned: object = message
    if not isinstance(returned, FrameworkMessage):
        raise RunnerContractError(
            "the runner broke its contract: AgentFrameworkRunner.build_user_message must return a FrameworkMessage, "
            f"got {type(returned).__qualname__} {returned!r:.120}"
        )
    if message.role is not MessageRole.USER:
        raise RunnerContractError(f"build_user_message must return a user message, got role {message.role.value!r}")
