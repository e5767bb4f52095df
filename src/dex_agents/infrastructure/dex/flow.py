"""`AgentSessionFlow`: one Dex Flow type per agent; one Flow execution per session.

The Dex Steps here are thin: each builds its use case from Dex-backed ports
over the handler's context, runs it, and maps the engine-neutral decision to a
Dex `StepDecision`. What a Step waits for (a user message, an approval with
its deadline Timer, tool results) is declared here. Model and tool Steps
heartbeat in the background every 20 s while the runner works.
``AwaitUserMessage``'s ``wait_for`` first writes ``turn_committed`` for the
turn that just ended: Dex runs it only after that turn's last Step committed.

RPCs: ``send_user_message`` (transactional), ``resolve_interrupt`` (locks
``PENDING_INTERRUPTS``), and the query-only ``get_agent_snapshot``,
``list_agent_messages``, ``get_agent_message_index`` and
``get_agent_message_count``. The query RPCs read
only the ``AGENT_MESSAGES`` instances the caller loads, so
`AgentSessionClient` loads exactly the messages they return.

The SDK types ``Step.execute`` as a plain method taking ``Context``; its async
handlers take ``AsyncContext`` and return a coroutine (the Registry checks
that shape), hence the ``type: ignore[override]`` on every async handler.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from typing import Any, assert_never

import dex

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.invocation import StepCall
from dex_agents.application.next import End, GoTo, GoToMany, Next, StepName, WaitAgain
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.policies import HEARTBEAT_INTERVAL
from dex_agents.application.ports import Clock
from dex_agents.application.rpcs.get_agent_snapshot import GetAgentSnapshot
from dex_agents.application.rpcs.list_agent_messages import ListAgentMessages
from dex_agents.application.rpcs.resolve_interrupt import ResolveInterrupt
from dex_agents.application.rpcs.send_user_message import SendUserMessage
from dex_agents.application.runner import AgentFrameworkRunner
from dex_agents.application.steps.await_tool_approval import AwaitToolApproval
from dex_agents.application.steps.await_user_message import AwaitUserMessage
from dex_agents.application.steps.call_tool import CallSingleAttemptTool, CallTool
from dex_agents.application.steps.record_tool_failure import RecordToolFailure, RecordToolOutcomeUnknown
from dex_agents.application.steps.record_turn_failure import (
    RecordResumeFailure,
    RecordStartFailure,
    RecordTurnFailure,
)
from dex_agents.application.steps.resume_turn import ResumeTurn
from dex_agents.application.steps.run_model import RunModel
from dex_agents.application.steps.start_agent_session import StartAgentSession
from dex_agents.domain.errors import StepAttemptError
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.interrupts import ResolveInterruptRequest
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.snapshot import AgentMessagesPage, AgentSnapshot, ListAgentMessagesRequest, MessageIndex
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.infrastructure.dex.frames import metered_writes
from dex_agents.infrastructure.dex.options import PER_CALL_STEPS, StepOptionsTable
from dex_agents.infrastructure.dex.persistence import (
    AGENT_MESSAGES,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    FRAMEWORK_RUN_STATE,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    TOOL_CALL_RESULTS,
    agent_events_stream,
)
from dex_agents.infrastructure.dex.stores import (
    DexInterruptStore,
    DexMessageLog,
    DexResolutionPublisher,
    DexRunStateStore,
    DexSessionStateStore,
    DexToolCallStore,
    DexToolResultPublisher,
    DexUsageStore,
    DexUserMessageQueue,
    StreamEventSink,
    SystemClock,
)

_UNKNOWN_FAILURE = "the Step failed without a recovery detail"
_log = logging.getLogger(__name__)


class _Session:
    """What every Step of one agent Flow type shares."""

    def __init__(
        self,
        runner: AgentFrameworkRunner,
        options: AgentSessionOptions,
        stream: dex.Stream[AgentEvent],
        clock: Clock,
        heartbeat_interval: timedelta,
    ) -> None:
        self.runner = runner
        self.options = options
        self.stream = stream
        self.clock = clock
        self.heartbeat_interval = heartbeat_interval
        self.classes: dict[StepName, type[dex.Step[Any]]] = {}
        self.step_options = StepOptionsTable(self.classes)

    def writer(self, context: dex.AsyncContext, turn_id: str | None) -> AgentEventWriter:
        """Return a live-event writer for this Step attempt."""
        return AgentEventWriter(
            StreamEventSink(context, self.stream),
            turn_id=turn_id,
            step_execution_id=context.step_execution_id,
            attempt=context.attempt,
            max_event_bytes=self.options.max_event_bytes,
        )

    @contextlib.contextmanager
    def attempt(self, context: dex.AsyncContext, turn_id: str | None) -> Iterator[AgentEventWriter]:
        """Run one Step attempt's use case: hand it a writer, close the writer when it returns.

        dex 1.23 reports any ``ValueError`` or ``TypeError`` escaping a handler as
        an invalid Step result, which would misname a runner's or a tool's own
        failure; they leave here as `StepAttemptError`, which says what failed.
        Every value the use case stages is metered: a result too large for one
        frame fails the attempt with `StepResultTooLargeError` and is never sent.
        """
        events = self.writer(context, turn_id)
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
        if movement.step in PER_CALL_STEPS:
            return dex.go_to_many(self._movement(movement))
        return dex.go_to(self.classes[movement.step], movement.input)

    def _movement(self, movement: GoTo) -> "dex.StepMovement[Any]":
        options = None
        if movement.step in PER_CALL_STEPS:
            assert isinstance(movement.input, str)
            options = self.step_options.for_call(movement.step, movement.input)
        return dex.StepMovement.of(self.classes[movement.step], movement.input, options=options)


def _call(context: dex.Context) -> StepCall:
    return StepCall(flow_id=context.flow_id, step_execution_id=context.step_execution_id, attempt=context.attempt)


def _recovery_detail(context: dex.Context) -> str:
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
    """Beat every ``interval`` until the block ends (the task never outlives the handler)."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(interval.total_seconds())
            await context.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _heartbeat_fn(context: dex.AsyncContext) -> Callable[[], Any]:
    async def heartbeat() -> None:
        await context.heartbeat()

    return heartbeat


