"""`InMemorySessionHost`: the in-memory session with a tiny driver that follows its "what next" values.

`InMemorySessionHost.drive` follows the decisions like a very small
engine: it retries failing Steps as `STEP_POLICIES` says and takes their
failure routes, delivers waits from the in-memory channels, fires an approval
Timer once the clock has reached it (the host's clock stands in for the
engine's), takes steered messages before queued ones and at every
``ResumeTurn``, and returns the Steps left waiting. The Steps and RPCs it
runs are `InMemorySessionSteps`' and `InMemorySessionRpcs`'.
"""

from collections import deque
from collections.abc import Awaitable, Callable

from dex_agents.application.next import End, GoTo, GoToMany, Next, StepName, WaitAgain
from dex_agents.application.policies import STEP_POLICIES
from dex_agents.testing.memory._rpcs import InMemorySessionRpcs


class InMemorySessionHost(InMemorySessionRpcs):
    """One agent session whose ports are all in-memory fakes, and a driver that runs its Steps."""

    async def drive(self, *decisions: Next) -> tuple[GoTo, ...]:
        """Follow ``decisions`` until nothing can go on; return the Steps left waiting."""
        ready: deque[GoTo] = deque()
        for first in decisions:
            ready.extend(movements(first))
        waiting: list[GoTo] = []
        while ready:
            while ready:
                await self._step(ready.popleft(), ready, waiting)
            retry, waiting = waiting, []
            for move in retry:
                await self._step(move, ready, waiting)
        return tuple(waiting)

    async def _step(self, move: GoTo, ready: deque[GoTo], waiting: list[GoTo]) -> None:
        decision = await self.deliver(move)
        if decision is None:
            waiting.append(move)
        elif isinstance(decision, WaitAgain):
            ready.append(GoTo(step=move.step, input=decision.input))
        else:
            ready.extend(movements(decision))

    async def deliver(self, move: GoTo) -> Next | None:
        """Run ``move`` if what it waits for is there; ``None`` when it must keep waiting.

        What the Step may read is its declaration's loads for this movement (`moving`).
        """
        with self.moving(move):
            return await self._deliver(move)

    async def _deliver(self, move: GoTo) -> Next | None:
        match move.step:
            case StepName.AWAIT_USER_MESSAGE:
                steered = self.steering.take_one()
                message = steered or self.queue.take_one()
                if message is None:
                    return None
                return await self._with_retries(
                    move, lambda _attempt, _execution: self.await_user_message([message], steered=steered is not None)
                )
            case StepName.AWAIT_TOOL_APPROVAL:
                assert isinstance(move.input, str)
                wait = self.plan_approval(move.input)
                if wait is None:
                    return await self.await_tool_approval(move.input)
                resolution = self.resolutions.take_one(wait.interrupt_id)
                fired = wait.timer is not None and wait.timer.total_seconds() <= 0
                if resolution is None and not fired:
                    return None
                return await self.await_tool_approval(move.input, resolution=resolution, timer_fired=fired)
            case StepName.RESUME_TURN:
                assert isinstance(move.input, int)
                if self.results.available < move.input:
                    return None
                delivered = self.results.take(move.input)
                steered_in = self.steering.take_all()
                return await self._with_retries(
                    move, lambda _attempt, _execution: self.resume_turn(delivered, steered_in)
                )
            case StepName.RUN_MODEL:
                return await self._with_retries(
                    move, lambda attempt, execution: self.run_model(attempt=attempt, step_execution_id=execution)
                )
            case StepName.COMPACT_HISTORY:
                reason = str(move.input)
                return await self._with_retries(
                    move,
                    lambda attempt, execution: self.compact_history(
                        reason, attempt=attempt, step_execution_id=execution
                    ),
                )
            case StepName.CALL_TOOL | StepName.CALL_SINGLE_ATTEMPT_TOOL | StepName.RECONCILE_TOOL_CALL:
                assert isinstance(move.input, str)
                tool_call_id = move.input
                return await self._with_retries(
                    move, lambda attempt, execution: self._tool_step(move.step, tool_call_id, attempt, execution)
                )
            case _:
                raise AssertionError(f"the driver does not start {move.step.value}")

    async def _with_retries(self, move: GoTo, run: Callable[[int, str], Awaitable[Next]]) -> Next:
        """Run ``run(attempt, step_execution_id)`` under the Step's policy, then its failure route."""
        policy = STEP_POLICIES[move.step]
        attempts = policy.maximum_attempts or 1
        execution = self.step_call(move.step).step_execution_id
        error: Exception | None = None
        for attempt in range(1, attempts + 1):
            try:
                return await run(attempt, execution)
            except Exception as failure:  # noqa: BLE001 - an engine retries whatever a Step raises
                error = failure
        assert policy.failure_route is not None
        detail = f"{type(error).__name__}: {error}"
        match policy.failure_route:
            case StepName.RECORD_TURN_FAILURE | StepName.RECORD_RESUME_FAILURE:
                return await self.record_turn_failure(recovery_error=detail, step=policy.failure_route)
            case StepName.RECORD_TOOL_FAILURE:
                assert isinstance(move.input, str)
                return await self.record_tool_failure(move.input, recovery_error=detail)
            case StepName.RECORD_TOOL_OUTCOME_UNKNOWN:
                assert isinstance(move.input, str)
                return await self.record_tool_outcome_unknown(move.input, recovery_error=detail)
            case StepName.RECORD_COMPACTION_FAILURE:
                return await self.record_compaction_failure(str(move.input), recovery_error=detail)
            case _:
                raise AssertionError(f"unexpected failure route {policy.failure_route}")


def movements(decision: Next) -> tuple[GoTo, ...]:
    """Return the movements a decision starts (none for ``End``)."""
    match decision:
        case GoTo():
            return (decision,)
        case GoToMany():
            return decision.movements
        case End():
            return ()
        case WaitAgain():
            raise AssertionError("WaitAgain is handled by the driver")
