"""The run state is a chain of ``FRAMEWORK_RUN_STATES`` parts; the layouts of earlier versions are read and replaced.

The fake context stores values by their physical key, like the SDK's Context: ``NAME`` or ``NAME/instance``,
and lists a map's instances only when the whole map was loaded.
"""

import random
from typing import Any, cast

import dex
import pytest

from dex_agents.infrastructure.dex.persistence import FRAMEWORK_RUN_STATE, FRAMEWORK_RUN_STATES, RUN_STATE_KEY
from dex_agents.infrastructure.dex.run_state_parts import part_key
from dex_agents.infrastructure.dex.stores import DexRunStateStore

PREFIX = f"{FRAMEWORK_RUN_STATES.name}/"
CURRENT = f"{PREFIX}{RUN_STATE_KEY}"
LEGACY = FRAMEWORK_RUN_STATE.name


def part(number: int) -> str:
    return PREFIX + part_key(number)


class FakeContext:
    """What `Attribute` and `AttributeMap` ask of a Context: get (default ``""``), set, delete, list a loaded map."""

    def __init__(self, stored: dict[str, str], *, map_loaded: bool = True) -> None:
        self.stored = dict(stored)
        self.map_loaded = map_loaded

    @staticmethod
    def _key(definition: Any, instance: str | None) -> str:
        return definition.name if instance is None else f"{definition.name}/{instance}"

    def _get_attribute(self, definition: Any, instance: str | None) -> str:
        return self.stored.get(self._key(definition, instance), "")

    def _set_attribute(self, definition: Any, instance: str | None, value: str) -> None:
        self.stored[self._key(definition, instance)] = value

    def _delete_attribute(self, definition: Any, instance: str | None) -> None:
        self.stored.pop(self._key(definition, instance), None)

    def _attribute_map_keys(self, definition: Any) -> tuple[str, ...]:
        if not self.map_loaded:
            raise dex.AttributeMapNotLoadedError(f"all AttributeMap instances were not loaded: {definition.name}")
        prefix = f"{definition.name}/"
        return tuple(sorted(key[len(prefix) :] for key in self.stored if key.startswith(prefix)))


def store(context: FakeContext) -> DexRunStateStore:
    return DexRunStateStore(cast(dex.Context, context))


def turn_states(calls: int) -> list[str]:
    """Run states shaped like a turn's: a growing message list, then a tail that changes every time."""
    messages: list[str] = []
    states = []
    for n in range(calls):
        messages.append(f'{{"kind":"response","call":"call-{n}","args":{{"n":{n}}}}}')
        messages.append(f'{{"kind":"request","return":"result {n}"}}')
        states.append(f'{{"messages":[{",".join(messages)}],"tool_call_ids":["call-{n}"],"usage":{{"requests":{n}}}}}')
    return states


def test_a_first_write_stores_the_whole_state_as_part_zero_and_reads_it_back() -> None:
    context = FakeContext({})

    store(context).set("state-1")

    assert context.stored == {part(0): "0:state-1"}
    assert store(context).get() == "state-1"


def test_each_later_write_of_a_turn_stores_only_what_changed_and_every_state_reads_back_exactly() -> None:
    context = FakeContext({})
    states = turn_states(12)

    for number, state in enumerate(states):
        store(context).set(state)
        assert store(context).get() == state
        assert sorted(context.stored) == [part(n) for n in range(number + 1)]

    later_parts = [value for key, value in context.stored.items() if key != part(0)]
    # Every part after the first holds one call's messages and the tail, not the turn so far.
    assert max(len(value) for value in later_parts) < 200 < len(states[-1])


def test_a_state_sharing_nothing_with_the_last_one_starts_a_new_chain() -> None:
    context = FakeContext({})
    for state in turn_states(4):
        store(context).set(state)

    store(context).set("a compacted state")

    assert context.stored == {part(0): "0:a compacted state"}
    assert store(context).get() == "a compacted state"


def test_storing_the_same_state_again_writes_nothing() -> None:
    context = FakeContext({})
    first, second = turn_states(2)
    store(context).set(first)
    store(context).set(second)
    before = dict(context.stored)

    store(context).set(second)

    assert context.stored == before


def test_a_read_then_a_write_in_one_call_and_a_second_write_see_the_staged_parts() -> None:
    context = FakeContext({})
    states = turn_states(3)
    one_call = store(context)

    assert one_call.get() is None
    one_call.set(states[0])
    one_call.set(states[1])
    assert one_call.get() == states[1]
    one_call.set(states[2])

    assert store(context).get() == states[2]
    assert sorted(context.stored) == [part(0), part(1), part(2)]


def test_a_run_state_an_earlier_version_stored_in_the_plain_attribute_is_read() -> None:
    context = FakeContext({LEGACY: "legacy"})

    assert store(context).get() == "legacy"


def test_a_run_state_an_earlier_version_stored_whole_in_instance_current_is_read() -> None:
    context = FakeContext({CURRENT: "whole"})

    assert store(context).get() == "whole"


@pytest.mark.parametrize("stored", [{LEGACY: "legacy"}, {CURRENT: "whole"}, {LEGACY: "legacy", CURRENT: "whole"}])
def test_the_next_write_replaces_an_earlier_layout_with_a_chain(stored: dict[str, str]) -> None:
    context = FakeContext(stored)

    store(context).set("whole and more")

    assert context.stored == {part(0): "0:whole and more"}
    assert store(context).get() == "whole and more"


def test_clearing_the_run_state_deletes_every_part_and_every_earlier_layout() -> None:
    context = FakeContext({LEGACY: "legacy", CURRENT: "whole"})
    for state in turn_states(3):
        store(context).set(state)

    store(context).set(None)

    assert context.stored == {}
    assert store(context).get() is None


def test_a_call_that_did_not_load_the_map_cannot_read_or_write_the_run_state() -> None:
    context = FakeContext({part(0): "0:state"}, map_loaded=False)

    with pytest.raises(dex.AttributeMapNotLoadedError):
        store(context).get()
    with pytest.raises(dex.AttributeMapNotLoadedError):
        store(context).set(None)


def test_random_edits_of_a_state_always_read_back_exactly() -> None:
    rng = random.Random(7)
    context = FakeContext({})
    state = ""
    for _ in range(300):
        cut = rng.randint(max(0, len(state) - 40), len(state))
        state = state[:cut] + "".join(rng.choice("ab{}[],:") for _ in range(rng.randint(0, 60)))
        store(context).set(state)
        assert store(context).get() == (state or None)


def test_a_corrupt_part_fails_the_read_loudly_and_the_turn_s_end_still_clears_every_part() -> None:
    context = FakeContext({part(0): "0:state", part(1): "not a part"})

    with pytest.raises(ValueError, match="not a run state part"):
        store(context).get()
    store(context).set(None)  # a failure route clears without reading the parts

    assert context.stored == {}
