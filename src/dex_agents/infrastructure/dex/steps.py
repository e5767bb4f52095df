"""The Dex Steps of a session Flow: each builds its use case, runs it, and maps its decision.

Every Step reads the session through `dex_session_ports` over its handler's
context, takes the agent's runner, options and clock from `StepDependencies`,
and builds its use case with the use case's own ``wired`` factory, so adding a
port to a use case changes nothing here. What each Step is (its use case,
loads, locks and what it waits on) is its declaration in
`dex_agents.application.declarations`; here are the Dex conditions of its wait
(a user message, an approval with its deadline Timer, tool results) and the
Channel messages it hands its use case.
Model and tool Steps heartbeat in the background while the runner works.
Their base, `SessionStep`, and `StepDependencies` live in
`dex_agents.infrastructure.dex.session_step`.
"""

import logging
from typing import Any, ClassVar

import dex

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import StepName
from dex_agents.application.steps.await_tool_approval import AwaitToolApproval
from dex_agents.application.steps.await_user_message import AwaitUserMessage
from dex_agents.application.steps.call_tool import CallSingleAttemptTool, CallTool
from dex_agents.application.steps.compact_history import CompactHistory, RecordCompactionFailure
from dex_agents.application.steps.reconcile_tool_call import ReconcileToolCall
from dex_agents.application.steps.record_tool_failure import RecordToolFailure, RecordToolOutcomeUnknown
from dex_agents.application.steps.record_turn_failure import (
    RecordResumeFailure,
    RecordStartFailure,
    RecordTurnFailure,
)
from dex_agents.application.steps.resume_turn import ResumeTurn
from dex_agents.application.steps.run_model import RunModel
from dex_agents.application.steps.start_agent_session import StartAgentSession
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.infrastructure.dex.persistence import (
    INTERRUPT_RESOLUTIONS,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TOOL_CALL_RESULTS,
)
from dex_agents.infrastructure.dex.session_step import (
    InputT,
    SessionStep,
    active_turn,
    heartbeat_fn,
    heartbeating,
    recovery_detail,
    step_call,
)

STEERED_MESSAGES_PER_BOUNDARY = 100
"""Steered messages one model-call boundary takes at most (``at_most``); the rest join the next one."""
_log = logging.getLogger(__name__)


class StartAgentSessionStep(SessionStep[AgentSessionStartInput]):
    """Dex Step of `StartAgentSession`."""

    name = StepName.START_AGENT_SESSION

    async def execute(self, context: dex.AsyncContext, input: AgentSessionStartInput) -> dex.StepDecision:
        """Initialize the session."""
        deps = self.deps
        with deps.attempt(context, None, (self.name, input)) as events:
            use_case = self.build(StartAgentSession, context, events)
            next_ = await use_case.execute(input)
        return deps.decide(self.name, next_)


class AwaitUserMessageStep(SessionStep[None]):
    """Dex Step of `AwaitUserMessage`."""

    name = StepName.AWAIT_USER_MESSAGE

    def _use_case(self, context: dex.AsyncContext, events: AgentEventWriter) -> AwaitUserMessage:
        return self.build(AwaitUserMessage, context, events)

    async def wait_for(self, context: dex.AsyncContext, input: None) -> dex.Wait:
        """Announce the committed end of the last turn, then wait for one steered or else queued user message."""
        try:
            with self.deps.attempt(context, None) as events:
                self._use_case(context, events).announce_finished_turn()
        except Exception:  # noqa: BLE001 - a live event is best effort; a failed wait_for would fail the Flow
            _log.warning("could not announce the committed turn", exc_info=True)
        # any_of takes the first ready condition in argument order: steered messages first.
        return dex.Wait.any_of(STEERED_USER_MESSAGES.for_one(), QUEUED_USER_MESSAGES.for_one())

    async def execute(self, context: dex.AsyncContext, input: None) -> dex.StepDecision:
        """Start a turn with the message."""
        with self.deps.attempt(context, None, (self.name, input)) as events:
            steered = tuple(STEERED_USER_MESSAGES.results(context))
            delivered = steered or tuple(QUEUED_USER_MESSAGES.results(context))
            next_ = await self._use_case(context, events).execute(delivered, steered=bool(steered))
        return self.deps.decide(self.name, next_)


