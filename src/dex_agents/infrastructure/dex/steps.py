"""The Dex Steps of a session Flow: each builds its use case, runs it, and maps its decision.

Every Step reads the session through `dex_session_ports` over its handler's
context, takes the agent's runner, options and clock from `StepDependencies`,
and builds its use case with the use case's own ``wired`` factory, so adding a
port to a use case changes nothing here. What a Step waits for (a user
message, an approval with its deadline Timer, tool results) is declared here.
Model and tool Steps heartbeat in the background while the runner works.

`SessionStep` is the one typing shim for the SDK: dex 1.23 types
``Step.execute`` / ``wait_for`` as plain methods taking ``Context``, while its
async handlers take ``AsyncContext`` and return a coroutine (the Registry
checks that shape at run time). The shim derives from the SDK's Step seen as
``Any``, so no Step repeats an ignore, and it defines neither method, so the
SDK still sees a ``wait_for`` only on the Steps that define one.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any, ClassVar, Generic, TypeVar, assert_never

import attrs
import dex

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.invocation import StepCall
from dex_agents.application.next import End, GoTo, GoToMany, Next, StepName, WaitAgain
from dex_agents.application.runner import HeartbeatFn
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
from dex_agents.application.tracing import StepTrace, StepTracer
from dex_agents.application.wiring import AgentSetup, Wired
from dex_agents.domain.errors import StepAttemptError
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.session import AgentState
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.infrastructure.dex.frames import metered_writes
from dex_agents.infrastructure.dex.options import PER_CALL_STEPS, WINDOW_STEPS, StepOptionsTable
from dex_agents.infrastructure.dex.persistence import (
    AGENT_STATE,
    INTERRUPT_RESOLUTIONS,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TOOL_CALL_RESULTS,
)
from dex_agents.infrastructure.dex.stores import StreamEventSink, dex_session_ports

InputT = TypeVar("InputT")
UseCaseT = TypeVar("UseCaseT", bound=Wired)

_UNKNOWN_FAILURE = "the Step failed without a recovery detail"

STEERED_MESSAGES_PER_BOUNDARY = 100
"""Steered messages one model-call boundary takes at most (``at_most``); the rest join the next one."""
_log = logging.getLogger(__name__)


@attrs.define(kw_only=True)
class StepDependencies:
    """What the Steps of one agent Flow type share: the agent's setup, its Stream, its Step classes."""

    agent: AgentSetup
    """The runner, options and clock."""
    stream: dex.Stream[AgentEvent]
    """The Flow type's live event Stream."""
    heartbeat_interval: timedelta
    """How often model and tool Steps beat in the background."""
    classes: dict[StepName, "type[dex.Step[Any]]"] = attrs.field(factory=dict)
    """The Dex Step class of every Step name (filled by the Flow)."""
    tracer: StepTracer | None = None
    """Opens each Step attempt's span when the Flow traces (`AgentSessionOptions.tracing`), else ``None``."""
    step_options: StepOptionsTable = attrs.field(init=False)
    """Static and per-call options, built once per Step."""

    def __attrs_post_init__(self) -> None:
        self.step_options = StepOptionsTable(self.classes)

    def writer(
        self, context: dex.AsyncContext, turn_id: str | None, trace: StepTrace | None = None
    ) -> AgentEventWriter:
        """Return a live-event writer for this Step attempt (its events also shown on ``trace``'s span)."""
        sink = StreamEventSink(context, self.stream)
        options = self.agent.options
        return AgentEventWriter(
            sink if trace is None else trace.sink(sink),
            turn_id=turn_id,
            step_execution_id=context.step_execution_id,
            attempt=context.attempt,
            max_event_bytes=options.max_event_bytes,
            coalesce_window=options.delta_coalesce_window,
            coalesce_bytes=options.delta_coalesce_bytes,
            schedule=sink.call_later,
        )

    @contextlib.contextmanager
    def attempt(
        self, context: dex.AsyncContext, turn_id: str | None, traced: tuple[StepName, object] | None = None
    ) -> Iterator[AgentEventWriter]:
        """Run one Step attempt's use case: hand it a writer, close the writer when it returns.

        Closing writes the deltas the writer still holds, while the call can still write.

        dex 1.23 reports any ``ValueError`` or ``TypeError`` escaping a handler as
        an invalid Step result, which would misname a runner's or a tool's own
        failure; they leave here as `StepAttemptError`, which says what failed.
        Every value the use case stages is metered: a result too large for one
        frame fails the attempt with `StepResultTooLargeError` and is never sent.

        ``traced`` (the Step and its input) runs the attempt in its span when the
        Flow traces (`AgentSessionOptions.tracing`); without a tracer it costs nothing.
        """
        tracer = self.tracer
        if tracer is None or traced is None:
            with self._attempt(context, turn_id, None) as events:
                yield events
            return
        step, step_input = traced
        with (
            tracer.attempt(step, _call(context), dex_session_ports(context), step_input) as trace,
            self._attempt(context, turn_id, trace) as events,
        ):
            yield events

    @contextlib.contextmanager
    def _attempt(
        self, context: dex.AsyncContext, turn_id: str | None, trace: StepTrace | None
    ) -> Iterator[AgentEventWriter]:
        events = self.writer(context, turn_id, trace)
        try:
            with metered_writes() as meter:
                yield events
            meter.check()
        except (ValueError, TypeError) as error:
            raise StepAttemptError(f"{type(error).__module__}.{type(error).__qualname__}: {error}") from error
        finally:
            events.close()

    def decide(self, current: StepName, next_: Next) -> dex.StepDecision:
        """Map a use case's decision to a Dex decision."""
        match next_:
            case GoTo():
                return self._go(next_)
            case GoToMany():
                return dex.go_to_many(*(self._movement(m) for m in next_.movements))
            case WaitAgain():
                return self._go(GoTo(step=current, input=next_.input))
            case End():
                return dex.dead_end()
            case _:
                assert_never(next_)

    def _go(self, movement: GoTo) -> dex.StepDecision:
        if movement.step in PER_CALL_STEPS or movement.window is not None:
            return dex.go_to_many(self._movement(movement))
        return dex.go_to(self.classes[movement.step], movement.input)

    def _movement(self, movement: GoTo) -> "dex.StepMovement[Any]":
        options = None
        if movement.step in PER_CALL_STEPS:
            assert isinstance(movement.input, str)
            options = self.step_options.for_call(movement.step, movement.input, movement.window)
        elif movement.window is not None and movement.step in WINDOW_STEPS:
            options = self.step_options.for_window(movement.step, movement.window)
        return dex.StepMovement.of(self.classes[movement.step], movement.input, options=options)


