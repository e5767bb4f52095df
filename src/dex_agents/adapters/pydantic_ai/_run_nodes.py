"""What a Step's run shows its event listeners and its ``RunContext.run_step``: what one plain run shows.

A turn runs as several Pydantic AI runs (one per model Step, one per tool Step
that is not direct), so without care an event stream handler (``run(event_stream_handler=...)``,
a ``ProcessEventStream`` capability, an ``@agent.on_event`` or capability
``on_event`` listener) would see a tool call three times, its result twice and
a ``DeferredToolRequestsEvent`` after every response, and each resumed run
would count ``run_step`` from 0. The model and tool Step capabilities fix both
at the node that makes the difference, before any listener sees an event (the
listeners are dispatched on the node's own event stream, inside every
capability's wrapper, so only the node's stream can be filtered for all of
them):

- a model Step's ``CallToolsNode`` (`quiet_model_step_events`) drops the
  ``DeferredToolRequestsEvent`` (the session answers the calls: no run ends
  for them) and, in a resumed run, the ``FunctionToolCallEvent`` of each call
  whose result the run was given (the model Step that asked for the call
  already showed it, validated, where a plain run shows it); the results are
  shown there, in model order, before the next model request, as a plain run
  shows them after its calls ran;
- a tool Step's ``CallToolsNode`` (`silence_tool_step_events`) shows nothing:
  the call was shown by its model Step, the result is shown by the next one;
  events a tool emits itself (``ctx`` custom events) still pass;
- a resumed model Step's ``UserPromptNode`` (`continue_run_step`) starts the
  run at the ``run_step`` of the response it answers (`resumed_run_step`: the
  number of model responses of the turn so far), so the answering
  ``CallToolsNode`` and the next model request have the ``run_step`` of a
  plain run. A plain run ends at a response with a call asking for approval
  and the user's resumed run counts from 0 again: so does the session, from
  the last such response.

Each patch sets an attribute on one node instance (the node's private
``_run_stream`` or its ``run``); with a Pydantic AI version that lacks the name
nothing is patched and the events are as before (more of them, never fewer).
"""

from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import aclosing
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    AgentStreamEvent,
    DeferredToolRequestsEvent,
    FunctionToolCallEvent,
    ModelMessage,
    ModelResponse,
)

_RUN_STREAM = "_run_stream"
"""The ``CallToolsNode`` method that yields the node's own events, before any dispatch or wrapper."""


def _filter_node_stream(node: object, keep: Callable[[AgentStreamEvent], bool]) -> None:
    original = getattr(node, _RUN_STREAM, None)
    if original is None:
        return

    async def filtered(ctx: Any) -> AsyncIterator[AgentStreamEvent]:
        async with aclosing(original(ctx)) as events:
            async for event in events:
                if keep(event):
                    yield event

    setattr(node, _RUN_STREAM, filtered)


def quiet_model_step_events(node: Any) -> None:
    """Drop the events of a model Step's ``CallToolsNode`` that a plain run would not show (see above)."""
    if not Agent.is_call_tools_node(node):
        return
    answered = frozenset(node.tool_call_results or ())

    def keep(event: AgentStreamEvent) -> bool:
        if isinstance(event, DeferredToolRequestsEvent):
            return False
        return not (isinstance(event, FunctionToolCallEvent) and event.part.tool_call_id in answered)

    _filter_node_stream(node, keep)


def silence_tool_step_events(node: Any) -> None:
    """Drop every event of a tool Step's ``CallToolsNode`` (see above)."""
    if Agent.is_call_tools_node(node):
        _filter_node_stream(node, lambda _event: False)


def continue_run_step(node: Any, run_step: int) -> None:
    """Make a resumed run's ``UserPromptNode`` start the run at ``run_step`` (no change for 0)."""
    if run_step <= 0 or not Agent.is_user_prompt_node(node):
        return
    original: Callable[[Any], Any] = node.run

    async def run(ctx: Any) -> Any:
        ctx.state.run_step = run_step
        return await original(ctx)

    node.run = run  # type: ignore[method-assign]


def resumed_run_step(turn_messages: Sequence[ModelMessage], asked_approval: Collection[str]) -> int:
    """The ``run_step`` a model Step resuming ``turn_messages`` starts at (see above).

    ``asked_approval``: the IDs of the turn's calls that asked for approval.
    """
    run_step = 0
    for message in turn_messages:
        if not isinstance(message, ModelResponse):
            continue
        run_step += 1
        if any(call.tool_call_id in asked_approval for call in message.tool_calls):
            run_step = 0
    return run_step
