"""Pieces several Step use cases share."""

from datetime import datetime, timedelta

import attrs

from dex_agents.application.compaction import model_movement
from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.inputs import text_refusal
from dex_agents.application.next import End, GoTo, Next, StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.policies import tool_step_name
from dex_agents.application.ports import (
    Clock,
    HistorySummaryStore,
    InterruptStore,
    MessageLog,
    RunStateStore,
    SessionStateStore,
    ToolCallStore,
    ToolResultPublisher,
    UsageStore,
)
from dex_agents.application.runner import AgentFrameworkRunner, ToolCallHistory
from dex_agents.application.wiring import Wired
from dex_agents.domain import events as ev
from dex_agents.domain.history import ModelWindow
from dex_agents.domain.interrupts import AgentInterrupt, InterruptKind
from dex_agents.domain.limits import ERROR_TEXT_BYTES, cap_text
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.tools import AgentToolCall, ToolCallCompleted, ToolCallStatus
from dex_agents.domain.turns import validate_user_message
from dex_agents.domain.usage import AgentUsage


@attrs.frozen(kw_only=True)
class TurnOpener(Wired):
    """Starts a turn with a user message, or records a turn that could not start."""

    runner: AgentFrameworkRunner
    options: AgentSessionOptions
    session_state: SessionStateStore
    messages: MessageLog
    events: AgentEventWriter

    def begin(self, text: str, state: AgentState, *, client_message_id: str | None = None) -> Next:
        """Start a turn with ``text``: the model next, or, when the turn cannot start, ``AwaitUserMessage``.

        The model next is ``RunModel``, or ``CompactHistory`` first when the
        context is over budget (`model_movement`).

        The stored user message keeps the application's ``client_message_id``.
        The text is checked as the client checks it (a raw ``start_flow`` or
        channel publish bypasses the client). A refused text, or a runner whose
        `build_user_message` raises or breaks the contract, fails the new turn at
        once: ``last_turn_error`` says why, ``turn_failed`` is written, and the
        session waits for the next message. Retrying cannot help a deterministic
        runner bug, so this does not raise.
        """
        started = state.start_turn()
        turn_id = started.active_turn_id
        assert turn_id is not None
        refused = text_refusal(text, options=self.options, field="text", what="the user message")
        if refused is not None:
            return self.fail_new(started, str(refused), client_message_id=client_message_id)
        try:
            user_message = self.runner.build_user_message(text)
            validate_user_message(user_message)
        except Exception as error:  # noqa: BLE001 - a runner bug fails this turn, never the session
            reason = f"the runner could not build the user message: {describe_exception(error)}"
            return self.fail_new(started, reason, client_message_id=client_message_id)
        sequence = started.next_sequence
        stored = AgentMessage.stored(
            user_message, sequence=sequence, turn_id=turn_id, client_message_id=client_message_id
        )
        self.messages.append(stored)
        opened = started.with_messages_stored([stored])
        self.session_state.set(opened)
        self.events.write(ev.turn_started(sequence, client_message_id), turn_id=turn_id)
        return model_movement(opened, self.options.compaction)

    def fail_new(self, started: AgentState, reason: str, *, client_message_id: str | None = None) -> Next:
        """Record a turn that failed before its user message was stored; ``AwaitUserMessage`` next."""
        turn_id = started.active_turn_id
        error = cap_text(reason, ERROR_TEXT_BYTES, what="the error")
        self.session_state.set(started.fail_turn(error))
        self.events.write(ev.turn_failed(error, client_message_id), turn_id=turn_id)
        return GoTo(step=StepName.AWAIT_USER_MESSAGE)


@attrs.frozen(kw_only=True)
class HistoryReader(Wired):
    """Reads the turn's history a Step loaded: a model window's messages and summary, and the run state."""

    messages: MessageLog
    summaries: HistorySummaryStore
    run_state: RunStateStore

    def read(self, window: ModelWindow) -> ToolCallHistory:
        """Return the messages of ``window``, the summary that opens it (if any) and the turn's run state."""
        summary = None if window.summary_number is None else self.summaries.get(window.summary_number)
        return ToolCallHistory(
            messages=self.messages.read(window.sequences),
            summary=summary,
            framework_run_state=self.run_state.get(),
        )


