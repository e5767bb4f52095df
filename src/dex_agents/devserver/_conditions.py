"""Condition matching: which of a waiting execution's conditions are met, as pure functions.

`match_conditions` reads a ``WaitingCondition`` (its type, Timers, Channel
conditions and combinations), which Timers are due and how many messages each
Channel holds, and returns the conditions that satisfy it, or nothing while it
still waits. Conditions that must hold together (``all_of``, a combination)
reserve their minimums jointly: two conditions on one Channel need the sum of
their minimums queued, and each takes its messages after leaving the later
ones' minimums. `condition_results` builds the ``ConditionResults`` the execute
method receives, taking each satisfied Channel condition's messages through
the given callback. Neither touches the engine, a clock or gRPC.
"""

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum

from dex.dexpb import dex_pb2 as pb

_COMPLETED = pb.CONDITION_STATUS_COMPLETED
_WAITING = pb.CONDITION_STATUS_WAITING


class ConditionKind(StrEnum):
    """The two kinds of condition a wait has."""

    TIMER = "timer"
    CHANNEL = "channel"


ConditionRef = tuple[ConditionKind, int]
"""A condition by kind and index in its list of the ``WaitingCondition``."""


def is_channel_ready(condition: pb.ChannelCondition, size: int) -> bool:
    """Whether a Channel condition holds with ``size`` messages queued (``at_most`` always does)."""
    if condition.HasField("at_least"):
        return size >= condition.at_least
    return condition.HasField("at_most") or size >= 1


def minimum_messages(condition: pb.ChannelCondition) -> int:
    """Messages a Channel condition needs queued: ``at_least``, none for ``at_most`` alone, else one."""
    if condition.HasField("at_least"):
        return condition.at_least
    return 0 if condition.HasField("at_most") else 1


def _jointly_ready(channels: Sequence[pb.ChannelCondition], channel_sizes: Mapping[str, int]) -> bool:
    needed: dict[str, int] = {}
    for condition in channels:
        needed[condition.channel_name] = needed.get(condition.channel_name, 0) + minimum_messages(condition)
    return all(channel_sizes.get(name, 0) >= count for name, count in needed.items())


def match_conditions(
    waiting: pb.WaitingCondition, timer_ready: Sequence[bool], channel_sizes: Mapping[str, int]
) -> frozenset[ConditionRef]:
    """Return the conditions that satisfy ``waiting`` now; empty while it still waits.

    ``timer_ready[i]`` says whether Timer ``i`` is due (or skipped);
    ``channel_sizes`` maps a Channel name to its queued messages (absent = 0).
    ``ANY_COMPLETED`` takes the first ready condition, Timers first;
    ``ANY_COMBINATION_COMPLETED`` the first combination whose members are all
    ready; otherwise every condition must be ready.
    """
    timers = list(waiting.timer_conditions)
    channels = list(waiting.channel_conditions)
    ready: list[tuple[ConditionKind, int, bool]] = [
        (ConditionKind.TIMER, i, timer_ready[i]) for i in range(len(timers))
    ] + [
        (ConditionKind.CHANNEL, i, is_channel_ready(c, channel_sizes.get(c.channel_name, 0)))
        for i, c in enumerate(channels)
    ]
    kind = waiting.waiting_condition_type
    if kind == pb.WAITING_CONDITION_TYPE_ANY_COMPLETED:
        return next((frozenset({(k, i)}) for k, i, r in ready if r), frozenset())
    if kind == pb.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED:
        by_id = {(timers[i] if k == ConditionKind.TIMER else channels[i]).condition_id: (k, i, r) for k, i, r in ready}
        for combination in waiting.condition_combinations:
            members = [by_id[c] for c in combination.condition_ids if c in by_id]
            joint = [channels[i] for k, i, _ in members if k == ConditionKind.CHANNEL]
            if members and all(r for _, _, r in members) and _jointly_ready(joint, channel_sizes):
                return frozenset((k, i) for k, i, _ in members)
        return frozenset()
    if all(r for _, _, r in ready) and _jointly_ready(channels, channel_sizes):
        return frozenset((k, i) for k, i, _ in ready)
    return frozenset()


def messages_to_take(condition: pb.ChannelCondition, queued: int, reserved: int = 0) -> int:
    """How many of ``queued`` messages a satisfied Channel condition consumes, leaving ``reserved``."""
    available = max(queued - reserved, 0)
    if condition.HasField("at_most"):
        return min(condition.at_most, available)
    if condition.HasField("at_least"):
        return available
    return min(1, available)


def condition_results(
    waiting: pb.WaitingCondition,
    selected: frozenset[ConditionRef],
    take: Callable[[pb.ChannelCondition, int], list[pb.Value]],
) -> pb.ConditionResults:
    """Return every condition's status; ``take`` consumes a selected Channel condition's messages.

    ``take`` gets the condition and how many messages to leave for the later selected
    conditions on the same Channel (their minimums).
    """
    channels = list(waiting.channel_conditions)
    chosen_channels = [i for i in range(len(channels)) if (ConditionKind.CHANNEL, i) in selected]
    results = pb.ConditionResults()
    for index, timer in enumerate(waiting.timer_conditions):
        results.timer_results.add(
            condition_id=timer.condition_id,
            condition_status=_COMPLETED if (ConditionKind.TIMER, index) in selected else _WAITING,
        )
    for index, condition in enumerate(waiting.channel_conditions):
        chosen = (ConditionKind.CHANNEL, index) in selected
        entry = results.channel_results.add(
            condition_id=condition.condition_id,
            channel_name=condition.channel_name,
            condition_status=_COMPLETED if chosen else _WAITING,
        )
        if chosen:
            reserved = sum(
                minimum_messages(channels[later])
                for later in chosen_channels
                if later > index and channels[later].channel_name == condition.channel_name
            )
            entry.values.extend(take(condition, reserved))
    return results