class _SessionStep:
    name: StepName

    def __init__(self, session: _Session) -> None:
        self._session = session

    def get_step_type(self) -> str:
        return self.name.value

    def get_step_options(self) -> dex.StepOptions | None:
        return self._session.step_options.static(self.name)


class StartAgentSessionStep(_SessionStep, dex.Step[AgentSessionStartInput]):
    """Dex Step of `StartAgentSession`."""

    name = StepName.START_AGENT_SESSION

    async def execute(self, context: dex.AsyncContext, input: AgentSessionStartInput) -> dex.StepDecision:  # type: ignore[override]
        """Initialize the session."""
        s = self._session
        with s.attempt(context, None) as events:
            next_ = await StartAgentSession(
                runner=s.runner,
                options=s.options,
                state=DexSessionStateStore(context),
                messages=DexMessageLog(context),
                usage=DexUsageStore(context),
                interrupts=DexInterruptStore(context),
                events=events,
            ).execute(input)
        return s.decide(self.name, next_)


class AwaitUserMessageStep(_SessionStep, dex.Step[None]):
    """Dex Step of `AwaitUserMessage`."""

    name = StepName.AWAIT_USER_MESSAGE

    def _use_case(self, context: dex.AsyncContext, events: AgentEventWriter) -> AwaitUserMessage:
        return AwaitUserMessage(
            runner=self._session.runner,
            options=self._session.options,
            state=DexSessionStateStore(context),
            messages=DexMessageLog(context),
            events=events,
        )

    async def wait_for(self, context: dex.AsyncContext, input: None) -> dex.Wait:  # type: ignore[override]
        """Announce the committed end of the last turn, then wait for one queued user message."""
        try:
            with self._session.attempt(context, None) as events:
                self._use_case(context, events).announce_finished_turn()
        except Exception:  # noqa: BLE001 - a live event is best effort; a failed wait_for would fail the Flow
            _log.warning("could not announce the committed turn", exc_info=True)
        return dex.Wait.until(QUEUED_USER_MESSAGES.for_one())

    async def execute(self, context: dex.AsyncContext, input: None) -> dex.StepDecision:  # type: ignore[override]
        """Start a turn with the message."""
        s = self._session
        with s.attempt(context, None) as events:
            next_ = await self._use_case(context, events).execute(tuple(QUEUED_USER_MESSAGES.results(context)))
        return s.decide(self.name, next_)


