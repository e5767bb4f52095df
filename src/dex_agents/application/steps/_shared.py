"""Pieces several Step use cases share."""

from dex_agents.application.events import AgentEventWriter
from dex_agents.application.ports import MessageLog, SessionStateStore, ToolCallStore, ToolResultPublisher
from dex_agents.application.runner import AgentFrameworkRunner
from dex_agents.domain import events as ev
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.tools import AgentToolCall, ToolCallCompleted
from dex_agents.domain.turns import validate_user_message


def begin_turn(
    text: str,
    *,
    state: AgentState,
    runner: AgentFrameworkRunner,
    state_store: SessionStateStore,
    messages: MessageLog,
    events: AgentEventWriter,
    client_message_id: str | None = None,
) -> None:
    """Store ``text`` as a new turn's user message (with the application's ID for it) and mark the turn running."""
    user_message = runner.build_user_message(text)
    validate_user_message(user_message)
    started = state.start_turn()
    assert started.active_turn_id is not None
    sequence = started.next_sequence
    messages.append(
        AgentMessage.stored(
            user_message, sequence=sequence, turn_id=started.active_turn_id, client_message_id=client_message_id
        )
    )
    state_store.set(started.with_messages_appended(1))
    events.write(ev.turn_started(sequence), turn_id=started.active_turn_id)


def finish_tool_call(
    record: AgentToolCall,
    *,
    tool_calls: ToolCallStore,
    results: ToolResultPublisher,
    events: AgentEventWriter,
) -> None:
    """Store a record that just became final and publish its one result."""
    assert record.is_final
    tool_calls.put(record)
    results.publish(ToolCallCompleted(tool_call_id=record.tool_call_id, turn_id=record.turn_id, status=record.status))
    events.write(ev.tool_call_finished(record.tool_call_id, record.tool_name, record.status))
