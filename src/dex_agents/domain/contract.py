"""Type checks of what a runner returns, at the contract boundary.

The value classes do not check their field types (attrs does not), so a
runner returning a ``str`` from ``run_model_step``, or a `TurnCompleted`
holding a ``str`` where a `FrameworkMessage` belongs, would otherwise fail far
from its cause (``'str' object has no attribute 'usage'``). Each check raises
`RunnerContractError` naming the runner method, what the contract asks for,
and what came back (its type and a short ``repr``).
"""

from collections.abc import Iterable

from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.messages import FrameworkMessage, MessageRole
from dex_agents.domain.tools import ToolPolicy
from dex_agents.domain.turns import DeferredToolCall, ToolCallsRequested, TurnCompleted
from dex_agents.domain.usage import AgentUsage

_REPR_CHARS = 120


def described(value: object) -> str:
    """``value`` for an error message: its type and the start of its ``repr``."""
    shown = repr(value)
    if len(shown) > _REPR_CHARS:
        shown = shown[:_REPR_CHARS] + "..."
    return f"{type(value).__qualname__} {shown}"


def broken(method: str, expected: str, got: object) -> RunnerContractError:
    """The error for a runner whose ``method`` returned ``got`` where the contract asks for ``expected``."""
    return RunnerContractError(
        f"the runner broke its contract: AgentFrameworkRunner.{method} must return {expected}, got {described(got)}"
    )


def check_framework_message(method: str, message: object, *, what: str = "a FrameworkMessage") -> FrameworkMessage:
    """Return ``message`` when it is a well-formed `FrameworkMessage`.

    Raises:
        RunnerContractError: it is not one, or a field has the wrong type.
    """
    if not isinstance(message, FrameworkMessage):
        raise broken(method, what, message)
    role: object = message.role
    if not isinstance(role, MessageRole):
        raise broken(method, f"{what} whose role is a MessageRole", role)
    fields: dict[str, object] = {
        "framework_item": message.framework_item,
        "text": message.text,
        "tool_call_id": message.tool_call_id,
        "tool_name": message.tool_name,
    }
    for name, value in fields.items():
        if not isinstance(value, str) and (name == "framework_item" or value is not None):
            raise broken(
                method, f"{what} whose {name} is text" + ("" if name == "framework_item" else " or None"), value
            )
    ids: tuple[object, ...] = message.tool_call_ids
    if not all(isinstance(i, str) for i in ids):
        raise broken(method, f"{what} whose tool_call_ids are text", ids)
    return message


def check_usage(method: str, usage: object) -> None:
    """Check an outcome's usage.

    Raises:
        RunnerContractError: it is not an `AgentUsage`.
    """
    if not isinstance(usage, AgentUsage):
        raise broken(method, "an outcome whose usage is an AgentUsage", usage)


def check_turn_outcome(outcome: object) -> TurnCompleted | ToolCallsRequested:
    """Return what ``run_model_step`` returned when its types are the contract's.

    Raises:
        RunnerContractError: it is not a `TurnCompleted` or `ToolCallsRequested`, or holds a value of the wrong type.
    """
    method = "run_model_step"
    if isinstance(outcome, TurnCompleted):
        messages: tuple[object, ...] = outcome.new_messages
        _check_each(method, messages, "TurnCompleted.new_messages of FrameworkMessage")
        check_usage(method, outcome.usage)
        return outcome
    if isinstance(outcome, ToolCallsRequested):
        state: object = outcome.framework_run_state
        if not isinstance(state, str):
            raise broken(method, "ToolCallsRequested whose framework_run_state is text", state)
        calls: tuple[object, ...] = outcome.tool_calls
        for call in calls:
            _check_call(method, call)
        check_usage(method, outcome.usage)
        return outcome
    raise broken(method, "TurnCompleted or ToolCallsRequested", outcome)


def _check_each(method: str, messages: Iterable[object], what: str) -> None:
    for message in messages:
        check_framework_message(method, message, what=what)


def _check_call(method: str, call: object) -> None:
    if not isinstance(call, DeferredToolCall):
        raise broken(method, "ToolCallsRequested.tool_calls of DeferredToolCall", call)
    texts: dict[str, object] = {
        "tool_call_id": call.tool_call_id,
        "tool_name": call.tool_name,
        "arguments": call.arguments,
    }
    for name, value in texts.items():
        if not isinstance(value, str):
            raise broken(method, f"DeferredToolCall whose {name} is text", value)
    policy: object = call.policy
    if not isinstance(policy, ToolPolicy):
        raise broken(method, "DeferredToolCall whose policy is a ToolPolicy (turn.resolve_tool_policy)", policy)
    state: object = call.framework_state
    if state is not None and not isinstance(state, str):
        raise broken(method, "DeferredToolCall whose framework_state is text or None", state)
    sequential: object = call.sequential
    if not isinstance(sequential, bool):
        raise broken(method, "DeferredToolCall whose sequential is a bool", sequential)
