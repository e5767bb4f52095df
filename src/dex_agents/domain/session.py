"""Session state, turns and their status transitions.

A session waits for a user message, runs the model, may run tools, runs the
model again, and so on until the turn completes or fails; then it waits again.

| action (`SessionAction`) | from                               | to                         |
|--------------------------|------------------------------------|----------------------------|
| `start_turn`             | `waiting_for_user_message`         | `running_model`            |
| `wait_for_tools`         | `running_model`                    | `running_tools`            |
| `resume_model`           | `running_tools`                    | `running_model`            |
| `complete_turn`          | `running_model`                    | `waiting_for_user_message` |
| `fail_turn`              | `running_model`, `running_tools`   | `waiting_for_user_message` |
| `cancel_turn`            | `running_model`, `running_tools`   | `waiting_for_user_message` |

Each action is checked against its own sources (`SESSION_ACTIONS`), so a
turn cannot start while one runs even though `running_tools` may move to
`running_model`; `AGENT_STATUS_TRANSITIONS` is their union of status pairs.

Turn IDs are ``turn-<n>``, counted from 1. ``last_turn_error`` stays until a
later turn completes. ``last_turn_cancelled`` says the last turn ended by
`cancel_turn` (a person asked); a later turn's end clears it.
"""

from collections.abc import Iterable, Mapping
from enum import StrEnum

import attrs

from dex_agents.domain.errors import InvalidTransitionError
from dex_agents.domain.history import HistorySummary, ModelWindow
from dex_agents.domain.messages import LARGE_MESSAGE_BYTES, MIN_STORED_BYTES, AgentMessage, stored_size


class AgentStatus(StrEnum):
    """What a session is doing."""

    WAITING_FOR_USER_MESSAGE = "waiting_for_user_message"
    RUNNING_MODEL = "running_model"
    RUNNING_TOOLS = "running_tools"


class SessionAction(StrEnum):
    """The named changes of a session's status; each is legal only from its own statuses."""

    START_TURN = "start_turn"
    WAIT_FOR_TOOLS = "wait_for_tools"
    RESUME_MODEL = "resume_model"
    COMPLETE_TURN = "complete_turn"
    FAIL_TURN = "fail_turn"
    CANCEL_TURN = "cancel_turn"


SESSION_ACTIONS: Mapping[SessionAction, tuple[frozenset[AgentStatus], AgentStatus]] = {
    SessionAction.START_TURN: (frozenset({AgentStatus.WAITING_FOR_USER_MESSAGE}), AgentStatus.RUNNING_MODEL),
    SessionAction.WAIT_FOR_TOOLS: (frozenset({AgentStatus.RUNNING_MODEL}), AgentStatus.RUNNING_TOOLS),
    SessionAction.RESUME_MODEL: (frozenset({AgentStatus.RUNNING_TOOLS}), AgentStatus.RUNNING_MODEL),
    SessionAction.COMPLETE_TURN: (frozenset({AgentStatus.RUNNING_MODEL}), AgentStatus.WAITING_FOR_USER_MESSAGE),
    SessionAction.FAIL_TURN: (
        frozenset({AgentStatus.RUNNING_MODEL, AgentStatus.RUNNING_TOOLS}),
        AgentStatus.WAITING_FOR_USER_MESSAGE,
    ),
    SessionAction.CANCEL_TURN: (
        frozenset({AgentStatus.RUNNING_MODEL, AgentStatus.RUNNING_TOOLS}),
        AgentStatus.WAITING_FOR_USER_MESSAGE,
    ),
}
"""Each action: the statuses it may start from, and the status it leads to."""

AGENT_STATUS_TRANSITIONS: Mapping[AgentStatus, frozenset[AgentStatus]] = {
    status: frozenset(to for sources, to in SESSION_ACTIONS.values() if status in sources) for status in AgentStatus
}
"""Legal status changes of a session (the union of `SESSION_ACTIONS`)."""


def turn_id_for(turn_number: int) -> str:
    """Return the ID of turn ``turn_number`` (from 1): ``turn-<n>``."""
    if turn_number < 1:
        raise ValueError(f"turn numbers start at 1, got {turn_number!r}")
    return f"turn-{turn_number}"


