"""dex-agents: durable AI agent sessions on the Dex durable-execution engine.

One session is one Dex Flow execution; the Flow ID is the session ID. Each
agent gets its own Flow type (`AgentSessionFlow`), and a framework adapter
plugs in through the runner contract (`AgentFrameworkRunner`). The session
runs in Step mode: every model call is one ``RunModel`` Step and every tool
call, reads included, is its own Step, so a crash repeats at most the one call
that was running.

Steps (the one table of them; `STEP_POLICIES` holds the same numbers):

| Step                         | input        | attempts    | failure route                |
|------------------------------|--------------|-------------|------------------------------|
| ``StartAgentSession``        | start input  | 3           | ``RecordStartFailure``       |
| ``AwaitUserMessage``         | none         | 3           | ``RecordTurnFailure``        |
| ``RunModel``                 | none         | 3 in 30 min | ``RecordTurnFailure``        |
| ``AwaitToolApproval``        | tool-call ID | 5           | none                         |
| ``CallTool``                 | tool-call ID | 3           | ``RecordToolFailure``        |
| ``CallSingleAttemptTool``    | tool-call ID | 1           | ``RecordToolOutcomeUnknown`` |
| ``RecordToolFailure``        | tool-call ID | 5           | none                         |
| ``RecordToolOutcomeUnknown`` | tool-call ID | 5           | none                         |
| ``ReconcileToolCall``        | tool-call ID | 3           | ``RecordToolOutcomeUnknown`` |
| ``ResumeTurn``               | result count | 3           | ``RecordResumeFailure``      |
| ``RecordTurnFailure``        | none         | 5           | none                         |
| ``RecordResumeFailure``      | result count | 5           | none                         |
| ``RecordStartFailure``       | start input  | 5           | none                         |
| ``CompactHistory``           | reason       | 3 in 30 min | ``RecordCompactionFailure``  |
| ``RecordCompactionFailure``  | reason       | 5           | none                         |

- ``StartAgentSession`` initializes state, usage and interrupts; next
  ``RunModel`` when the first message is not blank, else ``AwaitUserMessage``.
- ``AwaitUserMessage`` writes ``turn_committed`` for the turn that just ended,
  waits for a steered (first) or queued user message and starts a turn; next
  ``RunModel`` (or ``CompactHistory`` first, see below).
- ``RunModel`` makes one model call (15 min timeout, 2 min heartbeat timeout);
  next ``AwaitUserMessage`` when the turn completed, else one Step per tool
  call plus ``ResumeTurn``, in parallel (a response of one call that needs no
  answer: its tool Step alone, which resumes the turn itself). A ``sequential`` call
  (`DeferredToolCall.sequential`) runs alone, in model order: only the calls
  before the first one start here, the rest are stored ``queued``
  (`dex_agents.domain.tool_order`). A turn with a cancel request ends
  here instead, before the model is called (``turn_cancelled``).
- ``AwaitToolApproval`` waits for a person's answer and the deadline; next
  the call's tool Step, or it ends ``rejected`` or ``expired``.
- ``CallTool`` runs a read or idempotent write, ``CallSingleAttemptTool`` any
  other call (both with a 2 min heartbeat timeout); they end, or, for a
  response's one call, go on to the model (``RunModel``). The latter runs
  its tool at most once: it reads its marked ``tool_call_started`` back from
  the event Stream before running it, and records ``outcome_unknown`` when an
  earlier delivery of the same attempt already announced it. Either runs an
  approved call only when the approval's digest is the call's.
- ``RecordToolFailure`` records ``failed`` for a read and ``outcome_unknown``
  for a write; ``RecordToolOutcomeUnknown`` records ``outcome_unknown``.
- A single-attempt call whose outcome is unknown and whose `ToolPolicy` is
  ``reconcilable`` is stored ``reconciling`` instead; ``ReconcileToolCall``
  runs the runner's reconcile probe (`ToolCallReconciler`, a read by the
  idempotency key) and records ``succeeded`` with the output it found,
  ``not_applied`` (it did not take effect; the model may call again), or
  ``outcome_unknown`` (the probe could not tell, or failed 3 attempts: its
  failure route is ``RecordToolOutcomeUnknown``); it ends (or goes on to the
  model, as the tool Step of a response's one call does).
- ``ResumeTurn`` waits for the tool results and takes the steered messages
  queued by then (input 0, from ``RunModel`` after a response's one call: the
  steered messages alone); next ``RunModel`` (or ``CompactHistory`` first), or, while
  ``queued`` calls are left, the Steps of the next wave (a call needing
  approval asks for it then) plus ``ResumeTurn`` again.
- ``RecordTurnFailure`` records the error and a note of the calls that ran and
  clears the turn (or records the turn a failed ``AwaitUserMessage`` would have
  started as failed); ``RecordResumeFailure`` does the same for ``ResumeTurn``
  and ``RecordStartFailure`` for ``StartAgentSession`` (it initializes the
  session too); next ``AwaitUserMessage``.
- Before a model call whose context (the summary and the messages after it)
  exceeds the budget of `CompactionPolicy`, and after a provider's
  `ContextOverflowError`, ``CompactHistory`` folds the oldest messages into a
  new cumulative summary (the runner's `HistoryCompactor`; the model policy of
  ``RunModel``) and writes ``history_compacted``; next ``RunModel``, which
  reads only the summary and the messages after it. Every message stays
  stored and readable. ``RecordCompactionFailure`` leaves the history as it
  was and lets the turn go on when its context still fits, else fails it.
  Every way into ``RunModel`` goes through this check and names the window
  it loads. A turn with a cancel request ends in ``CompactHistory`` (or
  ``RecordCompactionFailure``) as in ``RunModel``, before anything is
  compacted (a summary is a model call).

A runner whose ``build_user_message`` raises, or a refused first message,
fails that turn inside the Step; no Step is left on the engine's default of
4 hours of retries. Only a bug in dex-agents itself can fail a session.

Limits (`AgentSessionOptions`): each client text at most
``max_input_text_bytes`` (256 KiB) of Unicode without NUL, refused with
`InvalidInputError` otherwise; each tool output at most
``max_tool_output_bytes`` (256 KiB), cut with a notice beyond; each live event
at most ``max_event_bytes`` (64 KiB); each Step's writes at most 3 MiB, or the
attempt fails with `StepResultTooLargeError` and nothing is sent.

Every tool call publishes exactly one result when its record becomes final.

Effects (`ToolEffect`; the one table of them, pinned to `tool_step_name`,
`maximum_attempts`, `status_after_exhausted_retries` and
`default_requires_approval` by a parity test):

| effect                 | Step                    | attempts | after exhausted retries | approval |
|------------------------|-------------------------|----------|-------------------------|----------|
| ``read``               | ``CallTool``            | 3        | ``failed``              | no       |
| ``idempotent_write``   | ``CallTool``            | 3        | ``outcome_unknown``     | no       |
| ``non_idempotent_write`` | ``CallSingleAttemptTool`` | 1    | ``outcome_unknown``     | yes      |
| ``unclassified``       | ``CallSingleAttemptTool`` | 1      | ``outcome_unknown``     | yes      |

A write that exhausted its attempts may have taken effect, so it is
``outcome_unknown``, never run again; a crash in a single-attempt call is
``outcome_unknown`` at once (or reconciled, when its policy is
``reconcilable``). `ToolPolicy` overrides per tool name; policies resolve
explicit policy, then framework metadata, then the default effect.

Idempotency key: ``<flow_id>/<turn_id>/<tool_call_id>``, the same on every
attempt of one call, so an idempotent write can deduplicate its retries.

Error policy: what the model must see is a value (``ToolExecutionError`` makes
a ``failed`` record; a rejection, ``rejected``; a refused RPC answers
``False``); anything else raises and is left to Dex retries and failure routes;
runner contract violations raise `RunnerContractError` (every value a runner
returns is type-checked where it comes back, `dex_agents.domain.contract`: the
error names the method, what the contract asks for and what came back). Live
events are best effort; the snapshot is the truth.

Tool outcomes: a call waiting for approval ends ``rejected`` (a person said
no) or ``expired`` (its deadline passed; the model sees
`EXPIRED_REJECTION_MESSAGE`). A tool may ask for approval itself while its
Step runs, before acting (`ToolApprovalRequestedError`: Pydantic AI's
``ApprovalRequired``): its call waits ``awaiting_approval`` as a policy's call
does, and once approved its tool Step runs again (for a single-attempt write,
its one real attempt). A call whose result comes from outside the
session (an external tool, or a tool raising `ToolResultDeferredError` in its
Step: Pydantic AI's ``ExternalToolset`` and ``CallDeferred``) waits
``awaiting_result`` under a pending interrupt of kind ``tool_result``
(`InterruptKind`) until `AgentSessionClient.submit_tool_result` gives it a
result (``succeeded``) or an error (``failed``), or its
``external_result_deadline`` passes (``expired``, `EXPIRED_RESULT_MESSAGE`);
a refused submission raises a `ToolResultRefusedError` (unknown call, answered
already, not waiting) or `InvalidInputError`. A turn's records are deleted when it ends, but
each stored tool-result message keeps what its calls came to in
``AgentMessage.tool_outcomes`` (`ToolOutcome`: status, effect, attempts,
approval, approver), and so does a failed turn's note (it starts with
`TURN_FAILURE_NOTE_HEADER`), so `AgentSessionClient.get_agent_snapshot` and
``list_agent_messages`` show every past call's outcome.

Application loop (no ``dex_agents.testing`` needed)::

    receipt = await sessions.submit_user_message(session_id, "refund order 7")
    result = await sessions.wait_for_turn(session_id, receipt, timeout=120)
    if result.status is TurnStatus.FAILED:
        print("failed:", result.error)
    else:
        print(result.reply, [o.status for o in result.tool_outcomes])

Steering and cancelling: ``send_user_message(..., delivery="steer")`` joins a
running turn at its next model-call boundary (``ResumeTurn``, after every tool
result, or ``RunModel`` sending it through ``ResumeTurn`` after a response's
one call; `AgentTurnContext.steered_messages` hands it to the next model call);
the snapshot lists waiting messages and ``withdraw_user_message`` removes one;
``cancel_turn`` stops the turn at its next safe boundary (approvals rejected,
calls not started ``cancelled``, a running tool finishes, no further model
call) and stores a note starting with `TURN_CANCELLED_NOTE_HEADER`. Approval
deadlines are Dex Timers measured by the server.

`MessageReceipt`, `TurnResult` (``completed``, ``cancelled`` or ``failed``) and
`AgentSessionClient.wait_until_idle` are built on the committed snapshot and
the event stream; a wait for a known turn (``wait_for_turn``, and
``wait_for_turn_end``, which reads nothing else) blocks on the ``TURNS_ENDED``
Attribute instead of reading the turn's events. ``turn_completed`` and ``turn_failed`` are written before
their Step commits; ``turn_committed`` (written by the next Step, after the
commit) tells a UI reading the stream that the turn's state is readable.

An application in five lines (`open_agent_app` starts the Worker, Client and
blob cache for its Flows, binds what needs binding and shuts all down on exit)::

    async with open_agent_app([flow], server_address="127.0.0.1:8801") as app:
        sessions = app.sessions(flow)
        await sessions.start_session("session-42")
        receipt = await sessions.submit_user_message("session-42", "Find my open tickets")
        print((await sessions.wait_for_turn("session-42", receipt, timeout=120)).reply)

Serving a Flow by hand needs the dex-agents codecs::

    registry = dex.Registry([flow], codec_registry(), allow_async_handlers=True)
"""

