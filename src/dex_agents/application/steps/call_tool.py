"""``CallTool`` and ``CallSingleAttemptTool``: run one tool call.

Input: the tool-call ID. ``CallTool`` runs ``read`` and ``idempotent_write``
calls: 3 attempts, failure route ``RecordToolFailure``.
``CallSingleAttemptTool`` runs ``non_idempotent_write`` and ``unclassified``
calls: exactly 1 attempt, failure route ``RecordToolOutcomeUnknown``.

Before the runner is called, the Step writes ``tool_call_started`` and awaits
a heartbeat: an engine may hand an attempt whose Worker vanished before any
output to another Worker at the same attempt, and this output narrows that
window. The result is ``succeeded``, or ``failed`` for `ToolExecutionError`
(not retried); its one ``TOOL_CALL_RESULTS`` message is published with it.
Any other exception fails the attempt. A record that is already final ends
without running or publishing. Next: ends.

Output and error texts are made safe to store (`sanitize_output_text`) and
cut to ``max_tool_output_bytes`` with a notice the model reads
(`cap_text`), so a tool returning 10 MB does not fail its Step.
"""

import attrs

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.invocation import StepCall
from dex_agents.application.next import End, Next
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import ToolCallStore, ToolResultPublisher
from dex_agents.application.runner import AgentFrameworkRunner, DeferredToolExecution, HeartbeatFn
from dex_agents.application.steps._shared import finish_tool_call
from dex_agents.application.wiring import Wired
from dex_agents.domain.errors import ToolExecutionError
from dex_agents.domain.limits import cap_text, sanitize_output_text
from dex_agents.domain.tools import ToolCallStatus, idempotency_key


@attrs.frozen(kw_only=True)
class _ToolCallStep(Wired):
    runner: AgentFrameworkRunner
    options: AgentSessionOptions
    tool_calls: ToolCallStore
    results: ToolResultPublisher
    events: AgentEventWriter
    heartbeat: HeartbeatFn

    async def execute(self, call: StepCall, tool_call_id: str) -> Next:
        """Run the call once and record its result."""
        record = self.tool_calls.get(tool_call_id)
        assert record is not None, f"no record for tool call {tool_call_id!r}"
        if record.is_final:
            return End()
        assert record.status in (ToolCallStatus.PENDING, ToolCallStatus.APPROVED), (
            f"tool call {tool_call_id!r} may not run in status {record.status.value!r}"
        )
        self.events.write_tool_call_started(record.tool_call_id, record.tool_name)
        await self.heartbeat()
        execution = DeferredToolExecution(
            flow_id=call.flow_id,
            tool_call=record,
            idempotency_key=idempotency_key(call.flow_id, record.turn_id, record.tool_call_id),
            attempt=call.attempt,
            events=self.events,
            heartbeat=self.heartbeat,
        )
        try:
            result = await self.runner.execute_deferred_tool_call(execution)
        except ToolExecutionError as error:
            finished = record.fail(self._bounded(error.message, "the tool's error"), attempt=call.attempt)
        else:
            finished = record.succeed(self._bounded(result.output, "the tool's output"), attempt=call.attempt)
        finish_tool_call(finished, tool_calls=self.tool_calls, results=self.results, events=self.events)
        return End()

    def _bounded(self, text: str, what: str) -> str:
        return cap_text(sanitize_output_text(text), self.options.max_tool_output_bytes, what=what)


class CallTool(_ToolCallStep):
    """Runs a ``read`` or ``idempotent_write`` call (retried up to 3 attempts)."""


class CallSingleAttemptTool(_ToolCallStep):
    """Runs a ``non_idempotent_write`` or ``unclassified`` call (exactly one attempt)."""
