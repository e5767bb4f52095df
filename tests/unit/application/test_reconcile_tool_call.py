"""Reconciling unknown outcomes: the ``reconciling`` transitions, ``RecordToolOutcomeUnknown``'s
route to ``ReconcileToolCall``, and what ``ReconcileToolCall`` records for each probe verdict."""

import pytest

from dex_agents.application.next import End, GoTo, StepName
from dex_agents.application.runner import DeferredToolExecution, ReconcileResult
from dex_agents.application.steps.call_tool import EARLIER_DELIVERY
from dex_agents.application.steps.reconcile_tool_call import NO_PROBE, PROBE_UNKNOWN
from dex_agents.domain import events as ev
from dex_agents.domain.errors import InvalidTransitionError
from dex_agents.domain.failure_note import NOT_APPLIED_TOOL_RESULT, describe_tool_call_outcome
from dex_agents.domain.tools import ToolCallCompleted, ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.testing import ScriptedRunner, deferred_tool_call, make_tool_call, tool_calls_requested
from dex_agents.testing.memory import InMemorySessionHost
from tests.unit.application.policies import NON_IDEMPOTENT_NO_APPROVAL

S = ToolCallStatus
RECONCILABLE = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False, reconcilable=True)


class ProbingRunner(ScriptedRunner):
    """A scripted runner with a reconcile probe that answers from a script, or raises."""

    def __init__(self, *args: object, probe: list[ReconcileResult | Exception], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.probe = probe
        self.probed: list[DeferredToolExecution] = []

    async def reconcile_tool_call(self, call: DeferredToolExecution) -> ReconcileResult:
        self.probed.append(call)
        answer = self.probe.pop(0) if len(self.probe) > 1 else self.probe[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def with_pending_call(
    policy: ToolPolicy,
    *,
    probe: list[ReconcileResult | Exception] | None = None,
    tool: object = "sent",
) -> InMemorySessionHost:
    # A sibling call, so c1's result is joined by ResumeTurn (test_lone_tool_call: a call asked for alone).
    calls = tool_calls_requested(
        deferred_tool_call("c1", "email", '{"to": "a"}', policy=policy),
        deferred_tool_call("sibling", "lookup", "{}", policy=ToolPolicy(ToolEffect.READ)),
    )
    replies = {"c1": tool, "sibling": "found"}
    runner: ScriptedRunner
    if probe is None:
        runner = ScriptedRunner([calls], tool_replies=replies)  # type: ignore[arg-type]
    else:
        runner = ProbingRunner([calls], tool_replies=replies, probe=probe)
    session = InMemorySessionHost(runner)
    await session.start("go")
    await session.run_model()
    session.sink.clear()
    return session


# -- the domain ------------------------------------------------------------------------


def test_a_policy_is_not_reconcilable_unless_it_says_so_by_keyword() -> None:
    assert ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE).reconcilable is False
    policy = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, True, reconcilable=True)
    assert (policy.effect, policy.requires_approval, policy.reconcilable) == (
        ToolEffect.NON_IDEMPOTENT_WRITE,
        True,
        True,
    )


def test_an_unknown_outcome_of_a_reconcilable_call_goes_to_reconciling_and_keeps_its_error() -> None:
    record = make_tool_call(status=S.PENDING, policy=RECONCILABLE).unknown_outcome("worker lost")

    assert (record.status, record.error, record.attempts, record.is_final) == (S.RECONCILING, "worker lost", 1, False)


def test_an_unknown_outcome_of_a_plain_or_already_reconciling_call_is_outcome_unknown() -> None:
    plain = make_tool_call(status=S.PENDING, policy=NON_IDEMPOTENT_NO_APPROVAL).unknown_outcome("worker lost")
    again = make_tool_call(status=S.RECONCILING, policy=RECONCILABLE).unknown_outcome("probe failed")

    assert (plain.status, plain.error) == (S.OUTCOME_UNKNOWN, "worker lost")
    assert (again.status, again.error) == (S.OUTCOME_UNKNOWN, "probe failed")


def test_a_reconciled_call_is_succeeded_with_the_found_output_or_not_applied() -> None:
    reconciling = make_tool_call(status=S.PENDING, policy=RECONCILABLE).unknown_outcome("worker lost")

    found = reconciling.reconciled_succeeded("sent #7")
    missing = reconciling.reconciled_not_applied()

    assert (found.status, found.output, found.error, found.attempts) == (S.SUCCEEDED, "sent #7", None, 1)
    assert (missing.status, missing.is_final) == (S.NOT_APPLIED, True)
    assert describe_tool_call_outcome(missing) == NOT_APPLIED_TOOL_RESULT
    assert missing.outcome().status is S.NOT_APPLIED