@attrs.frozen(kw_only=True)
class UsageMeter(Wired):
    """Adds what a Step used to the session's usage and writes ``usage_recorded``."""

    usage: UsageStore
    events: AgentEventWriter

    def add(self, used: AgentUsage) -> None:
        """Add ``used`` to the session's total and write ``usage_recorded`` with both."""
        total = self.usage.get() + used
        self.usage.set(total)
        self.events.write(ev.usage_recorded(used, total))

    def add_from_tools(self, used: AgentUsage) -> None:
        """Add what tool calls reported; ``usage_recorded`` only when it holds model usage (a sub-agent's).

        A tool's own count (`AgentUsage.tool_calls` alone) joins the total with no event of its own, one live
        event less per tool call: the snapshot's usage holds it, and so does the next ``usage_recorded`` total
        (the turn's next model call's, unless that Step ends the turn without calling the model).
        """
        if attrs.evolve(used, tool_calls=0).is_zero:
            self.usage.set(self.usage.get() + used)
            return
        self.add(used)


def describe_exception(error: BaseException) -> str:
    """Return ``module.Type: message`` for ``error``, as the engine reports a Step's exception."""
    kind = type(error)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"{name}: {error}"


def tool_call_record(tool_calls: ToolCallStore, tool_call_id: str) -> AgentToolCall:
    """Return the record of the call a tool-call Step was started for (it always exists: the Step's input)."""
    record = tool_calls.get(tool_call_id)
    assert record is not None, f"no record for tool call {tool_call_id!r}"
    return record


@attrs.frozen(kw_only=True)
class ToolCallFinisher(Wired):
    """Stores a tool-call record that became final (publishing its one result), or settles an unknown outcome.

    A record that resumes the turn itself (`AgentToolCall.resumes_turn`: the model asked for this one call) has
    no ``ResumeTurn`` waiting for its result, so the Step that ends it does what ``ResumeTurn`` would: it counts
    the usage the call reported and the model comes next (`model_movement`). A user message steered meanwhile is
    taken by ``RunModel``, which sends it through ``ResumeTurn`` first (a Step sees its Channels as they were
    when it started, and a tool may run for minutes): the state says so (`AgentState.resumed_by_call`).
    """

    tool_calls: ToolCallStore
    results: ToolResultPublisher
    events: AgentEventWriter
    session_state: SessionStateStore
    usage_meter: UsageMeter
    options: AgentSessionOptions

    def finish(self, record: AgentToolCall) -> Next:
        """Store a record that just became final and publish its one result, or resume its turn; what is next."""
        assert record.is_final
        self.tool_calls.put(record)
        self.events.write(
            ev.tool_call_finished(
                record.tool_call_id,
                record.tool_name,
                record.status,
                output=record.output,
                error=record.error if record.error is not None else record.rejection_message,
            )
        )
        if not record.resumes_turn:
            self._publish(record)
            return End()
        if record.usage is not None:
            self.usage_meter.add_from_tools(record.usage)
        state = self.session_state.get()
        assert state is not None, "the session has not started"
        assert state.active_turn_id == record.turn_id, "the call's turn is not active"
        resumed = state.resume_model(by_call=True)
        self.session_state.set(resumed)
        return model_movement(resumed, self.options.compaction)

    def _publish(self, record: AgentToolCall) -> None:
        self.results.publish(
            ToolCallCompleted(tool_call_id=record.tool_call_id, turn_id=record.turn_id, status=record.status)
        )

    def settle_unknown(self, record: AgentToolCall, error: str) -> Next:
        """Record a single-attempt call whose outcome is unknown: reconcile it when its policy says so.

        A reconcilable record not yet reconciled is stored ``reconciling`` (nothing
        published) and ``ReconcileToolCall`` is next; any other becomes
        ``outcome_unknown`` with its one result published.
        """
        settled = record.unknown_outcome(error)
        if settled.is_final:
            return self.finish(settled)
        self.tool_calls.put(settled)
        return GoTo(step=StepName.RECONCILE_TOOL_CALL, input=record.tool_call_id)


def tool_step_movement(record: AgentToolCall) -> GoTo:
    """Return the movement to the Step that runs ``record``, loading the history it reads (if any)."""
    return GoTo(step=tool_step_name(record.policy.effect), input=record.tool_call_id, window=record.history_window)


