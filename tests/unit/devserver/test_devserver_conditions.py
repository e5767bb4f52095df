"""The dev server's condition matching, as pure functions: no server, no gRPC, no clock."""

from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._conditions import (
    ConditionKind,
    condition_results,
    match_conditions,
    messages_to_take,
)

TIMER = ConditionKind.TIMER
CHANNEL = ConditionKind.CHANNEL


def _wait(
    kind: int,
    *,
    timers: int = 0,
    channels: tuple[pb.ChannelCondition, ...] = (),
    combinations: tuple[tuple[str, ...], ...] = (),
) -> pb.WaitingCondition:
    return pb.WaitingCondition(
        waiting_condition_type=kind,  # type: ignore[arg-type]
        timer_conditions=[pb.TimerCondition(condition_id=f"t{i}", duration_seconds=1) for i in range(timers)],
        channel_conditions=list(channels),
        condition_combinations=[pb.ConditionCombination(condition_ids=list(ids)) for ids in combinations],
    )


def _channel(name: str, **bounds: int) -> pb.ChannelCondition:
    return pb.ChannelCondition(condition_id=name, channel_name=name, **bounds)


def test_any_completed_takes_the_first_ready_condition_timers_first() -> None:
    waiting = _wait(pb.WAITING_CONDITION_TYPE_ANY_COMPLETED, timers=1, channels=(_channel("inbox"),))

    assert match_conditions(waiting, [True], {"inbox": 3}) == {(TIMER, 0)}
    assert match_conditions(waiting, [False], {"inbox": 3}) == {(CHANNEL, 0)}
    assert match_conditions(waiting, [False], {}) == frozenset()


def test_all_completed_waits_until_every_condition_is_ready() -> None:
    waiting = _wait(
        pb.WAITING_CONDITION_TYPE_ALL_COMPLETED, timers=1, channels=(_channel("a"), _channel("b", at_least=2))
    )

    assert match_conditions(waiting, [True], {"a": 1, "b": 1}) == frozenset()
    assert match_conditions(waiting, [True], {"a": 1, "b": 2}) == {(TIMER, 0), (CHANNEL, 0), (CHANNEL, 1)}


def test_a_combination_is_met_only_when_all_its_members_are_ready() -> None:
    waiting = _wait(
        pb.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED,
        timers=1,
        channels=(_channel("a"), _channel("b")),
        combinations=(("t0", "a"), ("a", "b")),
    )

    assert match_conditions(waiting, [False], {"a": 1}) == frozenset()
    assert match_conditions(waiting, [False], {"a": 1, "b": 1}) == {(CHANNEL, 0), (CHANNEL, 1)}
    assert match_conditions(waiting, [True], {"a": 1, "b": 1}) == {(TIMER, 0), (CHANNEL, 0)}


def test_an_at_most_channel_condition_is_ready_even_when_empty() -> None:
    waiting = _wait(pb.WAITING_CONDITION_TYPE_ALL_COMPLETED, channels=(_channel("batch", at_most=5),))

    assert match_conditions(waiting, [], {}) == {(CHANNEL, 0)}


def test_a_satisfied_channel_condition_takes_one_all_or_at_most_its_bound() -> None:
    assert messages_to_take(_channel("c"), 4) == 1
    assert messages_to_take(_channel("c"), 0) == 0
    assert messages_to_take(_channel("c", at_least=2), 4) == 4
    assert messages_to_take(_channel("c", at_most=3), 5) == 3
    assert messages_to_take(_channel("c", at_most=3), 1) == 1


def test_results_report_every_condition_and_carry_the_taken_values_of_the_selected_channels() -> None:
    waiting = _wait(pb.WAITING_CONDITION_TYPE_ANY_COMPLETED, timers=1, channels=(_channel("a"), _channel("b")))
    taken: list[str] = []

    def take(condition: pb.ChannelCondition, reserved: int) -> list[pb.Value]:
        taken.append(condition.channel_name)
        return [pb.Value(string_value="hello")]

    results = condition_results(waiting, frozenset({(CHANNEL, 1)}), take)

    assert taken == ["b"]
    assert [r.condition_status for r in results.timer_results] == [pb.CONDITION_STATUS_WAITING]
    assert [(r.channel_name, r.condition_status) for r in results.channel_results] == [
        ("a", pb.CONDITION_STATUS_WAITING),
        ("b", pb.CONDITION_STATUS_COMPLETED),
    ]
    assert [v.string_value for v in results.channel_results[1].values] == ["hello"]


def _on(name: str, condition_id: str, **bounds: int) -> pb.ChannelCondition:
    return pb.ChannelCondition(condition_id=condition_id, channel_name=name, **bounds)


def test_all_of_two_conditions_on_one_channel_reserves_their_minimums_jointly() -> None:
    waiting = _wait(
        pb.WAITING_CONDITION_TYPE_ALL_COMPLETED, channels=(_on("c", "x", at_least=2), _on("c", "y", at_least=1))
    )
    assert match_conditions(waiting, [], {"c": 2}) == frozenset()
    assert match_conditions(waiting, [], {"c": 3}) == {(CHANNEL, 0), (CHANNEL, 1)}


def test_a_combination_on_one_channel_reserves_its_minimums_jointly() -> None:
    waiting = _wait(
        pb.WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED,
        channels=(_on("c", "x"), _on("c", "y")),
        combinations=(("x", "y"),),
    )
    assert match_conditions(waiting, [], {"c": 1}) == frozenset()
    assert match_conditions(waiting, [], {"c": 2}) == {(CHANNEL, 0), (CHANNEL, 1)}


def test_the_first_of_two_conditions_on_one_channel_leaves_the_second_its_minimum() -> None:
    waiting = _wait(
        pb.WAITING_CONDITION_TYPE_ALL_COMPLETED, channels=(_on("c", "x", at_least=1), _on("c", "y", at_least=2))
    )
    queue = [pb.Value(string_value=str(i)) for i in range(5)]

    def take(condition: pb.ChannelCondition, reserved: int) -> list[pb.Value]:
        count = messages_to_take(condition, len(queue), reserved)
        taken, queue[:] = queue[:count], queue[count:]
        return taken

    results = condition_results(waiting, frozenset({(CHANNEL, 0), (CHANNEL, 1)}), take)
    assert [[v.string_value for v in r.values] for r in results.channel_results] == [["0", "1", "2"], ["3", "4"]]
