"""``CompactHistory``: folds the oldest messages of the model's window into a new cumulative summary.

Input: why it runs (`CompactionReason`: ``policy`` or ``overflow``). The
model-call policy of ``RunModel``: 15 min method timeout, 2 min heartbeat
timeout, 3 attempts within 30 min; failure route ``RecordCompactionFailure``.

Reads a bounded prefix of the window (`compaction_window`), chooses the cut
(`dex_agents.domain.history.compaction_cut`: never the active turn, never a
tool call without its result, the latest messages kept verbatim), asks the
runner's `HistoryCompactor` (or `ExcerptCompactor` for a runner without one)
for the summary of the previous summary plus the covered messages, and
commits in one decision: the summary under its compaction number (a repeated
attempt overwrites the same slot, so each compaction stores exactly one),
the state's new window, the compaction's usage, and one ``history_compacted``
event with the covered range. The messages stay stored.

Next: ``CompactHistory`` again while the context is still over budget and the
last one covered something (a long window compacts in bounded chunks), else
``RunModel``. After an ``overflow`` the state says the model call has had its
one retry.

A turn with a `TurnCancelRequest` ends here first, as ``RunModel`` would end
it (`TurnCloser.end_if_cancelled`; next ``AwaitUserMessage``): a cancelled turn runs no
further model call, and a summary is one. Nothing is compacted; the next
turn compacts before its first model call if the context is still over
budget. (Compaction runs only at a model-call boundary, where every record
of the turn is final, as `TurnCloser.end_cancelled` needs.)
"""

import attrs

from dex_agents.application.compaction import (
    MAX_CONTEXT_BYTES,
    CompactionReason,
    CompactionSummary,
    ExcerptCompactor,
    HistoryCompactor,
    compaction_window,
)
from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.invocation import StepCall
from dex_agents.application.next import GoTo, Next, StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import (
    HistorySummaryStore,
    MessageLog,
    SessionStateStore,
)
from dex_agents.application.runner import AgentFrameworkRunner, HeartbeatFn
from dex_agents.application.steps._shared import UsageMeter
from dex_agents.application.steps._turn_control import TurnCloser
from dex_agents.application.steps.record_turn_failure import RecordTurnFailure
from dex_agents.application.wiring import Wired
from dex_agents.domain import events as ev
from dex_agents.domain.contract import broken
from dex_agents.domain.history import HistorySummary, compaction_cut
from dex_agents.domain.limits import cap_text, sanitize_output_text
from dex_agents.domain.session import AgentState
from dex_agents.domain.usage import AgentUsage


def history_compactor(runner: AgentFrameworkRunner) -> HistoryCompactor:
    """Return the runner when it is a `HistoryCompactor`, else an `ExcerptCompactor`."""
    return runner if isinstance(runner, HistoryCompactor) else ExcerptCompactor()


@attrs.frozen(kw_only=True)
class CompactHistory(Wired):
    """Compacts the oldest messages of the model's window into a summary."""

    runner: AgentFrameworkRunner
    options: AgentSessionOptions
    session_state: SessionStateStore
    messages: MessageLog
    summaries: HistorySummaryStore
    usage_meter: UsageMeter
    events: AgentEventWriter
    heartbeat: HeartbeatFn
    turn_closer: TurnCloser

    async def execute(self, call: StepCall, reason: str) -> Next:
        """Store one summary and move the window, then go on to the model (or compact the next chunk)."""
        del call  # every attempt derives the same summary slot from the committed state
        why = CompactionReason(reason)
        policy = self.options.compaction
        state = self.session_state.get()
        assert state is not None, "the session has not started"
        cancelled = self.turn_closer.end_if_cancelled(state)
        if cancelled is not None:
            return cancelled
        loads = compaction_window(state)
        loaded = self.messages.read(loads.sequences)
        protected = next((m.sequence for m in loaded if m.turn_id == state.active_turn_id), None)
        target = policy.target_bytes
        if why is CompactionReason.OVERFLOW:
            target = min(target, state.window_bytes // 2)
        cut = compaction_cut(
            loaded,
            window_bytes=state.window_bytes,
            target_bytes=target,
            keep_recent=policy.keep_recent_messages,
            window_last=state.message_count,
            protected_from=protected,
        )
        if cut is None:
            return self._to_model(state, why)
        previous = None if state.summary_count == 0 else self.summaries.get(state.summary_count)
        covered = [m for m in loaded if m.sequence <= cut.through_sequence]
        result: object = await history_compactor(self.runner).compact(
            covered, None if previous is None else previous.text
        )
        if isinstance(result, str):
            result = CompactionSummary(result)
        if not isinstance(result, CompactionSummary):
            raise broken("compact", "a CompactionSummary or its text (HistoryCompactor)", result)
        summary_result = result
        text = cap_text(sanitize_output_text(summary_result.text), policy.summary_limit_bytes, what="the summary")
        summary = HistorySummary(number=state.summary_count + 1, through_sequence=cut.through_sequence, text=text)
        self.summaries.put(summary)
        if summary_result.usage != AgentUsage():  # a compactor without a model call spends nothing to record
            self.usage_meter.add(summary_result.usage)
        compacted = state.with_history_compacted(summary, covered_bytes=cut.covered_bytes)
        self.events.write(
            ev.history_compacted(
                summary_number=summary.number,
                first_sequence=cut.first_sequence,
                through_sequence=cut.through_sequence,
                reason=why.value,
            )
        )
        if why is CompactionReason.POLICY and policy.should_compact(compacted):
            self.session_state.set(compacted)
            return GoTo(step=StepName.COMPACT_HISTORY, input=why.value, window=compaction_window(compacted))
        return self._to_model(compacted, why)

    def _to_model(self, state: AgentState, why: CompactionReason) -> Next:
        if why is CompactionReason.OVERFLOW:
            state = attrs.evolve(state, retry_after_overflow=True)
        self.session_state.set(state)
        return GoTo(step=StepName.RUN_MODEL, window=state.model_window())


@attrs.frozen(kw_only=True)
class RecordCompactionFailure(RecordTurnFailure):
    """The failure route of ``CompactHistory``: history unchanged; the turn goes on if its context still fits.

    Input: the compaction's reason. When the context fits in `MAX_CONTEXT_BYTES`
    (so the model Step can load it) the turn goes on to ``RunModel`` (after an
    ``overflow``, as its one retry); otherwise the turn fails as
    `RecordTurnFailure` records it. A turn cancelled meanwhile ends cancelled
    here (`TurnCloser.end_if_cancelled`), whatever its context.
    """

    async def after_compaction(self, reason: str, *, recovery_error: str) -> Next:
        """Go on to the model, end a cancelled turn, or fail the turn."""
        state = self.session_state.get()
        assert state is not None, "the session has not started"
        cancelled = self.turn_closer.end_if_cancelled(state)
        if cancelled is not None:
            return cancelled
        if state.active_turn_id is not None and state.context_bytes <= MAX_CONTEXT_BYTES:
            if CompactionReason(reason) is CompactionReason.OVERFLOW:
                state = attrs.evolve(state, retry_after_overflow=True)
                self.session_state.set(state)
            return GoTo(step=StepName.RUN_MODEL, window=state.model_window())
        return await self.execute(recovery_error=f"history compaction failed: {recovery_error}")
