"""The durable state of a session, by the names every agent Flow type shares.

| name                    | kind                               | value                        |
|-------------------------|------------------------------------|------------------------------|
| `AGENT_STATE`           | Attribute                          | `AgentState`                 |
| `AGENT_MESSAGES`        | AttributeMap, key 12-digit sequence | `AgentMessage`              |
| `AGENT_HISTORY_SUMMARIES` | AttributeMap, key 12-digit number | `HistorySummary`            |
| `FRAMEWORK_RUN_STATES`  | AttributeMap, key `part-000000`... | text parts, only while tools run |
| `FRAMEWORK_RUN_STATE`   | Attribute (read only, see below)   | text, left by earlier versions |
| `AGENT_TOOL_CALLS`      | AttributeMap, key tool-call ID     | `AgentToolCall`, active turn |
| `PENDING_INTERRUPTS`    | Attribute                          | `list[AgentInterrupt]`       |
| `AGENT_USAGE`           | Attribute                          | `AgentUsage`                 |
| `QUEUED_USER_MESSAGES`  | Channel                            | `AgentUserMessage`           |
| `STEERED_USER_MESSAGES` | Channel                            | `AgentUserMessage`, steered  |
| `STEERED_MESSAGES`      | Attribute                          | `list[AgentUserMessage]`, taken by the turn |
| `SEEN_STEERED_MESSAGES` | Attribute                          | `list[AgentUserMessage]`, seen by its model calls |
| `TURN_CANCEL_REQUEST`   | Attribute                          | `TurnCancelRequest`          |
| `TURNS_ENDED`           | Attribute                          | int, turns ended so far      |
| `INTERRUPT_RESOLUTIONS` | ChannelMap, key interrupt ID       | `AgentInterruptResolution`   |
| `TOOL_CALL_RESULTS`     | Channel (internal)                 | `ToolCallCompleted`          |
| ``flow.agent_events``   | Stream, one per Flow type          | `AgentEvent`                 |

Attributes and Channels are shared objects; Dex needs a distinct Stream object
per Flow type, so `agent_events_stream` makes one for each.

The run state lives in an AttributeMap, not an Attribute, because Dex hands
every plain Attribute to every task: as a plain Attribute the run state (a
turn's messages so far, several KiB, offloaded to a blob over 1 KiB) went to
each tool Step of the turn, which then fetched it with ``LoadBlobs`` without
reading it (about 20 ``LoadBlobs`` calls per turn of 5 model and 4 tool calls). In a map
only the Steps that read or clear it load it (the movements to ``RunModel`` and
``CompactHistory``, the failure routes). The map holds a chain of parts, each
what one write changed (`dex_agents.infrastructure.dex.run_state_parts`), so a
model Step stores about one response and its results rather than the turn so
far, and the parts stay under the blob threshold. Earlier layouts are still
read and replaced by the next write: the whole state in instance
`RUN_STATE_KEY` (``current``), or in the plain Attribute `FRAMEWORK_RUN_STATE`.
"""

import dex

from dex_agents.domain.events import AgentEvent
from dex_agents.domain.history import HistorySummary
from dex_agents.domain.interrupts import AgentInterrupt, AgentInterruptResolution
from dex_agents.domain.messages import AgentMessage, AgentUserMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.tools import AgentToolCall, ToolCallCompleted
from dex_agents.domain.turn_control import TurnCancelRequest
from dex_agents.domain.usage import AgentUsage