class RunModelStep(SessionStep[None]):
    """Dex Step of `RunModel`."""

    name = StepName.RUN_MODEL

    async def execute(self, context: dex.AsyncContext, input: None) -> dex.StepDecision:
        """Run one model call."""
        deps = self.deps
        with deps.attempt(context, active_turn(context), (self.name, input)) as events:
            async with heartbeating(context, deps.heartbeat_interval):
                use_case = self.build(RunModel, context, events, heartbeat=heartbeat_fn(context))
                next_ = await use_case.execute(step_call(context))
        return deps.decide(self.name, next_)


class AwaitToolApprovalStep(SessionStep[str]):
    """Dex Step of `AwaitToolApproval`."""

    name = StepName.AWAIT_TOOL_APPROVAL

    def _use_case(self, context: dex.AsyncContext, events: AgentEventWriter) -> AwaitToolApproval:
        return self.build(AwaitToolApproval, context, events)

    async def wait_for(self, context: dex.AsyncContext, input: str) -> dex.Wait:
        """Wait for the answer, and for the deadline while the interrupt is pending."""
        with self.deps.attempt(context, active_turn(context)) as events:
            # first_attempt_at is set by the server (its clock), never by this Worker.
            plan = self._use_case(context, events).plan_wait(input, engine_now=context.first_attempt_at)
        if plan is None:
            return dex.Wait.skip_immediately()
        answer = INTERRUPT_RESOLUTIONS.for_one(plan.interrupt_id)
        if plan.timer is None:
            return dex.Wait.until(answer)
        return dex.Wait.any_of(dex.Timer.by_duration(plan.timer), answer)

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        """Apply the answer or the deadline."""
        with self.deps.attempt(context, active_turn(context), (self.name, input)) as events:
            use_case = self._use_case(context, events)
            record = use_case.tool_calls.get(input)
            waiting = None if record is None else record.waiting_interrupt_id
            resolutions = () if waiting is None else tuple(INTERRUPT_RESOLUTIONS.results(context, waiting))
            next_ = await use_case.execute(
                input,
                resolution=resolutions[0] if resolutions else None,
                timer_fired=context.has_timer_fired(),
                attempt=context.attempt,
            )
        return self.deps.decide(self.name, next_)


class _ToolStep(SessionStep[str]):
    use_case: ClassVar[type[CallTool] | type[CallSingleAttemptTool] | type[ReconcileToolCall]]

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        """Run the tool call once."""
        deps = self.deps
        with deps.attempt(context, active_turn(context), (self.name, input)) as events:
            async with heartbeating(context, deps.heartbeat_interval):
                use_case = self.build(self.use_case, context, events, heartbeat=heartbeat_fn(context))
                next_ = await use_case.execute(step_call(context), input)
        return deps.decide(self.name, next_)


class CallToolStep(_ToolStep):
    """Dex Step of `CallTool`."""

    name = StepName.CALL_TOOL
    use_case = CallTool


class CallSingleAttemptToolStep(_ToolStep):
    """Dex Step of `CallSingleAttemptTool`."""

    name = StepName.CALL_SINGLE_ATTEMPT_TOOL
    use_case = CallSingleAttemptTool


class ReconcileToolCallStep(_ToolStep):
    """Dex Step of `ReconcileToolCall`."""

    name = StepName.RECONCILE_TOOL_CALL
    use_case = ReconcileToolCall


class _ToolFailureStep(SessionStep[str]):
    use_case: ClassVar[type[RecordToolFailure] | type[RecordToolOutcomeUnknown]]

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        """Record the call's failure."""
        with self.deps.attempt(context, active_turn(context), (self.name, input)) as events:
            use_case = self.build(self.use_case, context, events)
            next_ = await use_case.execute(input, recovery_error=recovery_detail(context))
        return self.deps.decide(self.name, next_)


class RecordToolFailureStep(_ToolFailureStep):
    """Dex Step of `RecordToolFailure`."""

    name = StepName.RECORD_TOOL_FAILURE
    use_case = RecordToolFailure


class RecordToolOutcomeUnknownStep(_ToolFailureStep):
    """Dex Step of `RecordToolOutcomeUnknown`."""

    name = StepName.RECORD_TOOL_OUTCOME_UNKNOWN
    use_case = RecordToolOutcomeUnknown