def _call(context: dex.Context) -> StepCall:
    return StepCall(flow_id=context.flow_id, step_execution_id=context.step_execution_id, attempt=context.attempt)


def recovery_detail(context: dex.Context) -> str:
    """The failed attempt's error as ``Type: detail`` (the type dropped for builtins), as people read it."""
    error = context.recovery_error
    if error is None:
        return _UNKNOWN_FAILURE
    kind = (error.error_type or "").removeprefix("builtins.")
    if kind and error.detail:
        return f"{kind}: {error.detail}"
    return error.detail or kind or _UNKNOWN_FAILURE


def _active_turn(context: dex.Context) -> str | None:
    state: AgentState | None = AGENT_STATE.get(context)  # None before the session started
    return None if state is None else state.active_turn_id


@contextlib.asynccontextmanager
async def _heartbeating(context: dex.AsyncContext, interval: timedelta) -> AsyncIterator[None]:
    """Beat every ``interval`` until the block ends (no beat outlives the handler).

    A loop timer, not a task: most Steps end long before their first beat, and a timer costs
    less to arm and cancel than a task costs to start and cancel, and this runs once per Step.
    """
    loop = asyncio.get_running_loop()
    seconds = interval.total_seconds()
    beats: list[asyncio.Task[None]] = []
    timers: list[asyncio.TimerHandle] = []

    def beat() -> None:
        beats.append(loop.create_task(context.heartbeat()))
        timers[:] = [loop.call_later(seconds, beat)]

    timers.append(loop.call_later(seconds, beat))
    try:
        yield
    finally:
        timers[0].cancel()
        for task in beats:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _heartbeat_fn(context: dex.AsyncContext) -> HeartbeatFn:
    async def heartbeat() -> None:
        await context.heartbeat()

    return heartbeat


_SdkStep: Any = dex.Step
"""dex 1.23's Step base, typed as ``Any``: its sync ``Context`` signatures do not describe async handlers."""


