"""Test doubles and engines for dex-agents and for adapter authors (importable without pytest).

- Runner doubles, to unit-test a runner or the use cases without an engine:
  `ScriptedRunner`, `RecordingEventSink`, `make_turn_context`, ...
- Integration testing on an engine: `AgentTestStack` (the dev server by default, a
  private ``dexcli dev`` when ``DEXCLI`` is set), `run_agent_worker` for Worker
  children, `FileGate`, `InvocationLog`, `wait_until`,
  `wait_for_agent_snapshot`, `read_step_history` and `EXECUTE_COMPLETED_EVENT`.
- Whole sessions without an engine: `InMemorySessionHost` and `ManualClock`
  (`dex_agents.testing.memory` has every in-memory port).
- The dev server (`DevServer`, `DevServerConfig`, `DevServerProcess`, from
  ``dex_agents.devserver``) and its test knobs (``dex_agents.testing.devserver``:
  `TEST_RETRY_DELAY_SCALE`, the server clock, `read_history_events`, `read_step_history`).
"""

from dex_agents.testing.devserver import (
    EXECUTE_COMPLETED_EVENT,
    TEST_RETRY_DELAY_SCALE,
    DevServer,
    DevServerConfig,
    DevServerProcess,
    StepHistoryEntry,
    read_history_events,
    read_step_history,
)
from dex_agents.testing.memory import InMemorySessionHost, ManualClock
from dex_agents.testing.probes import (
    FileGate,
    InvocationLog,
    session_is_idle,
    wait_for_agent_snapshot,
    wait_until,
)
from dex_agents.testing.runner_doubles import (
    ModelReply,
    RecordingEventSink,
    RecordingHeartbeat,
    ScriptedRunner,
    ScriptExhaustedError,
    ToolReplies,
    ToolReply,
    assistant_message,
    deferred_tool_call,
    framework_message,
    make_event_writer,
    make_tool_call,
    make_tool_execution,
    make_turn_context,
    tool_calls_requested,
    user_message,
)
from dex_agents.testing.stack import (
    AgentTestStack,
    WorkerProcess,
    default_backend,
    default_worker_mode,
    run_agent_worker,
)

__all__ = [
    "EXECUTE_COMPLETED_EVENT",
    "TEST_RETRY_DELAY_SCALE",
    "AgentTestStack",
    "DevServer",
    "DevServerConfig",
    "DevServerProcess",
    "FileGate",
    "InMemorySessionHost",
    "InvocationLog",
    "ManualClock",
    "ModelReply",
    "RecordingEventSink",
    "RecordingHeartbeat",
    "ScriptExhaustedError",
    "ScriptedRunner",
    "StepHistoryEntry",
    "ToolReplies",
    "ToolReply",
    "WorkerProcess",
    "assistant_message",
    "default_backend",
    "default_worker_mode",
    "deferred_tool_call",
    "framework_message",
    "make_event_writer",
    "make_tool_call",
    "make_tool_execution",
    "make_turn_context",
    "read_history_events",
    "read_step_history",
    "run_agent_worker",
    "session_is_idle",
    "tool_calls_requested",
    "user_message",
    "wait_for_agent_snapshot",
    "wait_until",
]