class ResumeTurnStep(SessionStep[int]):
    """Dex Step of `ResumeTurn`."""

    name = StepName.RESUME_TURN

    async def wait_for(self, context: dex.AsyncContext, input: int) -> dex.Wait:
        """Wait for ``input`` tool results, and take whatever steered messages are queued by then."""
        steered = STEERED_USER_MESSAGES.at_most(STEERED_MESSAGES_PER_BOUNDARY)
        if input == 0:
            # RunModel sent it for the steered messages alone. A Wait of one at_most condition completes at once,
            # on an empty Channel too (the real server's scenario at_most_empty,
            # server/integ/workflow/channel_multivalue/routers.go).
            return dex.Wait.until(steered)
        return dex.Wait.all_of(TOOL_CALL_RESULTS.for_n(input), steered)

    async def execute(self, context: dex.AsyncContext, input: int) -> dex.StepDecision:
        """Resume the turn, or wait for what is missing."""
        with self.deps.attempt(context, active_turn(context), (self.name, input)) as events:
            use_case = self.build(ResumeTurn, context, events)
            next_ = await use_case.execute(
                tuple(TOOL_CALL_RESULTS.results(context)), tuple(STEERED_USER_MESSAGES.results(context))
            )
        return self.deps.decide(self.name, next_)


class _TurnFailureStep(SessionStep[InputT]):
    use_case: ClassVar[type[RecordTurnFailure]]

    async def _record(self, context: dex.AsyncContext, start: AgentSessionStartInput | None) -> dex.StepDecision:
        with self.deps.attempt(context, active_turn(context), (self.name, start)) as events:
            use_case = self.build(self.use_case, context, events)
            next_ = await use_case.execute(recovery_error=recovery_detail(context), start=start)
        return self.deps.decide(self.name, next_)


class RecordTurnFailureStep(_TurnFailureStep[None]):
    """Dex Step of `RecordTurnFailure`: the route of ``RunModel`` and ``AwaitUserMessage``."""

    name = StepName.RECORD_TURN_FAILURE
    use_case = RecordTurnFailure

    async def execute(self, context: dex.AsyncContext, input: None) -> dex.StepDecision:
        """Record the failed turn."""
        return await self._record(context, None)


class RecordResumeFailureStep(_TurnFailureStep[int]):
    """Dex Step of `RecordTurnFailure` for ``ResumeTurn``, whose input is a result count."""

    name = StepName.RECORD_RESUME_FAILURE
    use_case = RecordResumeFailure

    async def execute(self, context: dex.AsyncContext, input: int) -> dex.StepDecision:
        """Record the failed turn."""
        return await self._record(context, None)


class RecordStartFailureStep(_TurnFailureStep[AgentSessionStartInput]):
    """Dex Step of `RecordTurnFailure` for ``StartAgentSession``, whose input is the start input."""

    name = StepName.RECORD_START_FAILURE
    use_case = RecordStartFailure

    async def execute(self, context: dex.AsyncContext, input: AgentSessionStartInput) -> dex.StepDecision:
        """Initialize the session and record its first turn as failed."""
        return await self._record(context, input)


class CompactHistoryStep(SessionStep[str]):
    """Dex Step of `CompactHistory`."""

    name = StepName.COMPACT_HISTORY

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        """Compact the oldest messages of the model's window."""
        deps = self.deps
        with deps.attempt(context, active_turn(context), (self.name, input)) as events:
            async with heartbeating(context, deps.heartbeat_interval):
                use_case = self.build(CompactHistory, context, events, heartbeat=heartbeat_fn(context))
                next_ = await use_case.execute(step_call(context), input)
        return deps.decide(self.name, next_)


class RecordCompactionFailureStep(SessionStep[str]):
    """Dex Step of `RecordCompactionFailure`: the route of ``CompactHistory``."""

    name = StepName.RECORD_COMPACTION_FAILURE

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        """Go on to the model with the history unchanged, or fail the turn."""
        with self.deps.attempt(context, active_turn(context), (self.name, input)) as events:
            use_case = self.build(RecordCompactionFailure, context, events)
            next_ = await use_case.after_compaction(input, recovery_error=recovery_detail(context))
        return self.deps.decide(self.name, next_)


STEP_CLASSES: tuple[type[SessionStep[Any]], ...] = (
    StartAgentSessionStep,
    AwaitUserMessageStep,
    RunModelStep,
    AwaitToolApprovalStep,
    CallToolStep,
    CallSingleAttemptToolStep,
    RecordToolFailureStep,
    RecordToolOutcomeUnknownStep,
    ReconcileToolCallStep,
    ResumeTurnStep,
    RecordTurnFailureStep,
    RecordResumeFailureStep,
    RecordStartFailureStep,
    CompactHistoryStep,
    RecordCompactionFailureStep,
)
"""Every session Step, ``StartAgentSession`` first."""