class SessionStep(_SdkStep, Generic[InputT]):  # type: ignore[misc]  # the one typing shim for the SDK's Step
    """Base of every session Step: its name and options, the Step dependencies, the session's ports.

    Subclasses define ``async def execute(context: dex.AsyncContext, input)`` and,
    where the Step waits, ``async def wait_for``; the SDK checks those shapes
    when the Registry is built.
    """

    name: ClassVar[StepName]

    def __init__(self, deps: StepDependencies) -> None:
        self.deps = deps

    def get_step_type(self) -> str:
        """Return the Step type: the Step's name."""
        return self.name.value

    def get_step_options(self) -> dex.StepOptions | None:
        """Return the Step's static options."""
        return self.deps.step_options.static(self.name)

    def build(
        self,
        use_case: type[UseCaseT],
        context: dex.Context,
        events: AgentEventWriter,
        *,
        heartbeat: HeartbeatFn | None = None,
    ) -> UseCaseT:
        """Build ``use_case`` over the session's ports in this handler's context."""
        ports = dex_session_ports(context)
        if heartbeat is None:
            return use_case.wired(ports, self.deps.agent, events=events)
        return use_case.wired(ports, self.deps.agent, events=events, heartbeat=heartbeat)


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
        with deps.attempt(context, _active_turn(context), (self.name, input)) as events:
            async with _heartbeating(context, deps.heartbeat_interval):
                use_case = self.build(RunModel, context, events, heartbeat=_heartbeat_fn(context))
                next_ = await use_case.execute(_call(context))
        return deps.decide(self.name, next_)


class AwaitToolApprovalStep(SessionStep[str]):
    """Dex Step of `AwaitToolApproval`."""

    name = StepName.AWAIT_TOOL_APPROVAL

    def _use_case(self, context: dex.AsyncContext, events: AgentEventWriter) -> AwaitToolApproval:
        return self.build(AwaitToolApproval, context, events)

    async def wait_for(self, context: dex.AsyncContext, input: str) -> dex.Wait:
        """Wait for the answer, and for the deadline while the interrupt is pending."""
        with self.deps.attempt(context, _active_turn(context)) as events:
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
        with self.deps.attempt(context, _active_turn(context), (self.name, input)) as events:
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
        with deps.attempt(context, _active_turn(context), (self.name, input)) as events:
            async with _heartbeating(context, deps.heartbeat_interval):
                use_case = self.build(self.use_case, context, events, heartbeat=_heartbeat_fn(context))
                next_ = await use_case.execute(_call(context), input)
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
        with self.deps.attempt(context, _active_turn(context), (self.name, input)) as events:
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
        return dex.Wait.all_of(
            TOOL_CALL_RESULTS.for_n(input), STEERED_USER_MESSAGES.at_most(STEERED_MESSAGES_PER_BOUNDARY)
        )

    async def execute(self, context: dex.AsyncContext, input: int) -> dex.StepDecision:
        """Resume the turn, or wait for what is missing."""
        with self.deps.attempt(context, _active_turn(context), (self.name, input)) as events:
            use_case = self.build(ResumeTurn, context, events)
            next_ = await use_case.execute(
                tuple(TOOL_CALL_RESULTS.results(context)), tuple(STEERED_USER_MESSAGES.results(context))
            )
        return self.deps.decide(self.name, next_)


class _TurnFailureStep(SessionStep[InputT]):
    use_case: ClassVar[type[RecordTurnFailure]]

    async def _record(self, context: dex.AsyncContext, start: AgentSessionStartInput | None) -> dex.StepDecision:
        with self.deps.attempt(context, _active_turn(context), (self.name, start)) as events:
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
        with deps.attempt(context, _active_turn(context), (self.name, input)) as events:
            async with _heartbeating(context, deps.heartbeat_interval):
                use_case = self.build(CompactHistory, context, events, heartbeat=_heartbeat_fn(context))
                next_ = await use_case.execute(_call(context), input)
        return deps.decide(self.name, next_)


class RecordCompactionFailureStep(SessionStep[str]):
    """Dex Step of `RecordCompactionFailure`: the route of ``CompactHistory``."""

    name = StepName.RECORD_COMPACTION_FAILURE

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        """Go on to the model with the history unchanged, or fail the turn."""
        with self.deps.attempt(context, _active_turn(context), (self.name, input)) as events:
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
