"""Ending a cancelled turn, handing back steered messages no model call saw, and storing those one saw."""

from dex_agents.application.event_writer import AgentEventWriter
from dex_agents.application.next import GoTo, Next, StepName
from dex_agents.application.ports import (
    MessageLog,
    RunStateStore,
    SessionStateStore,
    SteeredMessageStore,
    ToolCallStore,
    UserMessageQueue,
)
from dex_agents.application.runner import AgentFrameworkRunner
from dex_agents.domain import events as ev
from dex_agents.domain.messages import AgentMessage
from dex_agents.domain.session import AgentState
from dex_agents.domain.turn_control import TurnCancelRequest, build_turn_cancelled_note
from dex_agents.domain.turns import validate_user_message


def hand_back_steered(steered: SteeredMessageStore, steering: UserMessageQueue) -> None:
    """Put the steered messages the turn took back on the steering queue: no model call saw them.

    ``AwaitUserMessage`` takes steered messages before queued ones, so they
    start the next turn, in the order they were sent.
    """
    for message in steered.get():
        steering.publish(message)
    steered.set(())


def store_seen_steered(
    state: AgentState,
    *,
    runner: AgentFrameworkRunner,
    messages: MessageLog,
    steered: SteeredMessageStore,
) -> AgentState:
    """Store the steered messages a model call of the ending turn saw, in the order they were sent.

    Only the run state held them (a completed turn's runner stores them with
    its messages); a turn that fails or is cancelled stores them here, before
    its note, so a message the user sent is never lost and the next turn's
    model reads it. A runner that cannot build one does not stop the turn's
    end: that message is left out. Returns the state with them stored.
    """
    seen = steered.seen()
    if not seen:
        return state
    turn_id = state.active_turn_id
    assert turn_id is not None
    stored: list[AgentMessage] = []
    for user_message in seen:
        try:
            built = runner.build_user_message(user_message.text)
            validate_user_message(built)
        except Exception:  # noqa: BLE001 - a runner bug must not keep the turn from ending
            continue
        stored.append(AgentMessage.stored(built, sequence=state.next_sequence + len(stored), turn_id=turn_id))
    for message in stored:
        messages.append(message)
    steered.set_seen(())
    return state.with_messages_stored(stored)


def end_cancelled_turn(
    state: AgentState,
    request: TurnCancelRequest,
    *,
    runner: AgentFrameworkRunner,
    state_store: SessionStateStore,
    messages: MessageLog,
    run_state: RunStateStore,
    tool_calls: ToolCallStore,
    steered: SteeredMessageStore,
    steering: UserMessageQueue,
    events: AgentEventWriter,
) -> Next:
    """End the active turn as cancelled, before any further model call; ``AwaitUserMessage`` next.

    Stores the steered messages a model call of the turn saw (`store_seen_steered`), then one note
    (built by the runner, carrying the final records' outcomes)
    saying the turn was cancelled and which tool calls finished, clears the
    turn's records and run state, hands back steered messages no model call saw,
    and writes ``turn_cancelled``. Called only when every record is final (at a
    model-call boundary), so no approval of the turn is pending. A runner that
    cannot build the note does not stop the cancel: the turn ends without it.
    """
    turn_id = state.active_turn_id
    assert turn_id is not None
    records = tool_calls.all()
    final = sorted((r for r in records if r.is_final), key=lambda r: r.deferral_order)
    note = build_turn_cancelled_note(request.reason, records)
    state = store_seen_steered(state, runner=runner, messages=messages, steered=steered)
    try:
        message = runner.build_user_message(note)
        validate_user_message(message)
    except Exception:  # noqa: BLE001 - a runner bug must not keep a cancelled turn running
        pass
    else:
        stored = AgentMessage.stored(
            message, sequence=state.next_sequence, turn_id=turn_id, tool_outcomes=(r.outcome() for r in final)
        )
        messages.append(stored)
        state = state.with_messages_stored([stored])
    hand_back_steered(steered, steering)
    state_store.set(state.cancel_turn())
    for record in records:
        tool_calls.delete(record.tool_call_id)
    run_state.set(None)
    events.write(ev.turn_cancelled(request.reason, finished_tool_calls=len(final)))
    return GoTo(step=StepName.AWAIT_USER_MESSAGE)
