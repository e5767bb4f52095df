"""What the tool-Step tests' agents share: deps, a model no tool Step may call, and one tool per outcome."""

from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent, ApprovalRequired, CallDeferred, ModelRetry, ToolFailed
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo


def never_called(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    raise AssertionError("a tool Step must not call the model")


@dataclass(frozen=True)
class Deps:
    session_id: str


def add_outcome_tools(agent: Agent[Any, Any]) -> None:
    """Give ``agent`` a function tool for each way a tool call ends.

    ``returns_structure`` (a dict), ``retry_me`` and ``retry_without_budget``
    (``ModelRetry`` within and past the budget), ``fail_me`` (``ToolFailed``),
    ``ask_approval`` (``ApprovalRequired``), ``defer_me`` (``CallDeferred``) and
    ``crash`` (an exception).
    """

    @agent.tool_plain
    def returns_structure() -> dict[str, int]:
        return {"count": 2}

    @agent.tool_plain
    def retry_me() -> str:
        raise ModelRetry("please give an order ID")

    @agent.tool_plain(retries=0)
    def retry_without_budget() -> str:
        raise ModelRetry("no budget left")

    @agent.tool_plain
    def fail_me() -> str:
        raise ToolFailed("the order is locked")

    @agent.tool_plain
    def ask_approval() -> str:
        raise ApprovalRequired()

    @agent.tool_plain
    def defer_me() -> str:
        raise CallDeferred()

    @agent.tool_plain
    def crash() -> str:
        raise ValueError("disk full")
