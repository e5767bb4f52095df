"""``ResumeTurn``: waits for the results of one model response's tool calls.

Input: the number of results to wait for. Waits for that many
``TOOL_CALL_RESULTS`` messages. (Input 0 comes from ``RunModel``, when a
steered user message waits at a model call that resumes the turn: nothing is
joined, the messages are taken and the model comes next.) When every record
of the active turn is final, the session runs the model again (next: ``RunModel``, or ``CompactHistory``
first when the context is over budget); if a started record is still
unfinished, it waits again for the results still missing.

When the started records are final but ``queued`` ones are left (the later
waves of a response with ``sequential`` calls, `dex_agents.domain.tool_order`),
it starts the next wave instead: each of its records becomes ``pending``, or
``awaiting_approval`` with its interrupt raised, and next are their Steps plus
``ResumeTurn`` waiting for their results. Nothing else writes those records
while they are queued, so no Step's write is lost. When the turn was
cancelled (`TurnCancelRequest`), every queued record is recorded ``cancelled``
instead (no Step waits for their results, so none is published) and the
model comes next, which ends the turn.

The usage a delivered call's tool Step reported (`AgentToolCall.usage`: agent
runs inside the tool) is added to the session's here, once per result, with a
``usage_recorded`` event when it holds model usage (`UsageMeter.add_from_tools`).

The same wait takes every steered user message queued by then
(``STEERED_USER_MESSAGES``, without waiting for one): this is the turn's
model-call boundary, after every tool result of the model's last response.
They are kept for the next ``RunModel`` (``STEERED_MESSAGES``), in the order
they were sent, each announced with ``user_message_steered``
(``running_turn``).
"""

from collections.abc import Sequence

import attrs

from dex_agents.application.compaction import model_movement
from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import GoTo, GoToMany, Next, StepName, WaitAgain
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import (
    CancelRequestStore,
    SessionStateStore,
    SteeredMessageStore,
    ToolCallStore,
)
from dex_agents.application.steps._shared import ToolCallStarter, UsageMeter
from dex_agents.application.wiring import Wired
from dex_agents.domain import events as ev
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.tool_order import next_wave, release
from dex_agents.domain.tools import AgentToolCall, ToolCallCompleted, ToolCallStatus
from dex_agents.domain.turn_control import cancel_rejection_message
from dex_agents.domain.usage import AgentUsage


@attrs.frozen(kw_only=True)
class ResumeTurn(Wired):
    """Resumes the turn once every tool call of it has its result."""

    session_state: SessionStateStore
    tool_calls: ToolCallStore
    options: AgentSessionOptions
    steered: SteeredMessageStore
    events: AgentEventWriter
    cancel_request: CancelRequestStore
    usage_meter: UsageMeter
    tool_starter: ToolCallStarter

    async def execute(self, delivered: Sequence[ToolCallCompleted], steered: Sequence[AgentUserMessage] = ()) -> Next:
        """Go on to the model, or wait for the results still missing; keep ``steered`` for the next model call."""
        # The records, not the messages, say whether the turn can go on; the messages say whose usage to count.
        taken = [message for message in steered if not message.is_blank]
        if taken:
            self.steered.set((*self.steered.get(), *taken))
            for message in taken:
                self.events.write(
                    ev.user_message_steered(message.client_message_id, message.text, ev.SteeredLanding.RUNNING_TURN)
                )
        state = self.session_state.get()
        assert state is not None, "the session has not started"
        assert state.active_turn_id is not None, "ResumeTurn needs an active turn"
        if not delivered and state.resumed_by_call:
            # Sent by RunModel after a call's Step resumed the turn: nothing to join, the steered messages taken.
            taken_state = state.with_steering_taken()
            self.session_state.set(taken_state)
            return model_movement(taken_state, self.options.compaction)
        records = [record for record in self.tool_calls.all() if record.turn_id == state.active_turn_id]
        self._count_usage(delivered, records)
        unfinished = sum(1 for r in records if not r.is_final and r.status is not ToolCallStatus.QUEUED)
        if unfinished:
            return WaitAgain(input=unfinished)
        wave = next_wave(records)
        if wave:
            cancel = self.cancel_request.get()
            if cancel is None or not cancel.applies_to(state.active_turn_id):
                return self._start(wave)
            reason = cancel_rejection_message(cancel.reason)
            for record in records:
                if record.status is ToolCallStatus.QUEUED:
                    cancelled = record.cancel(reason)
                    self.tool_calls.put(cancelled)
                    self.events.write(
                        ev.tool_call_finished(
                            record.tool_call_id, record.tool_name, cancelled.status, error=cancelled.rejection_message
                        )
                    )
        resumed = state.resume_model()
        self.session_state.set(resumed)
        return model_movement(resumed, self.options.compaction)

    def _start(self, wave: Sequence[AgentToolCall]) -> Next:
        """Start the next wave of queued calls, and wait for their results."""
        starting = self.tool_starter.starting()
        movements: list[GoTo] = []
        for queued in wave:
            record = release(queued)
            starting.store(record)
            movements.append(starting.start(record))
        starting.store_interrupts(unchanged_too=False)
        movements.append(GoTo(step=StepName.RESUME_TURN, input=len(wave)))
        return GoToMany(movements=movements)

    def _count_usage(self, delivered: Sequence[ToolCallCompleted], records: Sequence[AgentToolCall]) -> None:
        """Add the usage of the delivered calls' tool Steps to the session's (each call once)."""
        ids = {(result.turn_id, result.tool_call_id) for result in delivered}
        used = [r.usage for r in records if r.usage is not None and r.is_final and (r.turn_id, r.tool_call_id) in ids]
        if not used:
            return
        recorded = sum(used, AgentUsage())
        self.usage_meter.add_from_tools(recorded)
