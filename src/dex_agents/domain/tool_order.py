"""The order in which one model response's tool calls start: waves around sequential calls.

A ``sequential`` call runs alone. The calls of a response split, in model
order, into waves: each sequential call is a wave of its own, and the calls
between two sequential calls form one wave, whose calls run in parallel.
A wave starts once every call of the waves before it has ended (its record
is final), so a sequential call starts after the calls before it ended, and
the calls after it start once it ended. This is Pydantic AI's barrier rule
for ``sequential=True`` tools.

A response without sequential calls is one wave: every call starts at once.
The calls of later waves are stored ``queued`` and `release` starts them.
What "ended" means is a final record: a call that failed, was rejected,
expired or was cancelled ends its wave's part as well as one that succeeded.
A call that needs approval asks for it when its wave starts, so the
approver of a later call sees what the earlier ones did.
"""

from collections.abc import Sequence

import attrs

from dex_agents.domain.interrupts import interrupt_id_for
from dex_agents.domain.tools import AgentToolCall, ToolCallStatus, is_approval_required, transition


def first_wave_size(sequential: Sequence[bool]) -> int:
    """Return how many of the calls (their ``sequential`` flags, in model order) start first.

    One when the first call is sequential; else every call up to the first sequential one.
    """
    if not sequential:
        return 0
    if sequential[0]:
        return 1
    return next((index for index, flag in enumerate(sequential) if flag), len(sequential))


def next_wave(records: Sequence[AgentToolCall]) -> tuple[AgentToolCall, ...]:
    """Return the ``queued`` records of a turn that start next, in model order (empty when none waits)."""
    queued = sorted((r for r in records if r.status is ToolCallStatus.QUEUED), key=lambda r: r.deferral_order)
    return tuple(queued[: first_wave_size([r.sequential for r in queued])])


def release(record: AgentToolCall) -> AgentToolCall:
    """Return a ``queued`` record started: ``awaiting_approval``, ``awaiting_result`` or ``pending``.

    ``awaiting_approval`` (with its interrupt ID) when it needs approval, ``awaiting_result``
    for an external call.

    Raises:
        InvalidTransitionError: the record is not ``queued``.
    """
    if is_approval_required(record.policy):
        waiting = transition(record, to=ToolCallStatus.AWAITING_APPROVAL)
        return attrs.evolve(waiting, interrupt_id=interrupt_id_for(record.turn_id, record.tool_call_id))
    if record.has_external_result:
        return transition(record, to=ToolCallStatus.AWAITING_RESULT)
    return transition(record, to=ToolCallStatus.PENDING)
