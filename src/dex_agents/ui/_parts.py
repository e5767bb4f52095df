"""One turn's live events as the parts of one AI SDK assistant message (UI message stream protocol v1).

`TurnParts` is fed the turn's events in stream order and returns the chunks
they add, using Pydantic AI's chunk encoders (`pydantic_ai.ui.vercel_ai.response_types`)
plus the three chunks its 2.68 release lacks (`ToolApprovalResponseChunk`,
`ResetStepChunk`, `SteeringMessageChunk`). It is deterministic: the same events
give the same chunks, so a replay of the turn rebuilds the message a live
stream built, part for part.

- Each ``RunModel`` Step execution is one step: ``start-step`` at its first
  event, ``finish-step`` before the next one starts and at the end. The tool
  calls the model asked for stay in that step with their results, as in
  Pydantic AI's own stream.
- A higher attempt of the same ``RunModel`` execution (a retry) withdraws the
  step's parts with ``reset-step`` before its own; events of a lower attempt
  than the highest seen are dropped.
- Text and reasoning deltas open a text or reasoning part (IDs unique in the
  message) and close it when something else follows.
- ``tool_call_deferred`` is ``tool-input-available`` with the arguments as a
  JSON object; ``interrupt_raised`` of an approval is ``tool-approval-request`` (the
  interrupt ID is the approval ID); ``interrupt_resolved`` of an approval is
  ``tool-approval-response`` (a call waiting for its result from outside
  shows no approval parts); ``tool_call_finished`` is
  ``tool-output-available`` (succeeded), ``tool-output-denied`` (rejected,
  expired) or ``tool-output-error`` (any other end).
- A steered message the running turn took is a ``steering-message`` part.
- ``turn_committed`` ends the message: ``finish`` with ``stop`` (completed),
  ``other`` (cancelled), or ``error`` after an ``error`` chunk (failed).

`TurnParts.waiting_for_approval` tells a stream to end with ``finish``
``tool-calls``: every open call of the step waits for a person (an approval,
or a result from outside, which the chat cannot give: it comes through
``submit_tool_result``).
"""

import json
from typing import Literal

from pydantic_ai.ui.vercel_ai.response_types import (
    BaseChunk,
    ErrorChunk,
    FinishChunk,
    FinishReason,
    FinishStepChunk,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    ReasoningStartChunk,
    StartChunk,
    StartStepChunk,
    TextDeltaChunk,
    TextEndChunk,
    TextStartChunk,
    ToolApprovalRequestChunk,
    ToolInputAvailableChunk,
    ToolOutputAvailableChunk,
    ToolOutputDeniedChunk,
    ToolOutputErrorChunk,
)

from dex_agents.domain.events import (
    AgentEvent,
    InterruptRaisedPayload,
    InterruptResolvedPayload,
    ReasoningDeltaPayload,
    SteeredLanding,
    TextDeltaPayload,
    ToolCallDeferredPayload,
    ToolCallFinishedPayload,
    ToolCallStartedPayload,
    TurnCommittedPayload,
    TurnOutcome,
    UserMessageSteeredPayload,
)
from dex_agents.domain.json_values import JsonValue
from dex_agents.domain.tools import ToolCallStatus

__all__ = [
    "SDK_VERSION",
    "ErrorChunk",
    "FinishChunk",
    "ResetStepChunk",
    "StartChunk",
    "SteeringMessageChunk",
    "ToolApprovalResponseChunk",
    "TurnParts",
    "call_input",
    "encode",
]

SDK_VERSION: Literal[7] = 7
"""The AI SDK major the chunks are encoded for (its wire is version 6's)."""


class ToolApprovalResponseChunk(BaseChunk):
    """A person answered a tool call's approval (AI SDK 6+; not among Pydantic AI 2.68's chunks)."""

    type: Literal["tool-approval-response"] = "tool-approval-response"
    approval_id: str
    approved: bool
    reason: str | None = None


class ResetStepChunk(BaseChunk):
    """Withdraws the parts of the current step: a retried model call's superseded attempt (AI SDK 7)."""

    type: Literal["reset-step"] = "reset-step"


