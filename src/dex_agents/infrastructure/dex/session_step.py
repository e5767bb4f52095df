"""The base of the session Steps and what they share: `StepDependencies` and `SessionStep`.

`StepDependencies` holds what the Steps of one agent Flow type share (the
agent's setup, its Stream, its Step classes and their options) and maps a use
case's `Next` to a Dex decision. `SessionStep` builds its Step's declared use
case (`dex_agents.application.declarations`) over `dex_session_ports` with the
use case's own ``wired`` factory; its options come from the same declaration.

`SessionStep` is the one typing shim for the SDK: dex 1.23 types
``Step.execute`` / ``wait_for`` as plain methods taking ``Context``, while its
async handlers take ``AsyncContext`` and return a coroutine (the Registry
checks that shape at run time). The shim derives from the SDK's Step seen as
``Any``, so no Step repeats an ignore, and it defines neither method, so the
SDK still sees a ``wait_for`` only on the Steps that define one.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any, ClassVar, Generic, TypeVar, assert_never

import attrs
import dex

from dex_agents.application.declarations import STEP_DECLARATIONS
from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.invocation import StepCall
from dex_agents.application.next import End, GoTo, GoToMany, Next, StepName, WaitAgain
from dex_agents.application.runner import HeartbeatFn
from dex_agents.application.tracing import StepTrace, StepTracer
from dex_agents.application.wiring import AgentSetup, Wired
from dex_agents.domain.errors import StepAttemptError
from dex_agents.domain.events import AgentEvent
from dex_agents.domain.session import AgentState
from dex_agents.infrastructure.dex.frames import metered_writes
from dex_agents.infrastructure.dex.options import PER_CALL_STEPS, WINDOW_STEPS, StepOptionsTable
from dex_agents.infrastructure.dex.persistence import (
    AGENT_STATE,
)
from dex_agents.infrastructure.dex.stores import StreamEventSink, dex_session_ports

InputT = TypeVar("InputT")
UseCaseT = TypeVar("UseCaseT", bound=Wired)

_UNKNOWN_FAILURE = "the Step failed without a recovery detail"


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
            tracer.attempt(step, step_call(context), dex_session_ports(context), step_input) as trace,
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


def step_call(context: dex.Context) -> StepCall:
    """Return the invocation of the Step attempt this handler runs."""
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


def active_turn(context: dex.Context) -> str | None:
    """Return the session's active turn ID (``None`` when none runs or the session has not started)."""
    state: AgentState | None = AGENT_STATE.get(context)  # None before the session started
    return None if state is None else state.active_turn_id


@contextlib.asynccontextmanager
async def heartbeating(context: dex.AsyncContext, interval: timedelta) -> AsyncIterator[None]:
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


def heartbeat_fn(context: dex.AsyncContext) -> HeartbeatFn:
    """Return the heartbeat a use case calls: one beat of this handler's Step."""

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
        """Build ``use_case`` over the session's ports in this handler's context: the Step's declared use case."""
        assert use_case is STEP_DECLARATIONS[self.name].use_case, f"{self.name} declares another use case"
        ports = dex_session_ports(context)
        if heartbeat is None:
            return use_case.wired(ports, self.deps.agent, events=events)
        return use_case.wired(ports, self.deps.agent, events=events, heartbeat=heartbeat)
