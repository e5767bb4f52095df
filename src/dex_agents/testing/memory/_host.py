"""`InMemorySessionSteps`: a whole session on in-memory ports, one method per Step.

It builds each use case with its ``wired`` factory, as the Dex binding does
(a fresh event writer per Step attempt, bound to the active turn, closed when
the call returns), and keeps every port public so tests assert end state.
`InMemorySessionRpcs` (`dex_agents.testing.memory._rpcs`) adds one method
per RPC, `InMemorySessionHost` (`dex_agents.testing.memory._driver`) the
driver that follows the "what next" values.
"""

import contextlib
from collections.abc import Iterator, Sequence
from itertools import count
from typing import TypeVar

from dex_agents.application.declarations import (
    EVERYTHING,
    RPC_DECLARATIONS,
    STEP_DECLARATIONS,
    Loaded,
    RpcName,
)
from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.invocation import StepCall
from dex_agents.application.next import GoTo, Next, StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.runner import AgentFrameworkRunner
from dex_agents.application.steps.await_tool_approval import ApprovalWait, AwaitToolApproval
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
from dex_agents.application.tracing import StepTrace
from dex_agents.application.wiring import AgentSetup, SessionPorts, Wired
from dex_agents.domain.history import ModelWindow
from dex_agents.domain.interrupts import AgentInterruptResolution
from dex_agents.domain.messages import AgentUserMessage
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.tools import ToolCallCompleted
from dex_agents.infrastructure.step_tracing import step_tracer
from dex_agents.testing.memory._channels import (
    InMemoryResolutionPublisher,
    InMemoryToolResultPublisher,
    InMemoryUserMessageQueue,
)
from dex_agents.testing.memory._clock import ManualClock
from dex_agents.testing.memory._deliveries import InMemoryDeliveryLedger
from dex_agents.testing.memory._loads import LoadGate
from dex_agents.testing.memory._stores import (
    InMemoryCancelRequestStore,
    InMemoryHistorySummaryStore,
    InMemoryInterruptStore,
    InMemoryMessageLog,
    InMemoryRunStateStore,
    InMemorySessionStateStore,
    InMemorySteeredMessageStore,
    InMemoryToolCallStore,
    InMemoryUsageStore,
)
from dex_agents.testing.runner_doubles import RecordingEventSink, RecordingHeartbeat, ScriptedRunner

FLOW_ID = "session-1"


StepUseCaseT = TypeVar("StepUseCaseT", bound=Wired)


_FAILURE_RECORDS: dict[StepName, type[RecordTurnFailure]] = {
    StepName.RECORD_TURN_FAILURE: RecordTurnFailure,
    StepName.RECORD_RESUME_FAILURE: RecordResumeFailure,
    StepName.RECORD_START_FAILURE: RecordStartFailure,
}


