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

- a model Step's ``CallToolsNode`` (`quiet_model_step_events`) shows the
  ``DeferredToolRequestsEvent`` only for the calls a plain run defers too
  (tools of kind ``external`` in ``calls``, ``unapproved`` in ``approvals``),
  and none when there are none (the session answers the calls it deferred
  itself: no run ends for them); in a resumed run it drops the
  ``FunctionToolCallEvent`` of each call whose result the run was given (the
  model Step that asked for the call already showed it, validated, where a
  plain run shows it), except for the calls a plain run deferred (an
  approval, an external result: the user's resumed run shows them again, an
  approved one validated; a call only the session's `ToolPolicy` asks approval
  for counts as one); the
  results are shown there, in model order, before the next model request, as
  a plain run shows them after its calls ran;
- a tool Step's ``CallToolsNode`` (`silence_tool_step_events`) shows nothing
  (the call was shown by its model Step, the result is shown by the next one)
  but the ``DeferredToolRequestsEvent`` of a tool that deferred its call while
  it ran (``CallDeferred``, ``ApprovalRequired``), as a plain run shows it after
  the response's calls, at the ``run_step`` of the request that asked for the
  call; events a tool emits itself (``ctx`` custom events) still pass;
- a resumed model Step's ``UserPromptNode`` (`continue_run_step`) starts the
  run with the turn's prompt as ``ctx.prompt`` (a resumed run has none: its
  output functions, validators, instructions and dynamic toolsets saw
  ``None``) at the ``run_step`` of the response it answers (`resumed_run_step`: the
  number of model responses of the turn so far), so the answering
  ``CallToolsNode`` and the next model request have the ``run_step`` of a
  plain run. A plain run ends at a response with a call asking for approval
  or for an external result, and the user's resumed run counts from 0 again:
  so does the session, from the last such response.

Two tools of one response that both defer while they run show one
``DeferredToolRequestsEvent`` each (a plain run shows one for both).

Each patch sets an attribute on one node instance (the node's private
``_run_stream`` or ``_wrapped_stream``, or its ``run``); with a Pydantic AI version that lacks the name
nothing is patched and the events are as before (more of them, never fewer).
"""

import dataclasses
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import aclosing
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    AgentStreamEvent,
    DeferredToolRequestsEvent,
    FunctionToolCallEvent,
    ModelMessage,
    ModelResponse,
)

RUN_STREAM = "_run_stream"
"""The ``CallToolsNode`` method that yields the node's own events, before any dispatch or wrapper."""

_WRAPPED_STREAM = "_wrapped_stream"
"""The ``CallToolsNode`` method that builds the listeners' context and wraps the node's events for them."""


def _filter_node_stream(
    node: object,
    keep: Callable[[AgentStreamEvent], bool],
    *,
    replace: Callable[[AgentStreamEvent], AgentStreamEvent | None] = lambda event: event,
) -> None:
    original = getattr(node, RUN_STREAM, None)
    if original is None:
        return

    async def filtered(ctx: Any) -> AsyncIterator[AgentStreamEvent]:
        async with aclosing(original(ctx)) as events:
            async for event in events:
                if keep(event) and (shown := replace(event)) is not None:
                    yield shown

    setattr(node, RUN_STREAM, filtered)


def quiet_model_step_events(
    node: Any, kind: Callable[[str], str | None], plain_deferred: Collection[str], approved: Collection[str]
) -> None:
    """Drop the events of a model Step's ``CallToolsNode`` that a plain run would not show (see above).

    ``kind``: a tool's original ``kind`` by its name; ``plain_deferred``: the IDs of the turn's calls a
    plain run would have deferred (an approval, an external result); ``approved``: those approved, whose
    call event a plain resumed run shows validated (it validates a ``ToolApproved`` call again).
    """
    if not Agent.is_call_tools_node(node):
        return
    answered = frozenset(node.tool_call_results or ()) - frozenset(plain_deferred)

    def keep(event: AgentStreamEvent) -> bool:
        return not (isinstance(event, FunctionToolCallEvent) and event.part.tool_call_id in answered)

    def shown(event: AgentStreamEvent) -> AgentStreamEvent | None:
        if isinstance(event, FunctionToolCallEvent) and event.part.tool_call_id in approved:
            return dataclasses.replace(event, args_valid=True)
        return _plain_requests(event, kind)

    _filter_node_stream(node, keep, replace=shown)


def _plain_requests(event: AgentStreamEvent, kind: Callable[[str], str | None]) -> AgentStreamEvent | None:
    """A ``DeferredToolRequestsEvent`` holding only what a plain run defers, or ``None`` when nothing is left."""
    if not isinstance(event, DeferredToolRequestsEvent):
        return event
    requests = event.requests
    calls = [call for call in requests.calls if kind(call.tool_name) == "external"]
    approvals = [
        *(call for call in requests.calls if kind(call.tool_name) == "unapproved"),
        *requests.approvals,
    ]
    if not calls and not approvals:
        return None
    if len(calls) + len(approvals) == len(requests.calls) + len(requests.approvals) and calls == requests.calls:
        return event
    kept = {call.tool_call_id for call in [*calls, *approvals]}
    metadata = {call_id: value for call_id, value in requests.metadata.items() if call_id in kept}
    return DeferredToolRequestsEvent(DeferredToolRequests(calls=calls, approvals=approvals, metadata=metadata))


def silence_tool_step_events(node: Any, run_step: int) -> None:
    """Drop every event of a tool Step's ``CallToolsNode`` but a ``DeferredToolRequestsEvent`` (see above).

    The node runs at ``run_step``, the step of the model request that asked for the call, so the event
    it shows has a plain run's ``run_step``.
    """
    if not Agent.is_call_tools_node(node):
        return
    _filter_node_stream(node, lambda event: isinstance(event, DeferredToolRequestsEvent))
    # The node's stream (and the listeners' context) may be built before its ``run``: set the step there.
    wrapped = getattr(node, _WRAPPED_STREAM, None)
    if wrapped is None:
        return

    def at_run_step(ctx: Any) -> Any:
        ctx.state.run_step = run_step
        return wrapped(ctx)

    setattr(node, _WRAPPED_STREAM, at_run_step)


def _continue_at(node: Any, run_step: int, prompt: object) -> None:
    original: Callable[[Any], Any] = node.run

    async def run(ctx: Any) -> Any:
        ctx.state.run_step = run_step
        if prompt is not None and ctx.deps.prompt is None:
            ctx.deps.prompt = prompt
        return await original(ctx)

    node.run = run


def continue_run_step(node: Any, run_step: int, prompt: object = None) -> None:
    """Make a resumed run's ``UserPromptNode`` start the run at ``run_step``, its context showing ``prompt``.

    ``prompt`` is the turn's (``None``: none, as a plain run resumed after a deferred call has none); the
    run's own ``ctx.prompt`` is kept when it has one (steered messages). Nothing changes for step 0 and
    no prompt.
    """
    if (run_step > 0 or prompt is not None) and Agent.is_user_prompt_node(node):
        _continue_at(node, run_step, prompt)


def resumed_run_step(turn_messages: Sequence[ModelMessage], plain_deferred: Collection[str]) -> int:
    """The ``run_step`` a model Step resuming ``turn_messages`` starts at (see above).

    ``plain_deferred``: the IDs of the turn's calls a plain run defers (an approval, an external result).
    """
    run_step = 0
    for message in turn_messages:
        if not isinstance(message, ModelResponse):
            continue
        run_step += 1
        if any(call.tool_call_id in plain_deferred for call in message.tool_calls):
            run_step = 0
    return run_step
