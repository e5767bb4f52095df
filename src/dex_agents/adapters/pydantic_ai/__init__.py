"""Run a Pydantic AI agent as a durable dex-agents session.

Public API:

- `pydantic_ai_session_flow(agent, *, flow_type, tool_policies=None,
  default_tool_effect=UNCLASSIFIED, interrupt_deadline=None,
  event_stream_capacity_bytes=10 MiB, deps_factory=None, model=None)`: the
  `AgentSessionFlow` of one agent.
- `PydanticAIRunner(agent, *, deps_factory=None, model=None)`: the
  `AgentFrameworkRunner`, to build `AgentSessionFlow` yourself.
- `deferred_tool_idempotency_key(ctx)`: inside a tool, the call's idempotency
  key ``"<session ID>/<turn ID>/<tool call ID>"`` (exactly
  `DeferredToolExecution.idempotency_key`), or ``None`` outside a tool Step.
- `IDEMPOTENCY_KEY_METADATA_KEY`: the run metadata key that carries it.

``agent`` may be a ``WrapperAgent``. ``deps_factory(session_id)`` builds the
agent's dependencies (it may return an awaitable) before every model and tool
Step, so it may run many times per session, in parallel, and again after a
crash. Every run uses the session ID as its ``conversation_id``.

Step mode: each model call is one ``RunModel`` Step; a per-run capability
marks every function tool external, so the response that asks for tools ends
the run with ``DeferredToolRequests`` and the runner returns one
`DeferredToolCall` per call, in model order. Each call runs once, through the
agent, in its own tool Step: a run whose history holds only that call
validates the arguments, runs the agent's capabilities, hooks and the tool,
and ends before any model request. When every call has a final record, the
next ``RunModel`` resumes the run with ``DeferredToolResults``. The runner
(`dex_agents.adapters.pydantic_ai.runner`) depends only on the application's
runner contract; only `pydantic_ai_session_flow` touches the Dex binding.

What a tool does → what the session records:

| the tool                                                        | record                                   |
|-----------------------------------------------------------------|------------------------------------------|
| returns a value                                                 | ``succeeded`` with its text              |
| raises ``ModelRetry`` or ``ToolFailed``, or runs out of retries | ``failed`` (the model sees it; no retry) |
| is an external tool                                             | ``failed`` with an explanation; nothing ran |
| raises ``ApprovalRequired`` while it runs                       | ``failed`` with an explanation           |
| raises ``CallDeferred`` while it runs                           | a Step failure                           |
| lets a model error escape (a sub-agent's ``UnexpectedModelBehavior``) | a Step failure                     |
| raises anything else, or the Worker crashes                     | a Step failure                           |

Where this adapter follows pydantic-ai 2.68.0 rather than the spec
(``dex-agents-pydantic-ai.md``); see ``pydantic-ai-2.68-primer.md``:

1. The model Step capability is ordered
   ``CapabilityOrdering(position='outermost', wraps=(AbstractCapability,))``:
   ``wraps`` alone is a circular ordering with the auto-injected outermost
   ``ToolSearch``. An agent capability that also claims outermost and
   wraps-all is refused at construction with `ValueError` (the spec has every
   ``RunModel`` fail instead).
2. A rejection resumes as ``DeferredToolResults.approvals[id] =
   ToolDenied(message)``, built by hand: in ``calls`` the model would see the
   ``ToolDenied`` object as a successful return. An ``expired`` approval
   resumes the same way with ``EXPIRED_REJECTION_MESSAGE``.
3. Durability capabilities (``BaseDurabilityCapability``: Temporal, DBOS,
   Prefect) and ``pydantic_ai.durable_exec`` wrapper agents are refused by the
   runner's constructor with `ValueError`: outside its own workflow Pydantic AI
   accepts the runner's per-run capabilities, so the spec's "such an agent
   refuses the capabilities" does not happen by itself.
4. ``Agent(...)`` takes no ``event_stream_handler`` in 2.68. Agent-level
   handlers (``ProcessEventStream``, ``@agent.on_event``) see the model events
   of model Steps and also the tool events (``FunctionToolCallEvent``,
   ``FunctionToolResultEvent``) of tool Steps, not model Steps only.
5. Validation hooks (``before_tool_validate``, ``after_tool_validate``,
   ``wrap_tool_validate``) and a tool's ``args_validator`` run in the model
   Step too (seeing ``kind='external'``) and again in the tool Step; only
   execute hooks run in tool Steps alone.
6. A response with an invalid or unknown call next to a valid one does not
   make another model call in the same Step: the run ends with the valid
   calls, and the ``retried`` answer reaches the model after the resume.
7. The "answered a call no Step ran" check ignores Pydantic AI's own
   ``retried`` answers and output tool returns.
8. A tool that runs out of its own retries raises ``UnexpectedModelBehavior``
   whose cause is the ``ModelRetry``, like a sub-agent's model error: the
   runner records ``failed`` only when the message names the Step's own tool
   ("Tool '<name>' exceeded max retries") and the cause is a ``ModelRetry``.
9. External tools and ``CallDeferred`` end the tool Step run the same way; the
   runner tells them apart by the tool's original ``kind``, recorded before
   any rewrite. An approved external call raises ``RuntimeError`` in Pydantic
   AI and is recorded ``failed`` the same way.
10. The output-validator check raises `ValueError` (Pydantic AI's own error
    would be ``UserError``) and unwraps ``WrapperAgent`` first.
11. MCP toolsets are ``MCPToolset`` (``MCPServerStdio`` is gone in 2.x); the
    policy reads the ``annotations`` of any tool's ``metadata``.
12. ``RetryPromptPart`` is deprecated; retries are ``ToolReturnPart``
    (``outcome='retried'``) or ``RetryFeedbackPart``, and old stored JSON loads.

Also: the runner adds ``ReinjectSystemPrompt()`` only when the agent has none
(a run-level one with the same id would replace the agent's); a revealed
tool-search tool is made visible in its own Step by a capability with default
ordering (an outermost one would sit outside ``ToolSearch`` and not work).
"""

from dex_agents.adapters.pydantic_ai.flow import pydantic_ai_session_flow
from dex_agents.adapters.pydantic_ai.idempotency import IDEMPOTENCY_KEY_METADATA_KEY, deferred_tool_idempotency_key
from dex_agents.adapters.pydantic_ai.runner import PydanticAIRunner

__all__ = [
    "IDEMPOTENCY_KEY_METADATA_KEY",
    "PydanticAIRunner",
    "deferred_tool_idempotency_key",
    "pydantic_ai_session_flow",
]