class SteeringMessageChunk(BaseChunk):
    """A user message that joined the running turn (AI SDK 7's ``steering-message`` part)."""

    type: Literal["steering-message"] = "steering-message"
    id: str
    parts: list[dict[str, str]]


def encode(chunk: BaseChunk) -> str:
    """Return one chunk as its Server-Sent Event (``data: <JSON>`` and a blank line)."""
    return f"data: {chunk.encode(SDK_VERSION)}\n\n"


def call_input(arguments: str | None) -> JsonValue:
    """Return a call's arguments as the JSON object ``tool-input-available`` carries.

    Arguments that are not a JSON object come as ``{"INVALID_JSON": text}``, as
    Pydantic AI's ``args_as_dict`` shows them.
    """
    if not arguments:
        return {}
    try:
        value: JsonValue = json.loads(arguments)
    except ValueError:
        return {"INVALID_JSON": arguments}
    return value if isinstance(value, dict) else {"INVALID_JSON": arguments}


_DENIED = frozenset({ToolCallStatus.REJECTED, ToolCallStatus.EXPIRED})
_FINISH_REASONS: dict[TurnOutcome, FinishReason] = {
    TurnOutcome.COMPLETED: "stop",
    TurnOutcome.CANCELLED: "other",
    TurnOutcome.FAILED: "error",
}