from dex_agents.application.compaction import (
    CompactionPolicy,
    CompactionSummary,
    ExcerptCompactor,
    HistoryCompactor,
)
from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.options import (
    DEFAULT_EVENT_STREAM_CAPACITY_BYTES,
    DEFAULT_MAX_EVENT_BYTES,
    AgentSessionOptions,
)
from dex_agents.application.runner import (
    AgentFrameworkRunner,
    AgentTurnContext,
    ContextOverflowError,
    DeferredToolExecution,
    ReconcileResult,
    ReconcileVerdict,
    ToolApprovalRequestedError,
    ToolCallReconciler,
    ToolExecutionResult,
    ToolResultDeferredError,
    TurnFailedError,
)
from dex_agents.domain.errors import (
    DexAgentsError,
    InvalidInputError,
    InvalidTransitionError,
    NotAwaitingToolResultError,
    RunnerContractError,
    StepResultTooLargeError,
    ToolExecutionError,
    ToolResultAlreadySubmittedError,
    ToolResultRefusedError,
    UnknownToolCallError,
)
from dex_agents.domain.events import EVENT_PAYLOAD_KEYS, AgentEvent, AgentEventType, SteeredLanding
from dex_agents.domain.failure_note import (
    CANCELLED_TOOL_RESULT,
    DEFAULT_REJECTION_TEXT,
    NOT_APPLIED_TOOL_RESULT,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    TURN_FAILURE_NOTE_FOOTER,
    TURN_FAILURE_NOTE_HEADER,
    build_turn_failure_note,
    describe_tool_call_outcome,
)
from dex_agents.domain.history import HistorySummary
from dex_agents.domain.interrupts import (
    EXPIRED_REJECTION_MESSAGE,
    EXPIRED_RESULT_MESSAGE,
    AgentInterrupt,
    AgentInterruptResolution,
    InterruptKind,
    ResolveInterruptRequest,
    SubmitToolResultRequest,
)
from dex_agents.domain.limits import DEFAULT_MAX_INPUT_TEXT_BYTES, DEFAULT_MAX_TOOL_OUTPUT_BYTES, InputProblem
from dex_agents.domain.messages import (
    AgentMessage,
    AgentUserMessage,
    FrameworkMessage,
    MessageDelivery,
    MessageRole,
    message_sequence_key,
)
from dex_agents.domain.session import AgentState, AgentStatus
from dex_agents.domain.snapshot import (
    AgentMessagesPage,
    AgentSnapshot,
    ListAgentMessagesRequest,
    TurnResult,
    TurnStatus,
    turn_result,
)
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.tools import (
    AgentToolCall,
    ApprovalStatus,
    ToolCallCompleted,
    ToolCallStatus,
    ToolEffect,
    ToolOutcome,
    ToolPolicy,
    idempotency_key,
    is_approval_required,
)
from dex_agents.domain.turn_control import TURN_CANCELLED_NOTE_HEADER, CancelTurnRequest, TurnCancelRequest
from dex_agents.domain.turns import AgentTurnOutcome, DeferredToolCall, ToolCallsRequested, TurnCompleted
from dex_agents.domain.usage import AgentUsage
from dex_agents.infrastructure.dex.app import AgentApp, open_agent_app
from dex_agents.infrastructure.dex.client import (
    AgentEventMessage,
    AgentSessionClient,
    MessageReceipt,
    SessionStart,
)
from dex_agents.infrastructure.dex.codec import codec_registry
from dex_agents.infrastructure.dex.container import AgentContainer, WorkerMode, wait_worker_serving
from dex_agents.infrastructure.dex.flow import AgentSessionFlow
from dex_agents.infrastructure.dex.persistence import (
    AGENT_EVENTS_STREAM_NAME,
    AGENT_HISTORY_SUMMARIES,
    AGENT_MESSAGES,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    FRAMEWORK_RUN_STATE,
    FRAMEWORK_RUN_STATES,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    TOOL_CALL_RESULTS,
)
from dex_agents.infrastructure.dex.session_errors import (
    NoWorkerError,
    SessionAlreadyExistsError,
    SessionUnavailableError,
)