class InMemorySessionSteps:
    """One agent session whose ports are all in-memory fakes, one method per Step and RPC.

    `InMemorySessionHost` derives from it and adds the driver.
    """

    def __init__(
        self,
        runner: AgentFrameworkRunner | None = None,
        *,
        options: AgentSessionOptions | None = None,
        clock: ManualClock | None = None,
        flow_id: str = FLOW_ID,
    ) -> None:
        self.runner: AgentFrameworkRunner = ScriptedRunner() if runner is None else runner
        self.options = AgentSessionOptions() if options is None else options
        self.clock = ManualClock() if clock is None else clock
        self.flow_id = flow_id
        self.gate = LoadGate()
        """What the running Step or RPC declared it reads; the ports refuse the rest within it."""
        self.state = InMemorySessionStateStore()
        self.messages = InMemoryMessageLog(gate=self.gate)
        self.run_state = InMemoryRunStateStore(gate=self.gate)
        self.tool_calls = InMemoryToolCallStore(gate=self.gate)
        self.interrupts = InMemoryInterruptStore()
        self.usage = InMemoryUsageStore()
        self.queue = InMemoryUserMessageQueue(gate=self.gate)
        self.resolutions = InMemoryResolutionPublisher()
        self.results = InMemoryToolResultPublisher()
        self.summaries = InMemoryHistorySummaryStore(gate=self.gate)
        self.steering = InMemoryUserMessageQueue(gate=self.gate)
        self.steered = InMemorySteeredMessageStore()
        self.cancel_request = InMemoryCancelRequestStore()
        self.sink = RecordingEventSink()
        self.deliveries = InMemoryDeliveryLedger(self.sink)
        self.heartbeat = RecordingHeartbeat()
        self.tracer = step_tracer(self.options)
        """Opens each Step attempt's span when ``options.tracing`` is on, as the Dex binding does."""
        self.writers: list[AgentEventWriter] = []
        self.executed: list[tuple[StepName, object, int]] = []
        """Every Step attempt run so far: (Step, input, attempt)."""
        self._executions = count(1)
        self._window: ModelWindow | _Unset | None = _UNSET

    @property
    def scripted(self) -> ScriptedRunner:
        """The runner, which a test built as a `ScriptedRunner`."""
        assert isinstance(self.runner, ScriptedRunner)
        return self.runner

    @property
    def ports(self) -> SessionPorts:
        """The session's ports, as a host hands them to the use cases."""
        return SessionPorts(
            session_state=self.state,
            messages=self.messages,
            run_state=self.run_state,
            tool_calls=self.tool_calls,
            interrupts=self.interrupts,
            usage=self.usage,
            queue=self.queue,
            resolutions=self.resolutions,
            results=self.results,
            summaries=self.summaries,
            steering=self.steering,
            steered=self.steered,
            cancel_request=self.cancel_request,
        )

    @property
    def agent(self) -> AgentSetup:
        """The runner, options and clock, as the Steps of one agent share them."""
        return AgentSetup(runner=self.runner, options=self.options, clock=self.clock, deliveries=self.deliveries)

    # -- building use cases -------------------------------------------------

    def build(self, use_case: type[StepUseCaseT], events: AgentEventWriter) -> StepUseCaseT:
        """Build a Step's use case as a host does: its ``wired`` factory over this session's ports."""
        return use_case.wired(self.ports, self.agent, events=events, heartbeat=self.heartbeat)

    def step_call(self, step: StepName, *, attempt: int = 1, step_execution_id: str | None = None) -> StepCall:
        """Return the invocation of one Step attempt."""
        if step_execution_id is None:
            step_execution_id = f"{step.value}-{next(self._executions)}"
        return StepCall(flow_id=self.flow_id, step_execution_id=step_execution_id, attempt=attempt)

    def writer(self, call: StepCall, *, turn_id: str | None = None, trace: StepTrace | None = None) -> AgentEventWriter:
        """Return an event writer for ``call``, bound to ``turn_id`` or else the active turn."""
        if turn_id is None and self.state.value is not None:
            turn_id = self.state.value.active_turn_id
        writer = AgentEventWriter(
            self.sink if trace is None else trace.sink(self.sink),
            turn_id=turn_id,
            step_execution_id=call.step_execution_id,
            attempt=call.attempt,
            max_event_bytes=self.options.max_event_bytes,
        )
        self.writers.append(writer)
        return writer

    @contextlib.contextmanager
    def moving(self, move: GoTo) -> Iterator[None]:
        """Within the block, Steps run as the movement ``move`` started them (its window loaded)."""
        self._window = move.window
        try:
            yield
        finally:
            self._window = _UNSET

    def loaded(self, step: StepName, step_input: object) -> Loaded:
        """What an attempt of ``step`` may read: its declaration, for the movement running (`moving`).

        Called outside a movement (a test runs the Step directly), a tool Step loads the history its
        call reads, as the movement the model's Step started it with does.
        """
        declaration = STEP_DECLARATIONS[step]
        tool_call_id = step_input if isinstance(step_input, str) and declaration.takes_tool_call else None
        window = self._window
        if isinstance(window, _Unset):
            with self.gate.loading(EVERYTHING, "the host"):
                record = None if tool_call_id is None else self.tool_calls.get(tool_call_id)
            window = None if record is None else record.history_window
        return declaration.loaded(window=window, step_input=tool_call_id)

    @contextlib.contextmanager
    def attempt(
        self, step: StepName, call: StepCall, step_input: object, *, turn_id: str | None = None
    ) -> Iterator[AgentEventWriter]:
        """One Step attempt's writer, closed when the block ends; in the attempt's span when the session is traced.

        Within the block the ports refuse what the Step's declaration does not load.
        """
        with self.gate.loading(self.loaded(step, step_input), step.value):
            if self.tracer is None:
                events = self.writer(call, turn_id=turn_id)
                try:
                    yield events
                finally:
                    events.close()
                return
            with self.tracer.attempt(step, call, self.ports, step_input) as trace:
                events = self.writer(call, turn_id=turn_id, trace=trace)
                try:
                    yield events
                finally:
                    events.close()

    def rpc(self, name: RpcName) -> "contextlib.AbstractContextManager[None]":
        """The block of one RPC call: the ports refuse what its declaration does not load."""
        return self.gate.loading(RPC_DECLARATIONS[name].loaded(), name.value)

    def _ran(self, step: StepName, step_input: object, call: StepCall | None = None) -> None:
        self.executed.append((step, step_input, 1 if call is None else call.attempt))

    # -- Steps ----------------------------------------------------------------

    async def start(self, initial_message: str | None = None) -> Next:
        call = self.step_call(StepName.START_AGENT_SESSION)
        self._ran(StepName.START_AGENT_SESSION, initial_message)
        start = AgentSessionStartInput(initial_message=initial_message)
        with self.attempt(StepName.START_AGENT_SESSION, call, start) as events:
            return await self.build(StartAgentSession, events).execute(start)

    async def await_user_message(self, delivered: Sequence[AgentUserMessage], *, steered: bool = False) -> Next:
        call = self.step_call(StepName.AWAIT_USER_MESSAGE)
        self._ran(StepName.AWAIT_USER_MESSAGE, None)
        with self.attempt(StepName.AWAIT_USER_MESSAGE, call, None) as events:
            return await self.build(AwaitUserMessage, events).execute(delivered, steered=steered)

    def announce_finished_turn(self) -> None:
        """Run what ``AwaitUserMessage`` does before it waits (its ``wait_for``)."""
        call = self.step_call(StepName.AWAIT_USER_MESSAGE)
        events = self.writer(call, turn_id=None)
        waiting = STEP_DECLARATIONS[StepName.AWAIT_USER_MESSAGE].wait_loaded()
        try:
            with self.gate.loading(waiting, "AwaitUserMessage.wait_for"):
                self.build(AwaitUserMessage, events).announce_finished_turn()
        finally:
            events.close()

    def run_model_use_case(self, events: AgentEventWriter) -> RunModel:
        return self.build(RunModel, events)

    async def run_model(self, *, attempt: int = 1, step_execution_id: str | None = None) -> Next:
        call = self.step_call(StepName.RUN_MODEL, attempt=attempt, step_execution_id=step_execution_id)
        self._ran(StepName.RUN_MODEL, None, call)
        with self.attempt(StepName.RUN_MODEL, call, None) as events:
            return await self.run_model_use_case(events).execute(call)

    def approval(self, *, turn_id: str | None = None) -> tuple[AwaitToolApproval, AgentEventWriter]:
        call = self.step_call(StepName.AWAIT_TOOL_APPROVAL)
        events = self.writer(call, turn_id=turn_id)
        use_case = self.build(AwaitToolApproval, events)
        return use_case, events

    def plan_approval(self, tool_call_id: str) -> ApprovalWait | None:
        use_case, events = self.approval()
        events.close()
        waiting = STEP_DECLARATIONS[StepName.AWAIT_TOOL_APPROVAL].wait_loaded(step_input=tool_call_id)
        with self.gate.loading(waiting, "AwaitToolApproval.wait_for"):
            return use_case.plan_wait(tool_call_id, engine_now=self.clock.now())

    async def await_tool_approval(
        self,
        tool_call_id: str,
        *,
        resolution: AgentInterruptResolution | None = None,
        timer_fired: bool = False,
        attempt: int = 1,
    ) -> Next:
        call = self.step_call(StepName.AWAIT_TOOL_APPROVAL, attempt=attempt)
        self._ran(StepName.AWAIT_TOOL_APPROVAL, tool_call_id)
        with self.attempt(StepName.AWAIT_TOOL_APPROVAL, call, tool_call_id) as events:
            use_case = self.build(AwaitToolApproval, events)
            return await use_case.execute(tool_call_id, resolution=resolution, timer_fired=timer_fired, attempt=attempt)

    async def call_tool(self, tool_call_id: str, *, attempt: int = 1, step_execution_id: str | None = None) -> Next:
        return await self._tool_step(StepName.CALL_TOOL, tool_call_id, attempt, step_execution_id)

    async def call_single_attempt_tool(
        self, tool_call_id: str, *, attempt: int = 1, step_execution_id: str | None = None
    ) -> Next:
        return await self._tool_step(StepName.CALL_SINGLE_ATTEMPT_TOOL, tool_call_id, attempt, step_execution_id)

    async def _tool_step(self, step: StepName, tool_call_id: str, attempt: int, step_execution_id: str | None) -> Next:
        call = self.step_call(step, attempt=attempt, step_execution_id=step_execution_id)
        kind: type[CallTool] | type[CallSingleAttemptTool] | type[ReconcileToolCall]
        match step:
            case StepName.CALL_TOOL:
                kind = CallTool
            case StepName.CALL_SINGLE_ATTEMPT_TOOL:
                kind = CallSingleAttemptTool
            case _:
                kind = ReconcileToolCall
        self._ran(step, tool_call_id, call)
        with self.attempt(step, call, tool_call_id, turn_id=self._turn_of(tool_call_id)) as events:
            return await self.build(kind, events).execute(call, tool_call_id)

    async def reconcile_tool_call(
        self, tool_call_id: str, *, attempt: int = 1, step_execution_id: str | None = None
    ) -> Next:
        return await self._tool_step(StepName.RECONCILE_TOOL_CALL, tool_call_id, attempt, step_execution_id)

    async def record_tool_failure(self, tool_call_id: str, *, recovery_error: str = "attempts exhausted") -> Next:
        return await self._tool_failure_route(StepName.RECORD_TOOL_FAILURE, tool_call_id, recovery_error)

    async def record_tool_outcome_unknown(self, tool_call_id: str, *, recovery_error: str = "attempt failed") -> Next:
        return await self._tool_failure_route(StepName.RECORD_TOOL_OUTCOME_UNKNOWN, tool_call_id, recovery_error)

    async def _tool_failure_route(self, step: StepName, tool_call_id: str, recovery_error: str) -> Next:
        call = self.step_call(step)
        kind = RecordToolFailure if step is StepName.RECORD_TOOL_FAILURE else RecordToolOutcomeUnknown
        self._ran(step, tool_call_id)
        with self.attempt(step, call, tool_call_id, turn_id=self._turn_of(tool_call_id)) as events:
            return await self.build(kind, events).execute(tool_call_id, recovery_error=recovery_error)

    async def resume_turn(
        self, delivered: Sequence[ToolCallCompleted], steered: Sequence[AgentUserMessage] = ()
    ) -> Next:
        self._ran(StepName.RESUME_TURN, len(delivered))
        with self.attempt(StepName.RESUME_TURN, self.step_call(StepName.RESUME_TURN), len(delivered)) as events:
            return await self.build(ResumeTurn, events).execute(delivered, steered)

    async def record_turn_failure(
        self,
        *,
        recovery_error: str = "model failed",
        start: AgentSessionStartInput | None = None,
        step: StepName = StepName.RECORD_TURN_FAILURE,
    ) -> Next:
        call = self.step_call(step)
        self._ran(step, start)
        use_case = _FAILURE_RECORDS[step]  # as the Dex binding: the record of the Step that failed
        with self.attempt(step, call, start) as events:
            return await self.build(use_case, events).execute(recovery_error=recovery_error, start=start)

    async def compact_history(
        self, reason: str = "policy", *, attempt: int = 1, step_execution_id: str | None = None
    ) -> Next:
        call = self.step_call(StepName.COMPACT_HISTORY, attempt=attempt, step_execution_id=step_execution_id)
        self._ran(StepName.COMPACT_HISTORY, reason, call)
        with self.attempt(StepName.COMPACT_HISTORY, call, reason) as events:
            return await self.build(CompactHistory, events).execute(call, reason)

    async def record_compaction_failure(self, reason: str, *, recovery_error: str = "compaction failed") -> Next:
        call = self.step_call(StepName.RECORD_COMPACTION_FAILURE)
        self._ran(StepName.RECORD_COMPACTION_FAILURE, reason)
        with self.attempt(StepName.RECORD_COMPACTION_FAILURE, call, reason) as events:
            return await self.build(RecordCompactionFailure, events).after_compaction(
                reason, recovery_error=recovery_error
            )

    def _turn_of(self, tool_call_id: str) -> str | None:
        record = self.tool_calls.get(tool_call_id)
        return None if record is None else record.turn_id


class _Unset:
    """No movement is running: a test runs a Step directly."""


_UNSET = _Unset()
