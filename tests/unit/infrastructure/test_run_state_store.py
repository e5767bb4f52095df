"""The run state is one ``FRAMEWORK_RUN_STATES`` instance; an earlier version's plain Attribute value is read.

The fake context stores values by their physical key, like the SDK's Context: ``NAME`` or ``NAME/instance``.
"""

from typing import Any, cast

import dex

from dex_agents.infrastructure.dex.persistence import FRAMEWORK_RUN_STATE, FRAMEWORK_RUN_STATES, RUN_STATE_KEY
from dex_agents.infrastructure.dex.stores import DexRunStateStore

CURRENT = f"{FRAMEWORK_RUN_STATES.name}/{RUN_STATE_KEY}"


class FakeContext:
    """What `Attribute` and `AttributeMap` ask of a Context: get (default ``""``), set, delete."""

    def __init__(self, stored: dict[str, str]) -> None:
        self.stored = dict(stored)
        self.deleted: list[str] = []

    @staticmethod
    def _key(definition: Any, instance: str | None) -> str:
        return definition.name if instance is None else f"{definition.name}/{instance}"

    def _get_attribute(self, definition: Any, instance: str | None) -> str:
        return self.stored.get(self._key(definition, instance), "")

    def _set_attribute(self, definition: Any, instance: str | None, value: str) -> None:
        self.stored[self._key(definition, instance)] = value

    def _delete_attribute(self, definition: Any, instance: str | None) -> None:
        key = self._key(definition, instance)
        self.stored.pop(key, None)
        self.deleted.append(key)


def store(context: FakeContext) -> DexRunStateStore:
    return DexRunStateStore(cast(dex.Context, context))


def test_the_run_state_is_written_to_and_read_from_its_map_instance() -> None:
    context = FakeContext({})

    store(context).set("state-1")

    assert context.stored == {CURRENT: "state-1"}
    assert store(context).get() == "state-1"


def test_a_run_state_an_earlier_version_stored_in_the_plain_attribute_is_read() -> None:
    context = FakeContext({FRAMEWORK_RUN_STATE.name: "legacy"})

    assert store(context).get() == "legacy"


def test_the_next_write_moves_a_legacy_run_state_to_the_map_and_clears_the_attribute() -> None:
    context = FakeContext({FRAMEWORK_RUN_STATE.name: "legacy"})

    store(context).set("state-2")

    assert context.stored == {CURRENT: "state-2"}
    assert store(context).get() == "state-2"


def test_clearing_the_run_state_clears_both_places() -> None:
    context = FakeContext({FRAMEWORK_RUN_STATE.name: "legacy", CURRENT: "state-3"})

    store(context).set(None)

    assert context.stored == {}
    assert store(context).get() is None
