"""Drive a runner through whole turns as the session would, without an engine.

`SessionDriver` stores messages, resolves policies from `AgentSessionOptions`,
answers approvals through a callback and runs each tool call once through the
runner: `ToolExecutionError` records ``failed``, any other exception counts as
a Step failure whose record is what exhausted retries give (``failed`` for a
read, ``outcome_unknown`` otherwise). A model Step that raises fails the turn
as ``RecordTurnFailure`` does: the turn-failure note is stored.
"""

from collections.abc import Callable

import attrs

from dex_agents import (
    AgentFrameworkRunner,
    AgentMessage,
    AgentSessionOptions,
    AgentToolCall,
    DeferredToolCall,
    FrameworkMessage,
    ToolCallsRequested,
    ToolCallStatus,
    ToolExecutionError,
    TurnCompleted,
    build_turn_failure_note,
    is_approval_required,
)
from dex_agents.domain.interrupts import EXPIRED_REJECTION_MESSAGE, interrupt_id_for
from dex_agents.testing import RecordingEventSink, make_tool_execution, make_turn_context

Approval = bool | str | None
"""``True`` approves, ``False`` or a reason rejects, ``None`` lets the approval expire."""
"""``True`` approves; ``False`` rejects without a reason; a string rejects with it."""


@attrs.frozen(kw_only=True)
class Turn:
    """What one driven turn did."""

    turn_id: str
    outcomes: tuple[TurnCompleted | ToolCallsRequested, ...]
    records: tuple[AgentToolCall, ...]
    step_failures: tuple[BaseException, ...]
    error: BaseException | None

    @property
    def completed(self) -> TurnCompleted:
        last = self.outcomes[-1]
        assert isinstance(last, TurnCompleted), f"the turn did not complete: {self.error!r}"
        return last

    def record(self, tool_call_id: str) -> AgentToolCall:
        return next(r for r in self.records if r.tool_call_id == tool_call_id)


class SessionDriver:
    """One session of a runner, driven in memory."""

    def __init__(
        self,
        runner: AgentFrameworkRunner,
        *,
        options: AgentSessionOptions | None = None,
        session_id: str = "session-1",
        approve: Callable[[AgentToolCall], Approval] = lambda _record: True,
    ) -> None:
        self.runner = runner
        self.options = options or AgentSessionOptions()
        self.session_id = session_id
        self.approve = approve
        self.messages: list[AgentMessage] = []
        self.sink = RecordingEventSink()
        self.turn_count = 0

    def _store(self, message: FrameworkMessage, turn_id: str) -> None:
        self.messages.append(AgentMessage.stored(message, sequence=len(self.messages) + 1, turn_id=turn_id))

    async def turn(self, text: str, *, max_model_calls: int = 10) -> Turn:
        self.turn_count += 1
        turn_id = f"turn-{self.turn_count}"
        self._store(self.runner.build_user_message(text), turn_id)
        outcomes: list[TurnCompleted | ToolCallsRequested] = []
        records: dict[str, AgentToolCall] = {}
        failures: list[BaseException] = []
        state: str | None = None

        def ended(error: BaseException | None) -> Turn:
            return Turn(
                turn_id=turn_id,
                outcomes=tuple(outcomes),
                records=tuple(records.values()),
                step_failures=tuple(failures),
                error=error,
            )

        for attempt in range(max_model_calls):
            context = make_turn_context(
                messages=self.messages,
                flow_id=self.session_id,
                turn_id=turn_id,
                step_execution_id=f"RunModel-{attempt + 1}",
                framework_run_state=state,
                tool_calls=records.values(),
                options=self.options,
                sink=self.sink,
            )
            try:
                outcome = await self.runner.run_model_step(context)
            except Exception as error:  # noqa: BLE001 - the turn fails as RecordTurnFailure records it
                note = build_turn_failure_note(records.values())
                if note is not None:
                    self._store(self.runner.build_user_message(note), turn_id)
                return ended(error)
            outcomes.append(outcome)
            if isinstance(outcome, TurnCompleted):
                for message in outcome.new_messages:
                    self._store(message, turn_id)
                return ended(None)
            state = outcome.framework_run_state
            for requested in outcome.tool_calls:
                record = await self._run_call(turn_id, requested.tool_call_id, requested, len(records), failures)
                records[record.tool_call_id] = record
        raise AssertionError(f"turn {turn_id} made more than {max_model_calls} model calls")

    async def _run_call(
        self, turn_id: str, tool_call_id: str, requested: DeferredToolCall, order: int, failures: list[BaseException]
    ) -> AgentToolCall:
        needs_approval = is_approval_required(requested.policy)
        record = AgentToolCall(
            tool_call_id=tool_call_id,
            turn_id=turn_id,
            tool_name=requested.tool_name,
            arguments=requested.arguments,
            policy=requested.policy,
            deferral_order=order,
            status=ToolCallStatus.AWAITING_APPROVAL if needs_approval else ToolCallStatus.PENDING,
            interrupt_id=interrupt_id_for(turn_id, tool_call_id) if needs_approval else None,
            framework_state=requested.framework_state,
        )
        if needs_approval:
            answer = self.approve(record)
            if answer is None:
                return record.expire(EXPIRED_REJECTION_MESSAGE)
            if answer is not True:
                return record.reject(answer if isinstance(answer, str) else None)
            record = record.approve()
        execution = make_tool_execution(tool_call=record, flow_id=self.session_id, sink=self.sink)
        try:
            result = await self.runner.execute_deferred_tool_call(execution)
        except ToolExecutionError as error:
            return _with_state(record.fail(error.message), error.framework_state)
        except Exception as error:  # noqa: BLE001 - a Step failure, as the session's failure routes record it
            failures.append(error)
            return record.after_exhausted_retries(f"{type(error).__name__}: {error}")
        return _with_state(record.succeed(result.output), result.framework_state)


def _with_state(record: AgentToolCall, state: str | None) -> AgentToolCall:
    """The record with the runner's new per-call state, as ``CallTool`` keeps it (``None`` keeps the old)."""
    return record if state is None else attrs.evolve(record, framework_state=state)
