"""``RecordToolFailure`` and ``RecordToolOutcomeUnknown``: failure routes of the tool Steps.

Input: the tool-call ID (the failed Step's input, unchanged). Reached only
through crashes, timeouts or exceptions other than `ToolExecutionError`, so a
write may have taken effect: ``RecordToolFailure`` records ``failed`` for a
read and ``outcome_unknown`` for a write; ``RecordToolOutcomeUnknown`` records
``outcome_unknown``. The engine's recovery detail goes into ``error``, and the
call's one result is published (a response's one call resumes its turn instead,
`ToolCallFinisher`). A final record ends without publishing. The
recovery detail is cut to 8 KiB.

``RecordToolOutcomeUnknown`` is also the failure route of ``ReconcileToolCall``.
A record of a ``reconcilable`` policy that is not reconciling yet is stored
``reconciling`` instead, unpublished, and ``ReconcileToolCall`` is next; a
``reconciling`` record (its probe failed every attempt) becomes ``outcome_unknown``.
Next: ends (the model, for a call that resumes its turn), or ``ReconcileToolCall``.
"""

import abc

import attrs

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import End, Next
from dex_agents.application.ports import ToolCallStore
from dex_agents.application.steps._shared import ToolCallFinisher, tool_call_record
from dex_agents.application.wiring import Wired
from dex_agents.domain.limits import ERROR_TEXT_BYTES, cap_text
from dex_agents.domain.tools import AgentToolCall, ToolCallStatus


@attrs.frozen(kw_only=True)
class _ToolFailureRoute(Wired, abc.ABC):
    tool_calls: ToolCallStore
    tool_call_finisher: ToolCallFinisher
    events: AgentEventWriter

    async def execute(self, tool_call_id: str, *, recovery_error: str) -> Next:
        """Record the call's final status, with the engine's recovery detail as its error."""
        record = tool_call_record(self.tool_calls, tool_call_id)
        if record.is_final:
            return End()
        error = cap_text(recovery_error, ERROR_TEXT_BYTES, what="the error")
        return self._record(record, error)

    @abc.abstractmethod
    def _record(self, record: AgentToolCall, error: str) -> Next:
        """Store what the failed call becomes; return what is next."""


class RecordToolFailure(_ToolFailureRoute):
    """Records a ``CallTool`` call whose attempts all failed: ``failed`` for a read, ``outcome_unknown`` for a write."""

    def _record(self, record: AgentToolCall, error: str) -> Next:
        finished = record.after_exhausted_retries(error)
        return self.tool_call_finisher.finish(finished)


class RecordToolOutcomeUnknown(_ToolFailureRoute):
    """Records a single-attempt call whose one attempt (or reconciliation) failed: ``outcome_unknown`` or reconcile."""

    def _record(self, record: AgentToolCall, error: str) -> Next:
        if record.status is ToolCallStatus.RECONCILING:
            error = f"{record.error or 'the outcome is unknown'}; its reconcile probe failed: {error}"
            error = cap_text(error, ERROR_TEXT_BYTES, what="the error")
        return self.tool_call_finisher.settle_unknown(record, error)