AGENT_STATE: dex.Attribute[AgentState] = dex.Attribute("AGENT_STATE", AgentState)
AGENT_MESSAGES: dex.AttributeMap[AgentMessage] = dex.AttributeMap("AGENT_MESSAGES", AgentMessage)
AGENT_HISTORY_SUMMARIES: dex.AttributeMap[HistorySummary] = dex.AttributeMap("AGENT_HISTORY_SUMMARIES", HistorySummary)
FRAMEWORK_RUN_STATES: dex.AttributeMap[str] = dex.AttributeMap("FRAMEWORK_RUN_STATES", str)
RUN_STATE_KEY = "current"
"""The instance of `FRAMEWORK_RUN_STATES` where earlier versions kept the whole run state; still read."""
FRAMEWORK_RUN_STATE: dex.Attribute[str] = dex.Attribute("FRAMEWORK_RUN_STATE", str)
"""Where earlier versions stored the run state; still read, and cleared by the next write."""
AGENT_TOOL_CALLS: dex.AttributeMap[AgentToolCall] = dex.AttributeMap("AGENT_TOOL_CALLS", AgentToolCall)
PENDING_INTERRUPTS: dex.Attribute[list[AgentInterrupt]] = dex.Attribute("PENDING_INTERRUPTS", list[AgentInterrupt])
AGENT_USAGE: dex.Attribute[AgentUsage] = dex.Attribute("AGENT_USAGE", AgentUsage)
QUEUED_USER_MESSAGES: dex.Channel[AgentUserMessage] = dex.Channel("QUEUED_USER_MESSAGES", AgentUserMessage)
INTERRUPT_RESOLUTIONS: dex.ChannelMap[AgentInterruptResolution] = dex.ChannelMap(
    "INTERRUPT_RESOLUTIONS", AgentInterruptResolution
)
TOOL_CALL_RESULTS: dex.Channel[ToolCallCompleted] = dex.Channel("TOOL_CALL_RESULTS", ToolCallCompleted)
STEERED_USER_MESSAGES: dex.Channel[AgentUserMessage] = dex.Channel("STEERED_USER_MESSAGES", AgentUserMessage)
STEERED_MESSAGES: dex.Attribute[list[AgentUserMessage]] = dex.Attribute("STEERED_MESSAGES", list[AgentUserMessage])
SEEN_STEERED_MESSAGES: dex.Attribute[list[AgentUserMessage]] = dex.Attribute(
    "SEEN_STEERED_MESSAGES", list[AgentUserMessage]
)
TURN_CANCEL_REQUEST: dex.Attribute[TurnCancelRequest] = dex.Attribute("TURN_CANCEL_REQUEST", TurnCancelRequest)
TURNS_ENDED: dex.Attribute[int] = dex.Attribute("TURNS_ENDED", int)
"""How many of the session's turns have ended: ``turn-<n>`` has ended once it is at least ``n``.

Written with ``AGENT_STATE`` whenever the count changes, so a Client can wait for a turn's end
with one ``wait_for_attribute_match`` instead of reading the live events.
"""

AGENT_EVENTS_STREAM_NAME = "flow.agent_events"
"""The live event Stream's name (one Stream per Flow type)."""


def agent_events_stream(capacity_bytes: int) -> dex.Stream[AgentEvent]:
    """Return a new live event Stream definition for one Flow type."""
    return dex.Stream(AGENT_EVENTS_STREAM_NAME, AgentEvent, capacity_bytes)


def session_schema(events_stream: dex.Stream[AgentEvent]) -> dex.PersistenceSchema:
    """Return a session's Attributes and Channels (the table above) and its Flow type's ``events_stream``."""
    return dex.PersistenceSchema.of(
        AGENT_STATE,
        AGENT_MESSAGES,
        FRAMEWORK_RUN_STATE,
        FRAMEWORK_RUN_STATES,
        AGENT_TOOL_CALLS,
        PENDING_INTERRUPTS,
        AGENT_USAGE,
        AGENT_HISTORY_SUMMARIES,
        QUEUED_USER_MESSAGES,
        INTERRUPT_RESOLUTIONS,
        TOOL_CALL_RESULTS,
        STEERED_USER_MESSAGES,
        STEERED_MESSAGES,
        SEEN_STEERED_MESSAGES,
        TURN_CANCEL_REQUEST,
        TURNS_ENDED,
        events_stream,
    )