__all__ = [
    "AGENT_EVENTS_STREAM_NAME",
    "AGENT_HISTORY_SUMMARIES",
    "AGENT_MESSAGES",
    "AGENT_STATE",
    "AGENT_TOOL_CALLS",
    "AGENT_USAGE",
    "CANCELLED_TOOL_RESULT",
    "DEFAULT_EVENT_STREAM_CAPACITY_BYTES",
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_MAX_INPUT_TEXT_BYTES",
    "DEFAULT_MAX_TOOL_OUTPUT_BYTES",
    "DEFAULT_REJECTION_TEXT",
    "EVENT_PAYLOAD_KEYS",
    "EXPIRED_REJECTION_MESSAGE",
    "EXPIRED_RESULT_MESSAGE",
    "FRAMEWORK_RUN_STATE",
    "FRAMEWORK_RUN_STATES",
    "INTERRUPT_RESOLUTIONS",
    "NOT_APPLIED_TOOL_RESULT",
    "OUTCOME_UNKNOWN_TOOL_RESULT",
    "PENDING_INTERRUPTS",
    "QUEUED_USER_MESSAGES",
    "TOOL_CALL_RESULTS",
    "TURN_CANCELLED_NOTE_HEADER",
    "TURN_FAILURE_NOTE_FOOTER",
    "TURN_FAILURE_NOTE_HEADER",
    "AgentApp",
    "AgentContainer",
    "AgentEvent",
    "AgentEventMessage",
    "AgentEventType",
    "AgentEventWriter",
    "AgentFrameworkRunner",
    "AgentInterrupt",
    "AgentInterruptResolution",
    "AgentMessage",
    "AgentMessagesPage",
    "AgentSessionClient",
    "AgentSessionFlow",
    "AgentSessionOptions",
    "AgentSessionStartInput",
    "AgentSnapshot",
    "AgentState",
    "AgentStatus",
    "AgentToolCall",
    "AgentTurnContext",
    "AgentTurnOutcome",
    "AgentUsage",
    "AgentUserMessage",
    "ApprovalStatus",
    "CancelTurnRequest",
    "CompactionPolicy",
    "CompactionSummary",
    "ContextOverflowError",
    "DeferredToolCall",
    "DeferredToolExecution",
    "DexAgentsError",
    "ExcerptCompactor",
    "FrameworkMessage",
    "HistoryCompactor",
    "HistorySummary",
    "InputProblem",
    "InterruptKind",
    "InvalidInputError",
    "InvalidTransitionError",
    "ListAgentMessagesRequest",
    "MessageDelivery",
    "MessageReceipt",
    "MessageRole",
    "NoWorkerError",
    "NotAwaitingToolResultError",
    "ReconcileResult",
    "ReconcileVerdict",
    "ResolveInterruptRequest",
    "RunnerContractError",
    "SessionAlreadyExistsError",
    "SessionStart",
    "SessionUnavailableError",
    "SteeredLanding",
    "StepResultTooLargeError",
    "SubmitToolResultRequest",
    "ToolApprovalRequestedError",
    "ToolCallCompleted",
    "ToolCallReconciler",
    "ToolCallStatus",
    "ToolCallsRequested",
    "ToolEffect",
    "ToolExecutionError",
    "ToolExecutionResult",
    "ToolOutcome",
    "ToolPolicy",
    "ToolResultAlreadySubmittedError",
    "ToolResultDeferredError",
    "ToolResultRefusedError",
    "TurnCancelRequest",
    "TurnCompleted",
    "TurnFailedError",
    "TurnResult",
    "TurnStatus",
    "UnknownToolCallError",
    "WorkerMode",
    "build_turn_failure_note",
    "codec_registry",
    "describe_tool_call_outcome",
    "idempotency_key",
    "is_approval_required",
    "message_sequence_key",
    "open_agent_app",
    "turn_result",
    "wait_worker_serving",
]
