"""``RecordToolFailure`` and ``RecordToolOutcomeUnknown``: failure routes of the tool Steps.

Input: the tool-call ID (the failed Step's input, unchanged). Reached only
through crashes, timeouts or exceptions other than `ToolExecutionError`, so a
write may have taken effect: ``RecordToolFailure`` records ``failed`` for a
read and ``outcome_unknown`` for a write; ``RecordToolOutcomeUnknown`` records
``outcome_unknown``. The engine's recovery detail goes into ``error``, and the
call's one result is published. A final record ends without publishing. The
recovery detail is cut to 8 KiB.
Next: ends.
"""

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import End, Next
from dex_agents.application.ports import ToolCallStore, ToolResultPublisher
from dex_agents.application.steps._shared import finish_tool_call
from dex_agents.domain.limits import ERROR_TEXT_BYTES, cap_text


class _ToolFailureRoute:
    def __init__(self, *, tool_calls: ToolCallStore, results: ToolResultPublisher, events: AgentEventWriter) -> None:
        self._tool_calls = tool_calls
        self._results = results
        self._events = events


class RecordToolFailure(_ToolFailureRoute):
    """Records a ``CallTool`` call whose attempts all failed."""

    async def execute(self, tool_call_id: str, *, recovery_error: str) -> Next:
        """Record ``failed`` for a read, ``outcome_unknown`` for a write."""
        record = self._tool_calls.get(tool_call_id)
        assert record is not None, f"no record for tool call {tool_call_id!r}"
        if not record.is_final:
            finish_tool_call(
                record.after_exhausted_retries(cap_text(recovery_error, ERROR_TEXT_BYTES, what="the error")),
                tool_calls=self._tool_calls,
                results=self._results,
                events=self._events,
            )
        return End()


class RecordToolOutcomeUnknown(_ToolFailureRoute):
    """Records a ``CallSingleAttemptTool`` call whose one attempt failed."""

    async def execute(self, tool_call_id: str, *, recovery_error: str) -> Next:
        """Record ``outcome_unknown``."""
        record = self._tool_calls.get(tool_call_id)
        assert record is not None, f"no record for tool call {tool_call_id!r}"
        if not record.is_final:
            finish_tool_call(
                record.mark_outcome_unknown(cap_text(recovery_error, ERROR_TEXT_BYTES, what="the error")),
                tool_calls=self._tool_calls,
                results=self._results,
                events=self._events,
            )
        return End()
