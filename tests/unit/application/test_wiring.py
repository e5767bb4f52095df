"""Wiring: every use case's fields have, type by type, what the hosts give under their names."""

import importlib
import inspect
import pkgutil

import attrs

from dex_agents.application import rpcs, steps
from dex_agents.application.next import StepName
from dex_agents.application.ports import UserMessageQueue
from dex_agents.application.wiring import Wired, provided_types
from dex_agents.testing.memory import InMemorySessionHost


def _use_cases() -> list[type[Wired]]:
    for package in (steps, rpcs):
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
    found: list[type[Wired]] = []
    unseen: list[type[Wired]] = [Wired]
    while unseen:
        for subclass in unseen.pop().__subclasses__():
            if subclass.__module__.startswith("dex_agents.") and subclass not in found:
                found.append(subclass)
            unseen.append(subclass)
    return found


def _mismatches(use_case: type[Wired]) -> list[str]:
    """What ``wired`` would fill with a value of another type than the field's, or could not fill."""
    provided = provided_types()
    wrong: list[str] = []
    for field in attrs.fields(use_case):  # type: ignore[arg-type]  # a Wired subclass is an attrs class
        if field.name in provided:
            if field.type != provided[field.name]:
                wrong.append(f"{use_case.__name__}.{field.name}: {field.type!r}, given {provided[field.name]!r}")
        elif not (isinstance(field.type, type) and issubclass(field.type, Wired)):
            wrong.append(f"{use_case.__name__}.{field.name}: no host gives it")
    return wrong


def test_every_use_case_field_has_the_type_the_hosts_give_under_its_name() -> None:
    use_cases = _use_cases()
    assert len(use_cases) > 15  # every Step and RPC was found
    assert [wrong for use_case in use_cases for wrong in _mismatches(use_case)] == []


def test_a_field_typed_as_the_other_queue_is_a_mismatch() -> None:
    @attrs.frozen(kw_only=True)
    class TakesTheWrongQueue(Wired):
        steering: UserMessageQueue

    assert _mismatches(TakesTheWrongQueue) == [
        f"TakesTheWrongQueue.steering: {UserMessageQueue!r}, given {provided_types()['steering']!r}"
    ]


def test_the_in_memory_host_builds_every_use_case() -> None:
    host = InMemorySessionHost()
    events = host.writer(host.step_call(StepName.RUN_MODEL))
    for use_case in _use_cases():
        if inspect.isabstract(use_case):
            continue
        built = use_case.wired(host.ports, host.agent, events=events, heartbeat=host.heartbeat)
        assert isinstance(built, use_case)