def size_pairs(value: Iterable[Iterable[int]]) -> tuple[tuple[int, int], ...]:
    """Return ``(sequence, bytes)`` pairs as a tuple of int pairs (a converter for decoded JSON lists)."""
    return tuple((int(a), int(b)) for a, b in value)


def turn_number(turn_id: str) -> int:
    """Return ``n`` of a turn ID ``turn-<n>``.

    Raises:
        ValueError: ``turn_id`` is not a turn ID.
    """
    number = turn_id.removeprefix("turn-")
    if number == turn_id or not number.isdigit() or int(number) < 1:
        raise ValueError(f"not a turn ID (turn-<n>, n from 1): {turn_id!r}")
    return int(number)


def turn_number_or_zero(turn_id: str | None) -> int:
    """Return ``n`` of ``turn-<n>`` (`turn_number`), 0 for ``None`` or anything else."""
    if turn_id is None:
        return 0
    try:
        return turn_number(turn_id)
    except ValueError:
        return 0


@attrs.frozen(kw_only=True)
class AgentState:
    """The session's durable state (Attribute ``AGENT_STATE``)."""

    status: AgentStatus = AgentStatus.WAITING_FOR_USER_MESSAGE
    """What the session is doing."""
    turn_count: int = 0
    """Turns started so far."""
    active_turn_id: str | None = None
    """The running turn, or ``None`` while waiting for a user message."""
    message_count: int = 0
    """Messages stored so far; the next message gets sequence ``message_count + 1``."""
    last_turn_error: str | None = None
    """Why the last failed turn failed; cleared when a later turn completes."""
    large_messages: tuple[tuple[int, int], ...] = attrs.field(default=(), converter=size_pairs)
    """``(sequence, estimated bytes)`` of each stored message over 8 KiB, in order.

    Every other message takes at most 8 KiB, so a reader can choose how many
    messages to load in one call without loading any first.
    """
    summary_count: int = 0
    """Compactions so far; the current summary is number ``summary_count`` (none at 0)."""
    summarized_through: int = 0
    """The current summary covers messages ``1..summarized_through``; the model reads the ones after."""
    window_bytes: int = 0
    """Estimated stored bytes of the messages after ``summarized_through`` (the model's window)."""
    summary_bytes: int = 0
    """Estimated stored bytes of the current summary."""
    retry_after_overflow: bool = False
    """The provider refused the model call's context and the history was compacted for it: one retry is left."""

    last_turn_cancelled: bool = False
    """Whether the last finished turn was cancelled (`cancel_turn`); a later turn's end clears it."""
    turn_traceparent: str | None = None
    """The running turn's trace context as a W3C ``traceparent``, when sessions are traced; ``None`` otherwise.

    Stored with the turn so every Step of it, on any Worker and in any attempt, joins the turn's one trace.
    """
    resumed_by_call: bool = False
    """Whether the model runs next because a response's one call resumed the turn (`resume_model` ``by_call``).

    That call's Step saw the steered messages as they were when it started, so the model Step takes the ones
    waiting now first (through ``ResumeTurn``, which clears this), once per such boundary.
    """

    @property
    def next_sequence(self) -> int:
        """The sequence of the next stored message."""
        return self.message_count + 1

    def model_window(self) -> ModelWindow:
        """Return what a model call reads now: the current summary and the messages after its range."""
        return ModelWindow(
            first_sequence=self.summarized_through + 1,
            last_sequence=self.message_count,
            summary_number=self.summary_count or None,
        )

    @property
    def context_bytes(self) -> int:
        """Estimated stored bytes a model call reads: the window and the summary.

        A message is never estimated under `MIN_STORED_BYTES`, so a state
        stored before windows were tracked (``window_bytes`` 0) still counts.
        """
        floor = MIN_STORED_BYTES * max(0, self.message_count - self.summarized_through)
        return max(self.window_bytes, floor) + self.summary_bytes

    def with_history_compacted(self, summary: HistorySummary, *, covered_bytes: int) -> "AgentState":
        """Return the state after compaction ``summary.number`` covered messages through ``summary.through_sequence``.

        Raises:
            ValueError: the summary is not the next one, or covers nothing new.
        """
        if summary.number != self.summary_count + 1:
            raise ValueError(f"compaction {summary.number} is not the next one after {self.summary_count}")
        if not self.summarized_through < summary.through_sequence <= self.message_count:
            raise ValueError(
                f"compaction through {summary.through_sequence} must cover messages after {self.summarized_through}"
                f" and at most {self.message_count}"
            )
        return attrs.evolve(
            self,
            summary_count=summary.number,
            summarized_through=summary.through_sequence,
            window_bytes=max(0, self.window_bytes - covered_bytes),
            summary_bytes=summary.size,
        )

    def start_turn(self) -> "AgentState":
        """Return the state with a new turn running the model."""
        number = self.turn_count + 1
        return attrs.evolve(
            self,
            status=self._moved_to(SessionAction.START_TURN),
            turn_count=number,
            active_turn_id=turn_id_for(number),
            retry_after_overflow=False,
            turn_traceparent=None,
        )

    def wait_for_tools(self) -> "AgentState":
        """Return the state once the model asked for tools."""
        return attrs.evolve(self, status=self._moved_to(SessionAction.WAIT_FOR_TOOLS), resumed_by_call=False)

    def resume_model(self, *, by_call: bool = False) -> "AgentState":
        """Return the state once every tool result is in (``by_call``: the Step of the response's one call did it)."""
        return attrs.evolve(self, status=self._moved_to(SessionAction.RESUME_MODEL), resumed_by_call=by_call)

    def with_steering_taken(self) -> "AgentState":
        """Return the state once the boundary after a call that resumed the turn took its steered messages."""
        return attrs.evolve(self, resumed_by_call=False)

    def complete_turn(self) -> "AgentState":
        """Return the state after the active turn completed."""
        return self._turn_ended(SessionAction.COMPLETE_TURN)

    def fail_turn(self, error: str) -> "AgentState":
        """Return the state after the active turn failed with ``error``."""
        return self._turn_ended(SessionAction.FAIL_TURN, error=error)

    def cancel_turn(self) -> "AgentState":
        """Return the state after the active turn was cancelled at a person's request."""
        return self._turn_ended(SessionAction.CANCEL_TURN, cancelled=True)

    def with_messages_stored(self, messages: Iterable[AgentMessage]) -> "AgentState":
        """Return the state after ``messages`` were stored at the next sequences, large ones indexed."""
        stored = tuple(messages)
        sizes = [(message.sequence, stored_size(message)) for message in stored]
        large = [(sequence, size) for sequence, size in sizes if size > LARGE_MESSAGE_BYTES]
        appended = attrs.evolve(
            self.with_messages_appended(len(stored)), window_bytes=self.window_bytes + sum(s for _, s in sizes)
        )
        if not large:
            return appended
        return attrs.evolve(appended, large_messages=(*self.large_messages, *large))

    def with_messages_appended(self, count: int) -> "AgentState":
        """Return the state after ``count`` more messages were stored."""
        if count < 0:
            raise ValueError(f"cannot append {count!r} messages")
        return attrs.evolve(self, message_count=self.message_count + count)

    def _turn_ended(self, action: SessionAction, *, error: str | None = None, cancelled: bool = False) -> "AgentState":
        """Return the state after ``action`` ended the active turn, recording how (``last_turn_*``)."""
        return attrs.evolve(
            self,
            status=self._moved_to(action),
            active_turn_id=None,
            last_turn_error=error,
            last_turn_cancelled=cancelled,
            turn_traceparent=None,
            resumed_by_call=False,
        )

    def _moved_to(self, action: SessionAction) -> AgentStatus:
        """The status ``action`` moves the session to (the caller makes one copy with it: every Step makes one)."""
        sources, to = SESSION_ACTIONS[action]
        if self.status not in sources:
            name = action.value.replace("_", " ")
            moves = f"from {self.status.value!r} to {to.value!r}"
            raise InvalidTransitionError(f"session cannot {name}: it would go {moves}")
        return to