def start_tool_call(
    record: AgentToolCall, *, now: datetime, options: AgentSessionOptions, events: AgentEventWriter
) -> tuple[GoTo, AgentInterrupt | None]:
    """Return the movement that starts a record (``pending``, ``awaiting_approval``, ``awaiting_result``).

    The new interrupt comes with it, when there is one.

    An ``awaiting_result`` record (an external call) goes to ``AwaitToolApproval``, which raises its
    interrupt under the lock; none is returned here.

    A call that waits for approval gets its pending interrupt and its ``interrupt_raised`` event here
    (`approval_interrupt`); the caller stores the interrupt.
    """
    if record.status is ToolCallStatus.PENDING:
        return tool_step_movement(record), None
    if record.status is ToolCallStatus.AWAITING_RESULT:
        return GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input=record.tool_call_id), None
    interrupt = approval_interrupt(record, now=now, options=options, events=events)
    return GoTo(step=StepName.AWAIT_TOOL_APPROVAL, input=record.tool_call_id), interrupt


def approval_interrupt(
    record: AgentToolCall, *, now: datetime, options: AgentSessionOptions, events: AgentEventWriter
) -> AgentInterrupt:
    """Return the approval interrupt of an ``awaiting_approval`` record, raised ``now``, and write ``interrupt_raised``.

    Its display deadline is ``now`` plus ``interrupt_deadline``; the caller stores the interrupt. The same for a
    call whose policy asks (raised as it starts) and for one whose tool asked while its Step ran.
    """
    assert record.status is ToolCallStatus.AWAITING_APPROVAL
    assert record.interrupt_id is not None
    return raised_interrupt(
        record,
        record.interrupt_id,
        kind=InterruptKind.APPROVAL,
        limit=options.interrupt_deadline,
        now=now,
        events=events,
    )


def raised_interrupt(
    record: AgentToolCall,
    interrupt_id: str,
    *,
    kind: InterruptKind,
    limit: timedelta | None,
    now: datetime,
    events: AgentEventWriter,
) -> AgentInterrupt:
    """Return ``record``'s interrupt ``interrupt_id`` of ``kind``, raised ``now``, and write ``interrupt_raised``.

    Its display deadline is ``now`` plus ``limit`` (none without a limit); the caller stores the interrupt. An
    approval binds the call's digest; a result interrupt binds none.
    """
    deadline = None if limit is None else now + limit
    interrupt = AgentInterrupt(
        interrupt_id=interrupt_id,
        turn_id=record.turn_id,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        arguments=record.arguments,
        raised_at=now,
        deadline=deadline,
        call_digest=record.digest if kind is InterruptKind.APPROVAL else None,
        kind=kind,
    )
    events.write(ev.interrupt_raised(interrupt_id, record.tool_call_id, record.tool_name, deadline, kind=kind.value))
    return interrupt


@attrs.frozen(kw_only=True)
class ToolCallStarter(Wired):
    """Stores tool-call records and starts them: the movement to each one's Step, and its interrupt raised.

    One `starting` batch per Step: the records are stored and started one at a time (so each call's events
    stay in order), and the pending interrupts are written once at the end.
    """

    options: AgentSessionOptions
    clock: Clock
    tool_calls: ToolCallStore
    interrupts: InterruptStore
    events: AgentEventWriter

    def starting(self) -> "ToolCallStart":
        """Open a batch: the start time and the pending interrupts are read once, now."""
        return ToolCallStart(starter=self, now=self.clock.now(), pending=list(self.interrupts.get()))


@attrs.define(kw_only=True)
class ToolCallStart:
    """One Step's starting of tool calls (`ToolCallStarter.starting`)."""

    starter: ToolCallStarter
    now: datetime
    pending: list[AgentInterrupt]
    raised: int = 0

    def store(self, record: AgentToolCall) -> None:
        """Store ``record``."""
        self.starter.tool_calls.put(record)

    def start(self, record: AgentToolCall) -> GoTo:
        """Return the movement that starts ``record`` (`start_tool_call`); its interrupt joins the pending ones."""
        movement, interrupt = start_tool_call(
            record, now=self.now, options=self.starter.options, events=self.starter.events
        )
        if interrupt is not None:
            self.pending.append(interrupt)
            self.raised += 1
        return movement

    def store_interrupts(self, *, unchanged_too: bool) -> None:
        """Write the pending interrupts: always when ``unchanged_too``, else only when one was raised.

        Unlocked: every started call of the turn is final, or none had started, so no interrupt of the
        turn is pending for an RPC to remove; a cancel committed meanwhile is applied by AwaitToolApproval.
        """
        if unchanged_too or self.raised:
            self.starter.interrupts.set(self.pending)
