"""What a host hands every use case: one session's ports, and what the Steps of one agent share.

A host builds `SessionPorts` once per Step or RPC call (the Dex binding from
the handler's context, the in-memory host from its in-memory ports) and an
`AgentSetup` once per agent; every use case derives from `Wired`, whose one
``wired`` factory fills each of the use case's fields by its name, or, for a
field whose type is itself a `Wired` collaborator (such as the turn closer),
builds that collaborator the same way. Adding a port to a use case is its field
and, when it reads loaded state, the `Load` in its Step's declaration
(`dex_agents.application.declarations`). A unit test compares every use case's
field types with what the hosts give under that name.
"""

from collections.abc import Mapping
from typing import Self, cast

import attrs

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.ports import (
    CancelRequestStore,
    Clock,
    DeliveryLedger,
    HistorySummaryStore,
    InterruptStore,
    MessageLog,
    ResolutionPublisher,
    RunStateStore,
    SessionStateStore,
    SteeredMessageStore,
    SteeringQueue,
    ToolCallStore,
    ToolResultPublisher,
    UsageStore,
    UserMessageQueue,
)
from dex_agents.application.runner import AgentFrameworkRunner, HeartbeatFn


@attrs.frozen(kw_only=True)
class SessionPorts:
    """Every piece of one session's durable state, as ports."""

    session_state: SessionStateStore
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
    summaries: HistorySummaryStore
    """``AGENT_HISTORY_SUMMARIES``."""
    steering: SteeringQueue
    """``STEERED_USER_MESSAGES``: steered messages no turn has taken yet."""
    steered: SteeredMessageStore
    """``STEERED_MESSAGES``: steered messages the running turn took for its next model call."""
    cancel_request: CancelRequestStore
    """``TURN_CANCEL_REQUEST``."""


@attrs.frozen(kw_only=True)
class AgentSetup:
    """What every Step and RPC of one agent's sessions share."""

    runner: AgentFrameworkRunner
    """The framework runner."""
    options: AgentSessionOptions
    """The agent's session options."""
    clock: Clock
    """The clock approval deadlines are measured by."""
    deliveries: DeliveryLedger
    """What the engine stored of single-attempt tool Steps' ``tool_call_started`` events."""


async def _no_heartbeat() -> None:
    """The heartbeat handed to a use case built outside a Step that beats (an RPC)."""


class Wired:
    """Base of every use case: `wired` builds one from what a host has, each field by its name.

    A use case is a frozen attrs class whose fields are named after what it
    needs: a port of `SessionPorts` (``session_state``, ``messages``, ...), a part of
    `AgentSetup` (``runner``, ``options``, ``clock``, ``deliveries``), the Step attempt's
    ``events`` and ``heartbeat``, or a collaborator that is itself `Wired`
    (any name; built from the same). So adding a port to a use case is adding
    the field (and its declared load), and no host changes.
    """

    @classmethod
    def wired(
        cls,
        ports: SessionPorts,
        agent: AgentSetup,
        *,
        events: AgentEventWriter | None = None,
        heartbeat: HeartbeatFn = _no_heartbeat,
    ) -> Self:
        """Build the use case from a session's ports, its agent's setup and the Step attempt's events.

        Raises:
            TypeError: the use case needs something no host provides (a field
                named after nothing above), or ``events`` and it got none.
        """
        return cls.wired_from(_available(ports, agent, events=events, heartbeat=heartbeat))

    @classmethod
    def wired_from(cls, available: Mapping[str, object]) -> Self:
        """`wired`, given what a host provides by name (built once for a use case and its collaborators)."""
        values: dict[str, object] = {}
        for name, collaborator in _plan(cls):
            if name in available:
                values[name] = available[name]
            elif collaborator is not None:
                values[name] = collaborator.wired_from(available)
            else:
                raise TypeError(f"{cls.__name__} needs {name!r}, which a host does not provide")
        return cls(**values)


_PLANS: dict[type[Wired], tuple[tuple[str, type[Wired] | None], ...]] = {}
"""Each use case's fields, with the `Wired` type of those a collaborator may fill (every Step builds its use case)."""


def _plan(kind: type[Wired]) -> tuple[tuple[str, type[Wired] | None], ...]:
    plan = _PLANS.get(kind)
    if plan is None:
        plan = _PLANS[kind] = tuple(
            (field.name, field.type if isinstance(field.type, type) and issubclass(field.type, Wired) else None)
            for field in attrs.fields(cast("type[attrs.AttrsInstance]", kind))
        )
    return plan


def _available(
    ports: SessionPorts, agent: AgentSetup, *, events: AgentEventWriter | None, heartbeat: HeartbeatFn
) -> dict[str, object]:
    available: dict[str, object] = {
        "runner": agent.runner,
        "options": agent.options,
        "clock": agent.clock,
        "deliveries": agent.deliveries,
        "heartbeat": heartbeat,
    }
    available.update((name, getattr(ports, name)) for name in _PORT_NAMES)
    if events is not None:
        available["events"] = events
    return available


_PORT_NAMES = tuple(field.name for field in attrs.fields(SessionPorts))


def provided_types() -> dict[str, object]:
    """Return the type of everything ``wired`` fills by name: what a use case's field of that name must be."""
    provided: dict[str, object] = {field.name: field.type for field in attrs.fields(SessionPorts)}
    provided.update((field.name, field.type) for field in attrs.fields(AgentSetup))
    provided["events"] = AgentEventWriter
    provided["heartbeat"] = HeartbeatFn
    return provided