class RunModelStep(_SessionStep, dex.Step[None]):
    """Dex Step of `RunModel`."""

    name = StepName.RUN_MODEL

    async def execute(self, context: dex.AsyncContext, input: None) -> dex.StepDecision:  # type: ignore[override]
        """Run one model call."""
        s = self._session
        with s.attempt(context, _active_turn(context)) as events:
            async with _heartbeating(context, s.heartbeat_interval):
                next_ = await RunModel(
                    runner=s.runner,
                    options=s.options,
                    state=DexSessionStateStore(context),
                    messages=DexMessageLog(context),
                    run_state=DexRunStateStore(context),
                    tool_calls=DexToolCallStore(context),
                    interrupts=DexInterruptStore(context),
                    usage=DexUsageStore(context),
                    events=events,
                    heartbeat=_heartbeat_fn(context),
                    clock=s.clock,
                ).execute(_call(context))
        return s.decide(self.name, next_)


class AwaitToolApprovalStep(_SessionStep, dex.Step[str]):
    """Dex Step of `AwaitToolApproval`."""

    name = StepName.AWAIT_TOOL_APPROVAL

    def _use_case(self, context: dex.AsyncContext, events: AgentEventWriter) -> AwaitToolApproval:
        return AwaitToolApproval(
            tool_calls=DexToolCallStore(context),
            interrupts=DexInterruptStore(context),
            results=DexToolResultPublisher(context),
            events=events,
            clock=self._session.clock,
        )

    async def wait_for(self, context: dex.AsyncContext, input: str) -> dex.Wait:  # type: ignore[override]
        """Wait for the answer, and for the deadline while the interrupt is pending."""
        with self._session.attempt(context, _active_turn(context)) as events:
            plan = self._use_case(context, events).plan_wait(input)
        if plan is None:
            return dex.Wait.skip_immediately()
        answer = INTERRUPT_RESOLUTIONS.for_one(plan.interrupt_id)
        if plan.timer is None:
            return dex.Wait.until(answer)
        return dex.Wait.any_of(dex.Timer.by_duration(plan.timer), answer)

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:  # type: ignore[override]
        """Apply the answer or the deadline."""
        s = self._session
        with s.attempt(context, _active_turn(context)) as events:
            record = DexToolCallStore(context).get(input)
            resolutions = (
                ()
                if record is None or record.interrupt_id is None
                else tuple(INTERRUPT_RESOLUTIONS.results(context, record.interrupt_id))
            )
            next_ = await self._use_case(context, events).execute(
                input,
                resolution=resolutions[0] if resolutions else None,
                timer_fired=context.has_timer_fired(),
                attempt=context.attempt,
            )
        return s.decide(self.name, next_)


class _ToolStep(_SessionStep):
    use_case: type[CallTool] | type[CallSingleAttemptTool]

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        """Run the tool call once."""
        s = self._session
        with s.attempt(context, _active_turn(context)) as events:
            async with _heartbeating(context, s.heartbeat_interval):
                next_ = await self.use_case(
                    runner=s.runner,
                    options=s.options,
                    tool_calls=DexToolCallStore(context),
                    results=DexToolResultPublisher(context),
                    events=events,
                    heartbeat=_heartbeat_fn(context),
                ).execute(_call(context), input)
        return s.decide(self.name, next_)


class CallToolStep(_ToolStep, dex.Step[str]):  # type: ignore[misc]
    """Dex Step of `CallTool`."""

    name = StepName.CALL_TOOL
    use_case = CallTool


class CallSingleAttemptToolStep(_ToolStep, dex.Step[str]):  # type: ignore[misc]
    """Dex Step of `CallSingleAttemptTool`."""

    name = StepName.CALL_SINGLE_ATTEMPT_TOOL
    use_case = CallSingleAttemptTool


class _ToolFailureStep(_SessionStep):
    use_case: type[RecordToolFailure] | type[RecordToolOutcomeUnknown]

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        """Record the call's failure."""
        s = self._session
        with s.attempt(context, _active_turn(context)) as events:
            next_ = await self.use_case(
                tool_calls=DexToolCallStore(context), results=DexToolResultPublisher(context), events=events
            ).execute(input, recovery_error=_recovery_detail(context))
        return s.decide(self.name, next_)


class RecordToolFailureStep(_ToolFailureStep, dex.Step[str]):  # type: ignore[misc]
    """Dex Step of `RecordToolFailure`."""

    name = StepName.RECORD_TOOL_FAILURE
    use_case = RecordToolFailure