class TurnParts:
    """Translates the events of one turn into the chunks of its assistant message."""

    def __init__(self, turn_id: str) -> None:
        self.turn_id = turn_id
        self.finished = False
        """Whether ``finish`` was produced (the turn's end is committed)."""
        self._step: str | None = None
        self._attempts: dict[str, int] = {}
        self._tool_steps: set[str] = set()
        self._open: tuple[Literal["text", "reasoning"], str] | None = None
        self._ids = 0
        self._called: dict[str, str] = {}
        self._step_calls: set[str] = set()
        self._done: set[str] = set()
        self._asked: dict[str, str] = {}
        self._answered: set[str] = set()
        self._awaiting: dict[str, str] = {}
        """Calls waiting for their result from outside, by interrupt ID (no chunks: nothing to approve)."""

    @property
    def step_open(self) -> bool:
        """Whether a step was started and not finished."""
        return self._step is not None

    @property
    def waiting_for_approval(self) -> bool:
        """Whether the step's calls have all ended or wait for an approval no one gave yet (at least one)."""
        asked = {**self._asked, **self._awaiting}
        waiting = {call for interrupt, call in asked.items() if interrupt not in self._answered}
        running = self._step_calls - self._done
        return bool(waiting) and running <= waiting

    def feed(self, event: AgentEvent) -> list[BaseChunk]:
        """Return the chunks ``event`` adds to the message (none for events of other turns, or that add nothing)."""
        if event.turn_id != self.turn_id or self.finished:
            return []
        payload = event.payload
        if isinstance(payload, ToolCallStartedPayload):
            self._tool_steps.add(event.step_execution_id)
            return []
        if isinstance(payload, TurnCommittedPayload):
            return self._finish(payload)
        if isinstance(payload, ToolCallFinishedPayload):
            return self._tool_finished(payload)
        if isinstance(payload, InterruptRaisedPayload | InterruptResolvedPayload):
            return self._interrupt(payload)
        if isinstance(payload, UserMessageSteeredPayload):
            if payload.landed is not SteeredLanding.RUNNING_TURN:
                return []
            self._ids += 1
            steered = SteeringMessageChunk(id=f"steered-{self._ids}", parts=[{"type": "text", "text": payload.text}])
            return [*self._close(), steered]
        if isinstance(payload, TextDeltaPayload | ReasoningDeltaPayload | ToolCallDeferredPayload):
            if event.step_execution_id in self._tool_steps:
                return []  # text a tool wrote in its own Step is not the model's
            chunks = self._enter_model_step(event)
            if chunks is None:
                return []
            return chunks + self._model_part(payload)
        return []

    def _interrupt(self, payload: InterruptRaisedPayload | InterruptResolvedPayload) -> list[BaseChunk]:
        if isinstance(payload, InterruptResolvedPayload):
            self._answered.add(payload.interrupt_id)
            if payload.kind != "approval":
                return []
            reason = None if payload.approved else payload.rejection_message
            return [
                ToolApprovalResponseChunk(approval_id=payload.interrupt_id, approved=payload.approved, reason=reason)
            ]
        if payload.kind != "approval":
            # A call waiting for its result from outside has nothing for the chat to approve.
            self._awaiting[payload.interrupt_id] = payload.tool_call_id
            return []
        self._asked[payload.interrupt_id] = payload.tool_call_id
        return [ToolApprovalRequestChunk(approval_id=payload.interrupt_id, tool_call_id=payload.tool_call_id)]

    def close_step(self) -> list[BaseChunk]:
        """Return the chunks that end the open part and step, for a stream that stops while the turn waits."""
        chunks = self._close()
        if self._step is not None:
            chunks.append(FinishStepChunk())
        return chunks

    def _enter_model_step(self, event: AgentEvent) -> list[BaseChunk] | None:
        """Return what opens the event's model step (``None``: a superseded attempt's event, dropped)."""
        step, attempt = event.step_execution_id, event.attempt
        seen = self._attempts.get(step)
        if seen is not None and attempt < seen:
            return None
        if step == self._step:
            if attempt == seen:
                return []
            self._attempts[step] = attempt
            self._open = None
            self._step_calls.clear()
            return [ResetStepChunk()]
        chunks = self.close_step()
        self._step, self._attempts[step] = step, attempt
        self._step_calls = set()
        chunks.append(StartStepChunk())
        return chunks

    def _model_part(
        self, payload: TextDeltaPayload | ReasoningDeltaPayload | ToolCallDeferredPayload
    ) -> list[BaseChunk]:
        if isinstance(payload, ToolCallDeferredPayload):
            self._called[payload.tool_call_id] = payload.tool_name
            self._step_calls.add(payload.tool_call_id)
            available = ToolInputAvailableChunk(
                tool_call_id=payload.tool_call_id, tool_name=payload.tool_name, input=call_input(payload.arguments)
            )
            return [*self._close(), available]
        kind: Literal["text", "reasoning"] = "text" if isinstance(payload, TextDeltaPayload) else "reasoning"
        chunks: list[BaseChunk] = []
        if self._open is None or self._open[0] != kind:
            chunks += self._close()
            self._ids += 1
            part_id = f"{kind}-{self._ids}"
            self._open = (kind, part_id)
            chunks.append(TextStartChunk(id=part_id) if kind == "text" else ReasoningStartChunk(id=part_id))
        part_id = self._open[1]
        if kind == "text":
            chunks.append(TextDeltaChunk(id=part_id, delta=payload.text))
        else:
            chunks.append(ReasoningDeltaChunk(id=part_id, delta=payload.text))
        return chunks

    def _tool_finished(self, payload: ToolCallFinishedPayload) -> list[BaseChunk]:
        call = payload.tool_call_id
        if call in self._done:
            return []
        self._done.add(call)
        chunks: list[BaseChunk] = self._close()
        if call not in self._called:  # its deferral was not retained: announce the call before its end
            self._called[call] = payload.tool_name
            chunks.append(ToolInputAvailableChunk(tool_call_id=call, tool_name=payload.tool_name, input={}))
        if payload.status is ToolCallStatus.SUCCEEDED:
            chunks.append(ToolOutputAvailableChunk(tool_call_id=call, output=payload.output or ""))
        elif payload.status in _DENIED:
            chunks.append(ToolOutputDeniedChunk(tool_call_id=call))
        else:
            text = payload.error or f"the tool call ended {payload.status.value}"
            chunks.append(ToolOutputErrorChunk(tool_call_id=call, error_text=text))
        return chunks

    def _finish(self, payload: TurnCommittedPayload) -> list[BaseChunk]:
        chunks = self.close_step()
        self._step = None
        if payload.outcome is TurnOutcome.FAILED:
            chunks.append(ErrorChunk(error_text=payload.error or "the turn failed"))
        chunks.append(FinishChunk(finish_reason=_FINISH_REASONS[payload.outcome]))
        self.finished = True
        return chunks

    def _close(self) -> list[BaseChunk]:
        if self._open is None:
            return []
        kind, part_id = self._open
        self._open = None
        return [TextEndChunk(id=part_id) if kind == "text" else ReasoningEndChunk(id=part_id)]
