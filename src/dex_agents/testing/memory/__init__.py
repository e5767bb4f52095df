"""An engine-free host: whole sessions on in-memory ports, with the same use cases and Step policies.

`InMemorySessionHost` runs one session without Dex: every port is an
in-memory object you can inspect, each use case is built with its ``wired``
factory exactly as the Dex binding builds it, and `InMemorySessionHost.drive`
follows the "what next" values like a very small engine: it retries failing
Steps as `STEP_POLICIES` says and takes their failure routes, delivers waits
from the in-memory channels, fires an approval deadline once the
`ManualClock` has reached it, and returns the Steps left waiting. A runner
author tests a runner and an agent through whole sessions (turns, tools,
approvals, failures) in milliseconds::

    host = InMemorySessionHost(MyRunner(agent), options=AgentSessionOptions(...))
    waiting = await host.drive(await host.start("Refund order 7"))  # runs until the approval
    (interrupt,) = (await host.get_agent_snapshot()).pending_interrupts
    await host.resolve_interrupt(interrupt.interrupt_id, approved=True)
    waiting = await host.drive(*waiting)  # the call runs, the model answers, the turn ends
    snapshot = await host.get_agent_snapshot()

What it does not emulate: concurrency between Steps (it runs them one after
another), crashes and redelivery, and events' Stream limits; the dev server
(`dex_agents.devserver`) and `AgentTestStack` cover those.
"""

from dex_agents.testing.memory._channels import (
    InMemoryResolutionPublisher,
    InMemoryToolResultPublisher,
    InMemoryUserMessageQueue,
)
from dex_agents.testing.memory._clock import ManualClock
from dex_agents.testing.memory._deliveries import InMemoryDeliveryLedger
from dex_agents.testing.memory._driver import InMemorySessionHost
from dex_agents.testing.memory._stores import (
    InMemoryCancelRequestStore,
    InMemoryHistorySummaryStore,
    InMemoryInterruptStore,
    InMemoryMessageLog,
    InMemoryRunStateStore,
    InMemorySessionStateStore,
    InMemorySteeredMessageStore,
    InMemoryToolCallStore,
    InMemoryUsageStore,
)

__all__ = [
    "InMemoryCancelRequestStore",
    "InMemoryDeliveryLedger",
    "InMemoryHistorySummaryStore",
    "InMemoryInterruptStore",
    "InMemoryMessageLog",
    "InMemoryResolutionPublisher",
    "InMemoryRunStateStore",
    "InMemorySessionHost",
    "InMemorySessionStateStore",
    "InMemorySteeredMessageStore",
    "InMemoryToolCallStore",
    "InMemoryToolResultPublisher",
    "InMemoryUsageStore",
    "InMemoryUserMessageQueue",
    "ManualClock",
]