class RecordToolOutcomeUnknownStep(_ToolFailureStep, dex.Step[str]):  # type: ignore[misc]
    """Dex Step of `RecordToolOutcomeUnknown`."""

    name = StepName.RECORD_TOOL_OUTCOME_UNKNOWN
    use_case = RecordToolOutcomeUnknown


class ResumeTurnStep(_SessionStep, dex.Step[int]):
    """Dex Step of `ResumeTurn`."""

    name = StepName.RESUME_TURN

    async def wait_for(self, context: dex.AsyncContext, input: int) -> dex.Wait:  # type: ignore[override]
        """Wait for ``input`` tool results."""
        return dex.Wait.until(TOOL_CALL_RESULTS.for_n(input))

    async def execute(self, context: dex.AsyncContext, input: int) -> dex.StepDecision:  # type: ignore[override]
        """Resume the turn, or wait for what is missing."""
        with self._session.attempt(context, _active_turn(context)):
            next_ = await ResumeTurn(state=DexSessionStateStore(context), tool_calls=DexToolCallStore(context)).execute(
                tuple(TOOL_CALL_RESULTS.results(context))
            )
        return self._session.decide(self.name, next_)


class _TurnFailureStep(_SessionStep):
    use_case: type[RecordTurnFailure]

    async def _record(self, context: dex.AsyncContext, start: AgentSessionStartInput | None) -> dex.StepDecision:
        s = self._session
        with s.attempt(context, _active_turn(context)) as events:
            next_ = await self.use_case(
                runner=s.runner,
                state=DexSessionStateStore(context),
                messages=DexMessageLog(context),
                run_state=DexRunStateStore(context),
                tool_calls=DexToolCallStore(context),
                interrupts=DexInterruptStore(context),
                usage=DexUsageStore(context),
                events=events,
            ).execute(recovery_error=_recovery_detail(context), start=start)
        return s.decide(self.name, next_)


class RecordTurnFailureStep(_TurnFailureStep, dex.Step[None]):
    """Dex Step of `RecordTurnFailure`: the route of ``RunModel`` and ``AwaitUserMessage``."""

    name = StepName.RECORD_TURN_FAILURE
    use_case = RecordTurnFailure

    async def execute(self, context: dex.AsyncContext, input: None) -> dex.StepDecision:  # type: ignore[override]
        """Record the failed turn."""
        return await self._record(context, None)


class RecordResumeFailureStep(_TurnFailureStep, dex.Step[int]):
    """Dex Step of `RecordTurnFailure` for ``ResumeTurn``, whose input is a result count."""

    name = StepName.RECORD_RESUME_FAILURE
    use_case = RecordResumeFailure

    async def execute(self, context: dex.AsyncContext, input: int) -> dex.StepDecision:  # type: ignore[override]
        """Record the failed turn."""
        return await self._record(context, None)


class RecordStartFailureStep(_TurnFailureStep, dex.Step[AgentSessionStartInput]):
    """Dex Step of `RecordTurnFailure` for ``StartAgentSession``, whose input is the start input."""

    name = StepName.RECORD_START_FAILURE
    use_case = RecordStartFailure

    async def execute(self, context: dex.AsyncContext, input: AgentSessionStartInput) -> dex.StepDecision:  # type: ignore[override]
        """Initialize the session and record its first turn as failed."""
        return await self._record(context, input)


_STEP_CLASSES: tuple[type[_SessionStep], ...] = (
    StartAgentSessionStep,
    AwaitUserMessageStep,
    RunModelStep,
    AwaitToolApprovalStep,
    CallToolStep,
    CallSingleAttemptToolStep,
    RecordToolFailureStep,
    RecordToolOutcomeUnknownStep,
    ResumeTurnStep,
    RecordTurnFailureStep,
    RecordResumeFailureStep,
    RecordStartFailureStep,
)


