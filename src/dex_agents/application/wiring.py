"""What a host hands every use case: one session's ports, and what the Steps of one agent share.

A host builds `SessionPorts` once per Step or RPC call (the Dex binding from
the handler's context, the in-memory host from its fakes) and an `AgentSetup`
once per agent; each use case takes what it needs through its own ``wired``
factory. Adding a port to a use case touches that use case only: its field
and its ``wired``.
"""

import attrs

from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import (
    Clock,
    InterruptStore,
    MessageLog,
    ResolutionPublisher,
    RunStateStore,
    SessionStateStore,
    ToolCallStore,
    ToolResultPublisher,
    UsageStore,
    UserMessageQueue,
)
from dex_agents.application.runner import AgentFrameworkRunner


@attrs.frozen(kw_only=True)
class SessionPorts:
    """Every piece of one session's durable state, as ports."""

    state: SessionStateStore
    """``AGENT_STATE``."""
    messages: MessageLog
    """``AGENT_MESSAGES``."""
    run_state: RunStateStore
    """``FRAMEWORK_RUN_STATE``."""
    tool_calls: ToolCallStore
    """``AGENT_TOOL_CALLS``."""
    interrupts: InterruptStore
    """``PENDING_INTERRUPTS``."""
    usage: UsageStore
    """``AGENT_USAGE``."""
    queue: UserMessageQueue
    """``QUEUED_USER_MESSAGES``."""
    resolutions: ResolutionPublisher
    """``INTERRUPT_RESOLUTIONS``."""
    results: ToolResultPublisher
    """``TOOL_CALL_RESULTS``."""


@attrs.frozen(kw_only=True)
class AgentSetup:
    """What every Step and RPC of one agent's sessions share."""

    runner: AgentFrameworkRunner
    """The framework runner."""
    options: AgentSessionOptions
    """The agent's session options."""
    clock: Clock
    """The clock approval deadlines are measured by."""
