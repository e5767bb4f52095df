"""Run a Pydantic AI agent as a durable dex-agents session.

Public API:

- `pydantic_ai_session_flow(agent, *, flow_type, tool_policies=None,
  default_tool_effect=UNCLASSIFIED, interrupt_deadline=None,
  event_stream_capacity_bytes=10 MiB, deps_factory=None, model=None,
  compaction=None, compactor=None, tool_result_budget_chars=200_000,
  usage_limits=None)`: the `AgentSessionFlow` of one agent.
- `PydanticAIRunner(agent, *, deps_factory=None, model=None, compactor=None,
  tool_result_budget_chars=200_000, usage_limits=None)`: the
  `AgentFrameworkRunner`, to build `AgentSessionFlow` yourself.

Usage: ``usage_limits`` are each turn's `UsageLimits`, as ``agent.run`` has
them for a run (``None``: Pydantic AI's default, 50 requests), checked against
the turn's usage across its Steps, agent runs inside a tool that share
``ctx.usage`` included; a turn that reaches one fails at once with Pydantic
AI's ``UsageLimitExceeded`` message (`dex_agents.adapters.pydantic_ai._usage`).

Long sessions: the model reads the session's summary (first, as a user
prompt marked as a summary) and the messages after it; the agent's own
history processors run on that. `PydanticAIRunner.compact` (the runner's
`HistoryCompactor`) is ``compactor`` when given, else one summarising request
to the agent's model (or ``model``) without tools, its usage recorded with
the session's. Earlier turns' tool results beyond ``tool_result_budget_chars``
(newest first) are shortened in the model's view to their first 1,000
characters and a notice saying so; the stored messages stay whole. A
provider's refusal of the context (`ModelContextWindowExceededError`, or an
HTTP 400/413 naming the context length) is raised as `ContextOverflowError`,
so the session compacts and retries the model call once.
- `deferred_tool_idempotency_key(ctx)`: inside a tool, the call's idempotency
  key ``"<session ID>/<turn ID>/<tool call ID>"`` (exactly
  `DeferredToolExecution.idempotency_key`), or ``None`` outside a tool Step.
- `IDEMPOTENCY_KEY_METADATA_KEY`: the run metadata key that carries it.
- `reconcile_probe(probe)`: tool metadata declaring the tool's reconcile probe,
  ``async probe(call: ReconcileCall) -> ReconcileResult``: did the call with
  ``call.idempotency_key`` take effect? A tool with one is ``reconcilable``: a
  single-attempt call of it whose outcome is unknown is settled
  ``succeeded`` (with the output found), ``not_applied`` or ``outcome_unknown``
  (`dex_agents.adapters.pydantic_ai.reconcile`).
- `run_messages()`: tool metadata with which a tool reads the run's messages
  (``ctx.messages``, earlier turns included, up to the model response that
  asked for the call) in its Step, as in a plain run; without it a tool Step's
  ``ctx.messages`` holds only the call. It costs that tool's Steps a load of
  the model's window and the run state
  (`dex_agents.adapters.pydantic_ai._tool_context`).

``agent`` may be a ``WrapperAgent``. ``deps_factory(session_id)`` builds the
agent's dependencies (it may return an awaitable) before every model and tool
Step, so it may run many times per session, in parallel, and again after a
crash. Every run uses the session ID as its ``conversation_id``.

Each model call is one ``RunModel`` Step that stops after the model response
asking for tools; each tool call runs once, through the agent, in its own tool
Step. A tool's return is recorded ``succeeded``; ``ModelRetry`` or
``ToolFailed`` ``failed`` (the model sees it); anything else that escapes it is
a Step failure, retried as the tool's effect allows.

``docs/pydantic-ai-adapter.md`` has the detail: how a turn runs, the full
table of what a tool's end is recorded as, and where this adapter follows
pydantic-ai 2.68.0 rather than the published adapter spec.
"""

from dex_agents.adapters.pydantic_ai._tool_context import run_messages
from dex_agents.adapters.pydantic_ai.flow import pydantic_ai_session_flow
from dex_agents.adapters.pydantic_ai.idempotency import IDEMPOTENCY_KEY_METADATA_KEY, deferred_tool_idempotency_key
from dex_agents.adapters.pydantic_ai.reconcile import ReconcileCall, reconcile_probe
from dex_agents.adapters.pydantic_ai.runner import PydanticAIRunner

__all__ = [
    "IDEMPOTENCY_KEY_METADATA_KEY",
    "PydanticAIRunner",
    "ReconcileCall",
    "deferred_tool_idempotency_key",
    "pydantic_ai_session_flow",
    "reconcile_probe",
    "run_messages",
]
