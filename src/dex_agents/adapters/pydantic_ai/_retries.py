"""Tool retries across a turn's Steps, counted as one plain run counts them.

In a plain run Pydantic AI's ``ToolManager`` keeps each tool's retry count
(``ctx.retries[tool]``) across the run's steps: a step in which the tool was
charged a retry (a ``retried`` return whose ``retry.attempt`` is set:
``ModelRetry``, invalid arguments, an unknown tool) adds one; a step in which
it returned successfully (and was charged nothing) resets it. ``ToolFailed``
touches neither. A failure when the count has reached the tool's
``max_retries`` raises ``UnexpectedModelBehavior`` instead of a retry.

A turn's steps are split over Steps here (and every model Step but a live run's
is a fresh run that starts counting at zero), so the count is rebuilt from the
turn's messages (`turn_retries`), which hold every step's returns with their
``retry`` info:

- the model Step gives each requested call its tool's count
  (`dex_agents.adapters.pydantic_ai._tool_state`), and a fresh model Step run
  gets the turn's counts before each model request (its ``prepare_tools`` sees
  them) and before it handles a response's calls (for its own validation
  retries): `TurnRetriesCapability`;
- the tool Step sets its tool's count where Pydantic AI's ``ToolManager``
  reads it (`seed_tool_retries`), so the tool sees ``ctx.retry`` as in a plain
  run and ``ToolManager`` applies the budget itself;
- a resumed run answers a retried call with ``ModelRetry`` and then puts the
  tool Step's own ``retried`` part in its place, in the request and in the
  ``FunctionToolResultEvent`` listeners see (`ExactReturnsCapability`):
  Pydantic AI builds a resumed retry without ``retry.attempt``, which the next
  count reads.
"""

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import AgentStreamEvent, ModelMessage, ModelRequest, ToolResultEvent, ToolReturnPart
from pydantic_ai.tools import RunContext

from dex_agents.adapters.pydantic_ai._run_nodes import RUN_STREAM


def turn_retries(messages: Iterable[ModelMessage]) -> dict[str, int]:
    """Return each tool's retry count after ``messages`` (a turn's, in order), as ``ToolManager`` carries it."""
    retries: dict[str, int] = {}
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        failed: set[str] = set()
        succeeded: set[str] = set()
        for part in message.parts:
            if not isinstance(part, ToolReturnPart):
                continue
            if part.outcome == "retried" and part.retry is not None and part.retry.attempt is not None:
                failed.add(part.tool_name)
            elif part.outcome == "success":
                succeeded.add(part.tool_name)
        if not failed and not succeeded:
            continue
        # ToolManager.for_run_step: drop the tools that succeeded, then count each failed one up from its old count.
        carried = {name: count for name, count in retries.items() if name not in succeeded}
        carried.update({name: retries.get(name, 0) + 1 for name in failed})
        retries = carried
    return retries


def seed_tool_retries(ctx: RunContext[Any], retries: Mapping[str, int]) -> None:
    """Set the retry counts of the run step's ``ToolManager`` (what ``ctx.retry`` and the retry budget read)."""
    manager = ctx.tool_manager
    if manager is None or manager.ctx is None:
        return
    manager.ctx.retries.clear()
    manager.ctx.retries.update(retries)


@dataclass
class TurnRetriesCapability(AbstractCapability[Any]):
    """Gives a model Step run the turn's retry counts before it handles each response's tool calls."""

    turn_start: int = 0
    """Where the turn's messages start in the run's messages."""

    async def before_node_run(self, ctx: RunContext[Any], *, node: Any) -> Any:
        """Seed the counts from the turn's messages before a ``CallToolsNode`` and a ``ModelRequestNode``.

        Before a model request the step's ``ToolManager`` is not built yet: the current one is given the
        counts after the request's returns, which ``for_run_step`` carries over (a resumed run's answers
        charge nothing there), so ``prepare_tools`` and the step's calls see them.
        """
        if Agent.is_call_tools_node(node):
            seed_tool_retries(ctx, turn_retries(ctx.messages[self.turn_start :]))
        elif Agent.is_model_request_node(node):
            messages = list(ctx.messages[self.turn_start :])
            if not messages or messages[-1] is not node.request:
                messages.append(node.request)
            seed_tool_retries(ctx, turn_retries(messages))
        return node

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Opt out of agent specs."""
        return None


@dataclass
class ExactReturnsCapability(AbstractCapability[Any]):
    """Puts given return parts in place of a resumed run's answers to the same calls."""

    parts: Mapping[str, ToolReturnPart] = field(default_factory=dict)
    """The parts by call ID."""

    async def before_node_run(self, ctx: RunContext[Any], *, node: Any) -> Any:
        """Show event listeners the given parts in the node's ``FunctionToolResultEvent``s too."""
        if self.parts and Agent.is_call_tools_node(node):
            original = getattr(node, RUN_STREAM, None)
            if original is not None:
                parts = self.parts

                async def exact(run_ctx: Any) -> AsyncIterator[AgentStreamEvent]:
                    async with aclosing(original(run_ctx)) as events:
                        async for event in events:
                            kept = parts.get(event.part.tool_call_id) if isinstance(event, ToolResultEvent) else None
                            yield event if kept is None else replace(event, part=kept)

                setattr(node, RUN_STREAM, exact)
        return node

    async def after_node_run(self, ctx: RunContext[Any], *, node: Any, result: Any) -> Any:
        """Replace the answers in the request that follows the calls."""
        if self.parts and Agent.is_call_tools_node(node) and Agent.is_model_request_node(result):
            request = result.request
            request.parts = [
                self.parts.get(part.tool_call_id, part) if isinstance(part, ToolReturnPart) else part
                for part in request.parts
            ]
        return result

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Opt out of agent specs."""
        return None


@dataclass
class ToolRetriesCapability(AbstractCapability[Any]):
    """Gives a tool Step run its tool's retry count in the turn before it calls the tool."""

    retries: Mapping[str, int] = field(default_factory=dict)
    """The counts by tool name."""

    async def before_node_run(self, ctx: RunContext[Any], *, node: Any) -> Any:
        """Seed the counts before the ``CallToolsNode``."""
        if self.retries and Agent.is_call_tools_node(node):
            seed_tool_retries(ctx, self.retries)
        return node

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Opt out of agent specs."""
        return None
