"""Run a sagent agent as a durable dex-agents session (``pip install 'dex-agents[sagent]'``, Python 3.13).

Public API:

- `sagent_session_flow(agent_factory, *, flow_type, tool_policies=None,
  options=None)`: the `AgentSessionFlow` of the agent ``agent_factory()``
  builds (a zero-argument callable returning a sagent ``Agent``).
- `SagentRunner(agent_factory)`: the `AgentFrameworkRunner`, to build
  `AgentSessionFlow` yourself.
- `deferred_tool_idempotency_key()`: inside a tool, the call's idempotency
  key ``"<session ID>/<turn ID>/<tool call ID>"``, or ``None`` outside a tool Step.
- `SagentModelError`: how a failed model request fails its ``RunModel``
  attempt (with sagent's ``retryable`` classification).
- `SagentCompactionError`: how a compaction whose sagent ``Compactor`` fell
  back (no summary) fails its ``CompactHistory`` attempt.

Each model call is one ``RunModel`` Step making one request through the
agent's rich ``Model`` (no sagent retry loop: Dex retries the Step); each tool
call runs once, through the agent's own tool object and sagent's input
validation, in its own tool Step. Every Step builds a fresh agent from the
factory, with ``allow_background=False``; nothing is shared across sessions
or concurrent Steps.

Tool effects: ``tool_policies`` first, then what sagent knows (its Bash
read-only classifier: a command it proves read-only is a ``read``), then
``options.default_tool_effect``. Calls of one response that share a sagent
``serialize_key`` (same-file Read/Edit/Write, Bash writers) run one after
another: the runner hands them to the session in waves, one wave per
``RunModel`` (the later ones make no model call), so a wave's tool Steps start
only once the previous wave's calls are final
(`dex_agents.adapters.sagent._effects`). A result with ``is_error`` reaches
the model as a tool error (recorded ``failed``); an exception fails the Step,
so reads retry.

Tool state: sagent's ``ToolState`` (the read cache behind Edit's "modified
since read" check, the Bash working directory, recent files, skills) is
per session and durable: each tool Step restores it from its call's record
(`AgentToolCall.framework_state`) and returns the state it ended with; the
next ``RunModel`` merges them, and the turn's last stored message carries it
to the next turn (`dex_agents.adapters.sagent._codec`). sagent's
process-global fallback is never used.

Long sessions: the runner is a `HistoryCompactor`; ``compact`` runs the
agent's ``compactor`` (else sagent's ``SummaryCompactor()``) over the previous
summary and the covered entries, and stores sagent's continuation message as
the summary, which opens every later request before the model's window. A
request the provider refuses as too long (``PromptTooLongError``,
``RequestTooLargeError``, the model's ``is_context_overflow``) raises
`ContextOverflowError`, so the session compacts and retries.

Not carried (see docs/sagent-adapter.md, "Using it"): background
jobs, in-process sub-agents and messaging (``AgentSpawn``, ``AgentSend``,
``AgentSelf``, ``BackgroundTask`` are refused), sagent's own loop (its inbox,
halt, model switch, ``max_tool_call_rounds``, ``max_budget_usd``; the session's
steering and ``cancel_turn`` work: a steered message reaches the next model
call as a ``UserMessage`` after the tool results), sagent's compaction trigger
and post-compaction enrichment (compaction itself runs through sagent's
``Compactor``: `SagentRunner.compact`), result bounding to Worker-local files,
and a tool result's attachments, diff, hint and summary (the model reads
``content``).
"""

import sagent.agent  # noqa: F401 - sagent's own import order: sagent.agent before its other modules

from dex_agents.adapters.sagent.flow import sagent_session_flow
from dex_agents.adapters.sagent.idempotency import deferred_tool_idempotency_key
from dex_agents.adapters.sagent.runner import SagentCompactionError, SagentModelError, SagentRunner

__all__ = [
    "SagentCompactionError",
    "SagentModelError",
    "SagentRunner",
    "deferred_tool_idempotency_key",
    "sagent_session_flow",
]
