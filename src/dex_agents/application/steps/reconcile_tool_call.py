"""``ReconcileToolCall``: settle a single-attempt call whose outcome is unknown with its tool's reconcile probe.

Input: the tool-call ID of a ``reconciling`` record (its policy is
``reconcilable``; ``RecordToolOutcomeUnknown`` or ``CallSingleAttemptTool``
stored it so). The probe is the runner's `ToolCallReconciler.reconcile_tool_call`,
a read asked with the call's idempotency key: 3 attempts, failure route
``RecordToolOutcomeUnknown`` (which records ``outcome_unknown``). The probe's
verdict decides the final status, and the call's one ``TOOL_CALL_RESULTS``
message is published with it (a response's one call resumes its turn instead,
`ToolCallFinisher`):

| the probe says  | recorded            | the model reads                         |
|-----------------|---------------------|-----------------------------------------|
| applied         | ``succeeded``       | the output the probe found              |
| not applied     | ``not_applied``     | it did not take effect; it may call again |
| unknown         | ``outcome_unknown`` | the outcome is unknown                  |

A runner without a probe leaves the call ``outcome_unknown``. The found output
is made safe to store and cut to ``max_tool_output_bytes`` as a tool's output
is. A call found ``not_applied`` never runs again by itself: the model may call
the tool again, a new call (with a fresh approval when its policy needs one).
A final record ends without probing or publishing. Next: ends (the model, for a
call that resumes its turn).
"""

import attrs

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.invocation import StepCall
from dex_agents.application.next import End, Next
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import ToolCallStore
from dex_agents.application.runner import (
    AgentFrameworkRunner,
    DeferredToolExecution,
    HeartbeatFn,
    ReconcileResult,
    ReconcileVerdict,
    ToolCallReconciler,
)
from dex_agents.application.steps._shared import ToolCallFinisher, tool_call_record
from dex_agents.application.wiring import Wired
from dex_agents.domain.contract import broken
from dex_agents.domain.limits import ERROR_TEXT_BYTES, cap_text, sanitize_output_text
from dex_agents.domain.tools import AgentToolCall, ToolCallStatus

NO_PROBE = "the runner has no reconcile probe (reconcile_tool_call)"
"""The error added to a reconcilable call whose runner cannot reconcile it."""

PROBE_UNKNOWN = "its reconcile probe could not tell whether it took effect"
"""The error added to a call whose probe answered unknown."""


@attrs.frozen(kw_only=True)
class ReconcileToolCall(Wired):
    """Runs a ``reconciling`` call's reconcile probe and records what it found."""

    runner: AgentFrameworkRunner
    options: AgentSessionOptions
    tool_calls: ToolCallStore
    tool_call_finisher: ToolCallFinisher
    events: AgentEventWriter
    heartbeat: HeartbeatFn

    async def execute(self, call: StepCall, tool_call_id: str) -> Next:
        """Ask the probe and record the call's final status."""
        record = tool_call_record(self.tool_calls, tool_call_id)
        if record.is_final:
            return End()
        assert record.status is ToolCallStatus.RECONCILING, (
            f"tool call {tool_call_id!r} may not be reconciled in status {record.status.value!r}"
        )
        finished = await self._reconciled(call, record)
        return self.tool_call_finisher.finish(finished)

    async def _reconciled(self, call: StepCall, record: AgentToolCall) -> AgentToolCall:
        if not isinstance(self.runner, ToolCallReconciler):
            return record.mark_outcome_unknown(self._error(record, NO_PROBE))
        execution = DeferredToolExecution.of_attempt(
            call.flow_id, record, attempt=call.attempt, events=self.events, heartbeat=self.heartbeat
        )
        returned: object = await self.runner.reconcile_tool_call(execution)
        if not isinstance(returned, ReconcileResult):
            raise broken("reconcile_tool_call", "a ReconcileResult", returned)
        found = returned
        match found.verdict:
            case ReconcileVerdict.APPLIED:
                output = sanitize_output_text(found.output or "")
                return record.reconciled_succeeded(
                    cap_text(output, self.options.max_tool_output_bytes, what="the tool's output")
                )
            case ReconcileVerdict.NOT_APPLIED:
                return record.reconciled_not_applied()
            case ReconcileVerdict.UNKNOWN:
                return record.mark_outcome_unknown(self._error(record, PROBE_UNKNOWN))

    @staticmethod
    def _error(record: AgentToolCall, why: str) -> str:
        return cap_text(f"{record.error or 'the outcome is unknown'}; {why}", ERROR_TEXT_BYTES, what="the error")
