"""In-memory fakes of every application port, and a whole session built on them.

The event sink and heartbeat fakes are the public ones of `dex_agents.testing`,
re-exported here so every port's fake is importable from one place.
"""

from dex_agents.testing import RecordingEventSink, RecordingHeartbeat
from tests.fakes.channels import (
    FailingEventSink,
    FakeResolutionPublisher,
    FakeToolResultPublisher,
    FakeUserMessageQueue,
)
from tests.fakes.clock import FakeClock
from tests.fakes.session import FakeSession
from tests.fakes.stores import (
    FakeInterruptStore,
    FakeMessageLog,
    FakeRunStateStore,
    FakeSessionStateStore,
    FakeToolCallStore,
    FakeUsageStore,
)

__all__ = [
    "FailingEventSink",
    "FakeClock",
    "FakeInterruptStore",
    "FakeMessageLog",
    "FakeResolutionPublisher",
    "FakeRunStateStore",
    "FakeSession",
    "FakeSessionStateStore",
    "FakeToolCallStore",
    "FakeToolResultPublisher",
    "FakeUsageStore",
    "FakeUserMessageQueue",
    "RecordingEventSink",
    "RecordingHeartbeat",
]