def test_only_a_reconciling_call_can_be_reconciled() -> None:
    with pytest.raises(InvalidTransitionError, match="from 'pending' to 'not_applied'"):
        make_tool_call(status=S.PENDING).reconciled_not_applied()


# -- the use cases ---------------------------------------------------------------------


async def test_record_tool_outcome_unknown_stores_a_reconcilable_call_reconciling_unpublished_and_reconciles() -> None:
    session = await with_pending_call(RECONCILABLE, probe=[ReconcileResult.not_applied()])

    decision = await session.record_tool_outcome_unknown("c1", recovery_error="worker lost")

    assert decision == GoTo(step=StepName.RECONCILE_TOOL_CALL, input="c1")
    record = session.tool_calls["c1"]
    assert (record.status, record.error) == (S.RECONCILING, "worker lost")
    assert session.results.published == []
    assert session.sink.events == ()


async def test_call_single_attempt_tool_reconciles_a_call_an_earlier_delivery_got_to() -> None:
    session = await with_pending_call(
        RECONCILABLE, probe=[ReconcileResult.applied("sent #7")], tool=[RuntimeError("worker died"), "sent"]
    )
    with pytest.raises(RuntimeError, match="worker died"):  # the first delivery got as far as the tool
        await session.call_single_attempt_tool("c1", step_execution_id="CallSingleAttemptTool-1")

    decision = await session.call_single_attempt_tool("c1", step_execution_id="CallSingleAttemptTool-1")

    assert decision == GoTo(step=StepName.RECONCILE_TOOL_CALL, input="c1")
    assert (session.tool_calls["c1"].status, session.tool_calls["c1"].error) == (S.RECONCILING, EARLIER_DELIVERY)
    assert len(session.scripted.tool_executions) == 1
    assert session.results.published == []


async def test_reconcile_records_succeeded_with_the_output_the_probe_found_and_publishes_once() -> None:
    session = await with_pending_call(RECONCILABLE, probe=[ReconcileResult.applied("sent #7")])
    await session.record_tool_outcome_unknown("c1", recovery_error="worker lost")

    decision = await session.reconcile_tool_call("c1", attempt=2)

    assert decision == End()
    record = session.tool_calls["c1"]
    assert (record.status, record.output) == (S.SUCCEEDED, "sent #7")
    assert session.results.published == [ToolCallCompleted(tool_call_id="c1", turn_id="turn-1", status=S.SUCCEEDED)]
    assert session.sink.events[-1].payload == ev.tool_call_finished("c1", "email", S.SUCCEEDED, output="sent #7")
    runner = session.scripted
    assert isinstance(runner, ProbingRunner)
    (probe,) = runner.probed
    assert (probe.idempotency_key, probe.attempt) == ("session-1/turn-1/c1", 2)
    assert runner.tool_executions == ()


async def test_reconcile_records_not_applied_when_the_probe_finds_nothing() -> None:
    session = await with_pending_call(RECONCILABLE, probe=[ReconcileResult.not_applied()])
    await session.record_tool_outcome_unknown("c1", recovery_error="worker lost")

    assert await session.reconcile_tool_call("c1") == End()

    assert session.tool_calls["c1"].status is S.NOT_APPLIED
    assert [r.status for r in session.results.published] == [S.NOT_APPLIED]


@pytest.mark.parametrize("has_probe", [True, False], ids=["probe-says-unknown", "runner-without-probe"])
async def test_reconcile_leaves_outcome_unknown_when_the_probe_cannot_tell(has_probe: bool) -> None:
    session = await with_pending_call(RECONCILABLE, probe=[ReconcileResult.unknown()] if has_probe else None)
    await session.record_tool_outcome_unknown("c1", recovery_error="worker lost")

    assert await session.reconcile_tool_call("c1") == End()

    record = session.tool_calls["c1"]
    assert record.status is S.OUTCOME_UNKNOWN
    assert record.error == f"worker lost; {PROBE_UNKNOWN if has_probe else NO_PROBE}"
    assert [r.status for r in session.results.published] == [S.OUTCOME_UNKNOWN]


async def test_the_driver_reconciles_a_failed_single_attempt_call_and_a_failing_probe_ends_outcome_unknown() -> None:
    session = await with_pending_call(RECONCILABLE, probe=[ConnectionError("outbox down")], tool=RuntimeError("lost"))

    await session.drive(GoTo(step=StepName.CALL_SINGLE_ATTEMPT_TOOL, input="c1"))

    runner = session.scripted
    assert isinstance(runner, ProbingRunner)
    assert [p.attempt for p in runner.probed] == [1, 2, 3]
    record = session.tool_calls["c1"]
    assert record.status is S.OUTCOME_UNKNOWN
    assert record.error is not None
    assert record.error.startswith("RuntimeError: lost; its reconcile probe failed: ConnectionError: outbox down")
    assert [r.status for r in session.results.published] == [S.OUTCOME_UNKNOWN]