class AgentSessionFlow(dex.Flow[AgentSessionStartInput]):
    """The durable session Flow of one agent: register one per agent, each with its own ``flow_type``."""

    def __init__(
        self,
        runner: AgentFrameworkRunner,
        *,
        flow_type: str,
        options: AgentSessionOptions | None = None,
        clock: Clock | None = None,
        heartbeat_interval: timedelta = HEARTBEAT_INTERVAL,
    ) -> None:
        if not flow_type or "/" in flow_type:
            raise ValueError(f"flow_type must be non-empty and contain no '/', got {flow_type!r}")
        self._flow_type = flow_type
        self.options = options or AgentSessionOptions()
        self.runner = runner
        self.events_stream: dex.Stream[AgentEvent] = agent_events_stream(self.options.event_stream_capacity_bytes)
        self._session = _Session(runner, self.options, self.events_stream, clock or SystemClock(), heartbeat_interval)
        self._steps = [cls(self._session) for cls in _STEP_CLASSES]
        for step in self._steps:
            self._session.classes[step.name] = type(step)  # type: ignore[assignment]

    def get_flow_type(self) -> str:
        """Return this agent's Flow type."""
        return self._flow_type

    def get_steps(self) -> dex.StepList[AgentSessionStartInput]:
        """Return the session's Steps, ``StartAgentSession`` first."""
        start, *others = self._steps
        return dex.StepList.start_step(start).other_steps(*others)  # type: ignore[arg-type]

    def get_persistence_schema(self) -> dex.PersistenceSchema:
        """Return the session's Attributes, Channels and this Flow type's Stream."""
        return dex.PersistenceSchema.of(
            AGENT_STATE,
            AGENT_MESSAGES,
            FRAMEWORK_RUN_STATE,
            AGENT_TOOL_CALLS,
            PENDING_INTERRUPTS,
            AGENT_USAGE,
            QUEUED_USER_MESSAGES,
            INTERRUPT_RESOLUTIONS,
            TOOL_CALL_RESULTS,
            self.events_stream,
        )

    @dex.rpc(is_transactional=True)
    async def send_user_message(self, context: dex.Context, message: AgentUserMessage) -> dex.RPCResult[bool]:
        """Queue a user message; ``False`` for blank or refused text (`text_refusal`)."""
        accepted = await SendUserMessage(queue=DexUserMessageQueue(context), options=self.options).execute(message)
        return dex.RPCResult(accepted)

    @dex.rpc(lock_attributes=(PENDING_INTERRUPTS.lock(),))
    async def resolve_interrupt(self, context: dex.Context, request: ResolveInterruptRequest) -> dex.RPCResult[bool]:
        """Answer a pending interrupt; ``False`` when not pending or past its deadline."""
        accepted = await ResolveInterrupt(
            interrupts=DexInterruptStore(context),
            resolutions=DexResolutionPublisher(context),
            clock=self._session.clock,
            options=self.options,
        ).execute(request)
        return dex.RPCResult(accepted)

    @dex.rpc(load_attribute_maps=(AGENT_TOOL_CALLS,))
    async def get_agent_snapshot(self, context: dex.Context) -> dex.RPCResult[AgentSnapshot]:
        """Return the snapshot, with the loaded messages among the latest 200."""
        snapshot = await GetAgentSnapshot(
            state=DexSessionStateStore(context),
            messages=_LoadedMessageLog(context),
            interrupts=DexInterruptStore(context),
            tool_calls=DexToolCallStore(context),
            usage=DexUsageStore(context),
            queue=DexUserMessageQueue(context),
        ).execute()
        return dex.RPCResult(snapshot)

    @dex.rpc()
    async def list_agent_messages(
        self, context: dex.Context, request: ListAgentMessagesRequest
    ) -> dex.RPCResult[AgentMessagesPage]:
        """Return one page of messages, oldest first, from the loaded ones."""
        page = await ListAgentMessages(
            state=DexSessionStateStore(context), messages=_LoadedMessageLog(context)
        ).execute(request)
        return dex.RPCResult(page)

    @dex.rpc()
    async def get_agent_message_index(self, context: dex.Context) -> dex.RPCResult[MessageIndex]:
        """Return the message count and the sizes of large messages, to plan what a snapshot or page loads."""
        return dex.RPCResult(MessageIndex.of(DexSessionStateStore(context).get()))

    @dex.rpc()
    async def get_agent_message_count(self, context: dex.Context) -> dex.RPCResult[int]:
        """Return how many messages the session stored (0 before it started)."""
        state = DexSessionStateStore(context).get()
        return dex.RPCResult(0 if state is None else state.message_count)


class _LoadedMessageLog(DexMessageLog):
    """A message log for query RPCs: skips instances the caller did not load."""

    def read(self, sequences: Any) -> tuple[Any, ...]:
        found: list[Any] = []
        for sequence in sequences:
            try:
                found.extend(super().read((sequence,)))
            except dex.AttributeMapNotLoadedError:
                continue
        return tuple(found)
