"""Every fake is assigned to its port's Protocol type, so mypy proves it conforms."""

from dex_agents.application import ports as ports_module
from dex_agents.application.ports import (
    CancelRequestStore,
    Clock,
    DeliveryLedger,
    EventSink,
    Heartbeat,
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
from dex_agents.testing import RecordingEventSink, RecordingHeartbeat, ScriptedRunner
from dex_agents.testing.memory import (
    InMemoryCancelRequestStore,
    InMemoryDeliveryLedger,
    InMemoryHistorySummaryStore,
    InMemoryInterruptStore,
    InMemoryMessageLog,
    InMemoryResolutionPublisher,
    InMemoryRunStateStore,
    InMemorySessionStateStore,
    InMemorySteeredMessageStore,
    InMemoryToolCallStore,
    InMemoryToolResultPublisher,
    InMemoryUsageStore,
    InMemoryUserMessageQueue,
    ManualClock,
)
from tests.fakes.sinks import FailingEventSink


def test_every_fake_conforms_to_its_port() -> None:
    state: SessionStateStore = InMemorySessionStateStore()
    messages: MessageLog = InMemoryMessageLog()
    run_state: RunStateStore = InMemoryRunStateStore()
    tool_calls: ToolCallStore = InMemoryToolCallStore()
    interrupts: InterruptStore = InMemoryInterruptStore()
    usage: UsageStore = InMemoryUsageStore()
    queue: UserMessageQueue = InMemoryUserMessageQueue()
    steering: SteeringQueue = InMemoryUserMessageQueue()
    resolutions: ResolutionPublisher = InMemoryResolutionPublisher()
    results: ToolResultPublisher = InMemoryToolResultPublisher()
    summaries: HistorySummaryStore = InMemoryHistorySummaryStore()
    sink: EventSink = RecordingEventSink()
    failing_sink: EventSink = FailingEventSink()
    heartbeat: Heartbeat = RecordingHeartbeat()
    heartbeat_fn: HeartbeatFn = RecordingHeartbeat()
    clock: Clock = ManualClock()
    runner: AgentFrameworkRunner = ScriptedRunner()
    deliveries: DeliveryLedger = InMemoryDeliveryLedger(RecordingEventSink())
    steered: SteeredMessageStore = InMemorySteeredMessageStore()
    cancel_request: CancelRequestStore = InMemoryCancelRequestStore()

    ports = [state, messages, run_state, tool_calls, interrupts, usage, queue, resolutions, results, steered]
    ports += [cancel_request, summaries, steering]
    assert all(port is not None for port in ports)
    assert all(port is not None for port in (sink, failing_sink, heartbeat, heartbeat_fn, clock, runner, deliveries))


def test_every_port_has_a_fake_in_the_conformance_test() -> None:
    ports = {
        name
        for name, value in vars(ports_module).items()
        if isinstance(value, type)
        and getattr(value, "_is_protocol", False)
        and value.__module__ == ports_module.__name__
    }
    covered = {
        "SessionStateStore",
        "MessageLog",
        "RunStateStore",
        "ToolCallStore",
        "InterruptStore",
        "UsageStore",
        "UserMessageQueue",
        "SteeringQueue",
        "SteeredMessageStore",
        "CancelRequestStore",
        "ResolutionPublisher",
        "ToolResultPublisher",
        "HistorySummaryStore",
        "EventSink",
        "Heartbeat",
        "Clock",
        "DeliveryLedger",
    }
    assert ports == covered
