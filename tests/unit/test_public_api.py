import dex_agents

EXPECTED = {
    "AGENT_EVENTS_STREAM_NAME", "AGENT_MESSAGES", "AGENT_STATE", "AGENT_TOOL_CALLS", "AGENT_USAGE",
    "DEFAULT_EVENT_STREAM_CAPACITY_BYTES", "EVENT_PAYLOAD_KEYS", "FRAMEWORK_RUN_STATE", "INTERRUPT_RESOLUTIONS",
    "OUTCOME_UNKNOWN_TOOL_RESULT", "PENDING_INTERRUPTS", "QUEUED_USER_MESSAGES", "TOOL_CALL_RESULTS",
    "AgentApp", "AgentContainer", "AgentEvent", "AgentEventMessage", "AgentEventType", "AgentEventWriter",
    "AgentFrameworkRunner",
    "AgentInterrupt", "AgentInterruptResolution", "AgentMessage", "AgentMessagesPage", "AgentSessionClient",
    "AgentSessionFlow", "AgentSessionOptions", "AgentSessionStartInput", "AgentSnapshot", "AgentState", "AgentStatus",
    "AgentToolCall", "AgentTurnContext", "AgentTurnOutcome", "AgentUsage", "AgentUserMessage", "DeferredToolCall",
    "DeferredToolExecution", "DexAgentsError", "FrameworkMessage", "InvalidTransitionError",
    "ListAgentMessagesRequest", "MessageRole", "ResolveInterruptRequest", "RunnerContractError", "ToolCallCompleted",
    "ToolCallStatus", "ToolCallsRequested", "ToolEffect", "ToolExecutionError", "ToolExecutionResult", "ToolPolicy",
    "TurnCompleted", "build_turn_failure_note", "codec_registry", "describe_tool_call_outcome", "idempotency_key",
    "is_approval_required", "message_sequence_key", "open_agent_app",
    # hardening: limits and the errors of refused inputs and oversized results
    "DEFAULT_MAX_EVENT_BYTES", "DEFAULT_MAX_INPUT_TEXT_BYTES", "DEFAULT_MAX_TOOL_OUTPUT_BYTES", "InputProblem",
    "InvalidInputError", "StepResultTooLargeError", "SessionUnavailableError",
    # following turns: following turns, tool outcomes, expiry, the note's lines
    "ApprovalStatus", "DEFAULT_REJECTION_TEXT", "EXPIRED_REJECTION_MESSAGE", "MessageReceipt", "ToolOutcome",
    "TURN_FAILURE_NOTE_FOOTER", "TURN_FAILURE_NOTE_HEADER", "TurnResult", "TurnStatus", "turn_result",
    # reconciling unknown outcomes: the optional probe of the runner contract and what the model reads
    "NOT_APPLIED_TOOL_RESULT", "ReconcileResult", "ReconcileVerdict", "ToolCallReconciler",
    # long sessions: compaction's policy, port, summary, the provider's overflow error and the summaries' map
    "AGENT_HISTORY_SUMMARIES", "CompactionPolicy", "CompactionSummary", "ContextOverflowError", "ExcerptCompactor",
    "HistoryCompactor", "HistorySummary",
    # steering and cancelling a running turn (issue 15)
    "CANCELLED_TOOL_RESULT", "CancelTurnRequest", "MessageDelivery", "SteeredLanding", "TURN_CANCELLED_NOTE_HEADER",
    "TurnCancelRequest",
    # the run state as a map instance, so only the Steps that read it load it (issue 14)
    "FRAMEWORK_RUN_STATES",
    # Worker modes (issue 14): pull or listening Workers, and waiting until one serves
    "WorkerMode", "wait_worker_serving",
    # the session lifecycle (issue 27): an idempotent start, and what Dex refused said in one line
    "NoWorkerError", "SessionAlreadyExistsError", "SessionStart",
    # usage limits per turn (issue 26): a turn the framework ended at once, without another attempt
    "TurnFailedError",
    # results from outside the session: a call waits for submit_tool_result as an approval waits
    "EXPIRED_RESULT_MESSAGE", "InterruptKind", "NotAwaitingToolResultError", "SubmitToolResultRequest",
    "ToolResultAlreadySubmittedError", "ToolResultDeferredError", "ToolResultRefusedError", "UnknownToolCallError",
    # a tool asking for approval while its Step runs, before acting (Pydantic AI's ApprovalRequired)
    "ToolApprovalRequestedError",
}  # fmt: skip


def test_the_public_api_is_exactly_the_documented_names() -> None:
    assert set(dex_agents.__all__) == EXPECTED
    assert all(hasattr(dex_agents, name) for name in EXPECTED)
