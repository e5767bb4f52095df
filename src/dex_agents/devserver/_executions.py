"""How the dev server drives a run's Step executions, from scheduling to the decision that closes the run."""

import asyncio
from typing import Any

from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._attempts import Failed, MethodAttempts
from dex_agents.devserver._clock import ServerClock
from dex_agents.devserver._conditions import condition_results, match_conditions
from dex_agents.devserver._config import DevServerConfig
from dex_agents.devserver._history import flow_closed, record, record_failure, record_success
from dex_agents.devserver._state import Execution, Phase, Run, add_result, commit, skip_timer, take_messages
from dex_agents.devserver._store import StoreWriteError
from dex_agents.devserver._workers import AttemptError


class StepExecutions:
    """Drives the Step executions of every run (the base of `Engine`).

    It schedules them, runs their attempts, waits on their conditions, applies
    their decisions and closes the run when they are done.
    """

    config: DevServerConfig
    clock: ServerClock
    _methods: MethodAttempts
    _tasks: "set[asyncio.Task[Any]]"

    def _spawn(self, coroutine: Any) -> "asyncio.Task[Any]":
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------------ scheduling

    def _schedule(
        self,
        run: Run,
        movement: pb.StepMovement,
        from_id: str,
        recovery: pb.RecoveryErrorInfo | None = None,
    ) -> None:
        number = run.counters.get(movement.step_type, 0) + 1
        run.counters[movement.step_type] = number
        execution = Execution(
            id=f"{movement.step_type}-{number}",
            step_type=movement.step_type,
            movement=movement,
            from_id=from_id,
            recovery=recovery,
            started_at=self.clock.now(),
        )
        run.executions[execution.id] = execution
        run.journal.run(run)
        run.journal.execution(run, execution)
        execution.scheduled_seq = run.journal_seq
        execution.task = self._spawn(self._drive(run, execution))

    def resume(self, run: Run, execution: Execution) -> None:
        """Drive an execution read from the data dir on from the phase it was in."""
        run.executions[execution.id] = execution
        execution.task = self._spawn(self._drive(run, execution))

    async def _drive(self, run: Run, execution: Execution) -> None:
        """Run an execution from the phase it is in (a resumed one may be past ``wait_for``)."""
        options = execution.movement.step_options
        try:
            # What scheduled the execution (its predecessor's completion) is on disk before a Worker sees it.
            await run.journal.durable(execution.scheduled_seq)
            waits_first = execution.phase == Phase.WAIT_FOR and not options.skip_wait_for
            if waits_first and not await self._wait_for(run, execution):
                return
            if execution.phase == Phase.WAITING:
                await self._await_condition(run, execution)
            # What satisfied the condition (the messages it took) is on disk before execute runs on them.
            await run.journal.durable(run.journal_seq)
            execution.phase = Phase.EXECUTE
            outcome = await self._methods.run_method(run, execution, "execute")
            if isinstance(outcome, Failed):
                record_failure(run, execution, "execute", outcome, self.clock.now())
                self._forget(run, execution)
                if options.execute_failure_policy == (pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP):
                    self._schedule(
                        run,
                        pb.StepMovement(
                            step_type=options.execute_failure_proceed_step_type,
                            step_input=execution.movement.step_input,
                            step_options=options.execute_failure_proceed_step_options,
                        ),
                        execution.id,
                        pb.RecoveryErrorInfo(detail=outcome.error.detail, error_type=outcome.error.error_type),
                    )
                else:
                    self._fail_flow(run, execution, "execute", outcome.error)
                return
            response = outcome.response
            commit(
                run,
                response.upsert_attributes,
                response.publish_to_channel,
                response.delete_from_channel,
            )
            record_success(run, execution, "execute", outcome, self.clock.now())
            self._forget(run, execution)
            self._decide(run, execution, response.step_decision)
            self._evaluate(run)
        except StoreWriteError:
            return  # the engine reloads its data dir and drives the execution again
        finally:
            execution.phase = Phase.DONE
            run.executions.pop(execution.id, None)
            self._maybe_complete(run)
            run.journal.flush()

    def _forget(self, run: Run, execution: Execution) -> None:
        run.executions.pop(execution.id, None)
        execution.phase = Phase.DONE
        run.journal.execution_done(run, execution.id)

    async def _wait_for(self, run: Run, execution: Execution) -> bool:
        """Run ``wait_for`` and take its condition; ``False`` when its failure failed the Flow."""
        options = execution.movement.step_options
        wait_outcome = await self._methods.run_method(run, execution, "wait_for")
        if isinstance(wait_outcome, Failed):
            record_failure(run, execution, "wait_for", wait_outcome, self.clock.now())
            if options.wait_for_failure_policy != (pb.WAIT_FOR_METHOD_FAILURE_POLICY_PROCEED_ON_FAILURE):
                self._fail_flow(run, execution, "wait_for", wait_outcome.error)
                return False
            execution.results = pb.ConditionResults(wait_for_failed=True)
            execution.recovery = pb.RecoveryErrorInfo(
                detail=wait_outcome.error.detail,
                error_type=wait_outcome.error.error_type,
            )
            execution.phase = Phase.SATISFIED
            run.journal.execution(run, execution)
            run.journal.flush()
            return True
        response = wait_outcome.response
        commit(
            run,
            response.upsert_attributes,
            response.publish_to_channel,
            response.delete_from_channel,
        )
        for kv in response.upsert_step_exe_locals:
            execution.locals[kv.key] = kv.value
        record_success(run, execution, "wait_for", wait_outcome, self.clock.now())
        if response.HasField("waiting_condition"):
            self._start_waiting(run, execution, response.waiting_condition)
        else:
            execution.phase = Phase.SATISFIED
            self._evaluate(run)
        run.journal.execution(run, execution)
        run.journal.flush()
        return True

    def _start_waiting(self, run: Run, execution: Execution, waiting: pb.WaitingCondition) -> None:
        now = self.clock.now()
        execution.waiting = waiting
        execution.phase = Phase.WAITING
        execution.wait_sequence = run.next_wait
        run.next_wait += 1
        run.journal.run(run)
        # As superdurable/dex's FixTimerConditionFromActivityOutput (server/service/interpreter/timers/utils.go):
        # firing time = the server's now + duration_seconds, fixed when the wait is accepted; no Worker clock.
        # The deadline is stored with the execution, so time the server was down counts towards it.
        execution.timer_deadlines = [now + t.duration_seconds for t in waiting.timer_conditions]
        for skip in [s for s in run.pending_skips if s[0] == execution.id]:
            run.pending_skips.remove(skip)
            skip_timer(execution, skip[1], skip[2], now)

    async def _await_condition(self, run: Run, execution: Execution) -> None:
        waiting = execution.waiting
        assert waiting is not None
        self._evaluate(run)
        watcher = self._spawn(self._watch_timers(run, execution)) if waiting.timer_conditions else None
        try:
            await execution.satisfied.wait()
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _watch_timers(self, run: Run, execution: Execution) -> None:
        while execution.phase == Phase.WAITING:
            now = self.clock.now()
            pending = [
                deadline
                for index, deadline in enumerate(execution.timer_deadlines)
                if index not in execution.skipped_timers and deadline > now
            ]
            if not pending:
                return
            await self.clock.sleep_until(min(pending))
            self._evaluate(run)

    # ------------------------------------------------------------------ conditions

    def _evaluate(self, run: Run) -> None:
        if not run.running:
            return
        waiting = sorted(
            (e for e in run.executions.values() if e.phase == Phase.WAITING),
            key=lambda e: e.wait_sequence,
            reverse=self.config.waiter_order == "newest_first",
        )
        for execution in waiting:
            results = self._try_satisfy(run, execution)
            if results is not None:
                execution.results = results
                execution.phase = Phase.SATISFIED
                execution.satisfied.set()
                run.journal.execution(run, execution)
                run.journal.flush()

    def _try_satisfy(self, run: Run, execution: Execution) -> pb.ConditionResults | None:
        waiting = execution.waiting
        assert waiting is not None
        now = self.clock.now()
        timer_ready = [
            index in execution.skipped_timers or now >= deadline
            for index, deadline in enumerate(execution.timer_deadlines)
        ]
        sizes = {name: len(queue) for name, queue in run.channels.items()}
        selected = match_conditions(waiting, timer_ready, sizes)
        if not selected:
            return None
        return condition_results(waiting, selected, lambda condition, reserved: take_messages(run, condition, reserved))

    # ------------------------------------------------------------------ decisions

    def _decide(self, run: Run, execution: Execution, decision: pb.StepDecision) -> None:
        for step_type in decision.cancel_step_types:
            self._cancel_where(run, lambda e, t=step_type: e.step_type == t)
        for step_type in decision.cancel_sibling_step_types:
            self._cancel_where(
                run,
                lambda e, t=step_type: e.step_type == t and e.from_id == execution.from_id,
            )
        close = decision.close_decision
        close_type = close.close_decision_type
        if close_type == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE_ON_CHANNELS_EMPTY and all(
            not run.channels.get(name) for name in close.conditional_channel_names
        ):
            add_result(run, execution, close)
            self._close(run, pb.FLOW_STATUS_COMPLETED, 0, "")
            return
        for movement in decision.next_steps:
            self._schedule(run, movement, execution.id)
        if close_type == pb.CLOSE_DECISION_TYPE_GRACEFUL_COMPLETE:
            add_result(run, execution, close)
            run.graceful = True
            run.journal.run(run)
        elif close_type == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE:
            add_result(run, execution, close)
            self._close(run, pb.FLOW_STATUS_COMPLETED, 0, "")
        elif close_type == pb.CLOSE_DECISION_TYPE_FORCE_FAIL:
            self._close(
                run,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW,
                close.close_input.string_value,
            )

    def _cancel_where(self, run: Run, predicate: Any) -> None:
        for execution in list(run.executions.values()):
            if predicate(execution):
                self._forget(run, execution)
                if execution.task is not None and execution.task is not asyncio.current_task():
                    execution.task.cancel()

    def _maybe_complete(self, run: Run) -> None:
        if run.running and run.graceful and not run.closing and not run.executions:
            self._close(run, pb.FLOW_STATUS_COMPLETED, 0, "")

    def _fail_flow(self, run: Run, execution: Execution, method: str, error: AttemptError) -> None:
        self._close(
            run,
            pb.FLOW_STATUS_FAILED,
            pb.FLOW_ERROR_TYPE_WORKER_API_FAIL,
            f"{execution.id} {method} failed: {error.error_type}: {error.detail}",
        )

    def _close(self, run: Run, status: int, error_type: int, message: str) -> None:
        if not run.running:
            return
        run.status = status
        run.error_type = error_type
        run.error_message = message
        run.closed_at = self.clock.now()
        run.close_request = None
        self._cancel_where(run, lambda _: True)
        record(run, self.clock.now(), flow_closed=flow_closed(run))
        run.journal.run(run)
        run.journal.flush()
        run.closed.set()
