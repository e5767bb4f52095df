"""Dex `StepOptions` for every Step and the decorator of every RPC, derived from their declarations.

Everything here is read off `dex_agents.application.declarations`: a Step's
retries, timeouts and failure route (its `StepPolicy`), its locks, and its
loads (`dex_loads` maps a declared `Load`, resolved for a movement, onto whole
AttributeMaps, map instances and Channels). Nothing here names a Step's loads.

Every Step persists ``wait_for`` and ``execute`` results synchronously, set
explicitly so that ``FlowConfig(step_durability=ASYNC)`` never replays a Step.
Durations are whole seconds (Dex 1.23 refuses fractions).

Dex 1.23 replaces, not merges, a Step's own options with per-movement ones, so
the per-call options of ``AwaitToolApproval`` and the tool Steps (which load
only their own ``AGENT_TOOL_CALLS`` instance) repeat durability, retries,
timeouts and the failure route with its own instance load.

``StepOptions`` are frozen, so each Step's static options are built once and
shared: the SDK asks a Step for them on every movement to it.
"""

import functools
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

import dex

from dex_agents.application.declarations import RPC_DECLARATIONS, STEP_DECLARATIONS, Load, Loaded, Lock, RpcName
from dex_agents.application.next import StepName
from dex_agents.application.policies import STEP_POLICIES, StepPolicy
from dex_agents.domain.history import ModelWindow, summary_key
from dex_agents.domain.messages import message_sequence_key
from dex_agents.infrastructure.dex.persistence import (
    AGENT_HISTORY_SUMMARIES,
    AGENT_MESSAGES,
    AGENT_TOOL_CALLS,
    FRAMEWORK_RUN_STATES,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TURN_CANCEL_REQUEST,
)

CallableT = TypeVar("CallableT", bound=Callable[..., Any])

SYNC = dex.StepOptions(wait_for_durability=dex.StepDurability.SYNC, execute_durability=dex.StepDurability.SYNC)
"""Synchronous durability for both methods."""

PER_CALL_STEPS = frozenset(name for name, step in STEP_DECLARATIONS.items() if step.takes_tool_call)
"""Steps whose input is a tool-call ID and that load only that call's record."""


WINDOW_STEPS = frozenset(name for name, step in STEP_DECLARATIONS.items() if Load.WINDOW in step.loads)
"""Steps that read the model's window: a movement to one loads exactly the window's messages and summary."""

LOCKS: dict[Lock, dex.AttributeLock] = {
    Lock.INTERRUPTS: PENDING_INTERRUPTS.lock(),
    Lock.CANCEL_REQUEST: TURN_CANCEL_REQUEST.lock(),
}
"""The Dex lock of every declared `Lock`."""

WAITING_MESSAGE_CHANNELS = (QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES)
"""The Channels whose messages `Load.WAITING_MESSAGES` loads."""


def dex_loads(loaded: Loaded) -> tuple[tuple["dex.AttributeMap[Any]", ...], tuple[dex.AttributeMapLoad, ...]]:
    """Return the whole maps and the map instances a handler that may read ``loaded`` loads.

    A query RPC's own messages (`Loaded.caller_messages`) are the caller's to load, so none is listed.
    """
    maps: list[dex.AttributeMap[Any]] = []
    instances: list[dex.AttributeMapLoad] = []
    if loaded.tool_calls is not None:
        instances.extend(AGENT_TOOL_CALLS.load(tool_call_id) for tool_call_id in sorted(loaded.tool_calls))
    if loaded.messages is None:
        if not loaded.caller_messages:
            maps.append(AGENT_MESSAGES)
    else:
        instances.extend(AGENT_MESSAGES.load(message_sequence_key(sequence)) for sequence in loaded.messages)
    if loaded.run_state:
        # The whole map: the state is a chain of parts (`dex_agents.infrastructure.dex.run_state_parts`).
        maps.append(FRAMEWORK_RUN_STATES)
    if loaded.summaries is None:
        maps.append(AGENT_HISTORY_SUMMARIES)
    else:
        instances.extend(AGENT_HISTORY_SUMMARIES.load(summary_key(number)) for number in sorted(loaded.summaries))
    if loaded.tool_calls is None:
        maps.append(AGENT_TOOL_CALLS)
    return tuple(maps), tuple(instances)


def dex_locks(locks: frozenset[Lock]) -> tuple[dex.AttributeLock, ...]:
    """Return the Dex locks of ``locks``, in `Lock` order."""
    return tuple(LOCKS[lock] for lock in Lock if lock in locks)


def session_rpc(name: RpcName) -> Callable[[CallableT], CallableT]:
    """Return the ``dex.rpc`` decorator of RPC ``name``: its declared loads, locks and transactionality."""
    declaration = RPC_DECLARATIONS[name]
    loaded = declaration.loaded()
    maps, instances = dex_loads(loaded)
    return dex.rpc(
        name=name.value,
        is_transactional=declaration.transactional,
        lock_attributes=dex_locks(declaration.locks),
        load_attribute_maps=maps,
        load_attribute_map_instances=instances,
        load_channels=WAITING_MESSAGE_CHANNELS if loaded.waiting_messages else (),
    )


def _with_loads(options: dex.StepOptions, loaded: Loaded) -> dex.StepOptions:
    maps, instances = dex_loads(loaded)
    if not maps and not instances and not options.execute_load_attribute_maps:
        return options
    return replace(options, execute_load_attribute_maps=maps, execute_load_attribute_map_instances=instances)


def whole_seconds(duration: timedelta) -> timedelta:
    """Round ``duration`` up to whole seconds."""
    seconds = int(duration.total_seconds())
    if seconds < duration.total_seconds():
        seconds += 1
    return timedelta(seconds=seconds)


def _with_policy(options: dex.StepOptions, policy: StepPolicy) -> dex.StepOptions:
    retry = None
    if policy.maximum_attempts is not None or policy.total_retry_duration is not None:
        retry = dex.RetryPolicy(
            maximum_attempts=policy.maximum_attempts or 0,
            total_duration=None if policy.total_retry_duration is None else whole_seconds(policy.total_retry_duration),
        )
    return replace(
        options,
        execute_retry=retry,
        execute_method_timeout=None if policy.method_timeout is None else whole_seconds(policy.method_timeout),
        heartbeat_timeout=None if policy.heartbeat_timeout is None else whole_seconds(policy.heartbeat_timeout),
    )


@functools.cache
def _base(step: StepName) -> dex.StepOptions:
    """Options of ``step`` without its failure route: its policy, and the loads of a movement that names nothing.

    A window Step moved to without a window loads every message and summary.
    """
    declaration = STEP_DECLARATIONS[step]
    options = _with_loads(_with_policy(SYNC, declaration.policy), declaration.loaded())
    if declaration.locks:
        options = replace(options, execute_lock_attributes=dex_locks(declaration.locks))
    return options


class StepOptionsTable:
    """Static and per-call options of every Step, given the Dex Step classes."""

    def __init__(self, step_classes: "dict[StepName, type[dex.Step[object]]]") -> None:
        self._classes = step_classes
        self._static: dict[StepName, dex.StepOptions] = {}

    def static(self, step: StepName) -> dex.StepOptions:
        """Return the Step's own options (used when a movement sets none); built once per Step."""
        options = self._static.get(step)
        if options is None:
            options = self._static[step] = self._build_static(step)
        return options

    def _build_static(self, step: StepName) -> dex.StepOptions:
        options = _base(step)
        route = STEP_POLICIES[step].failure_route
        if route is None:
            return options
        return options.on_execute_failure_proceed_to(self._classes[route])

    def for_window(self, step: StepName, window: ModelWindow) -> dex.StepOptions:
        """Return the options of a movement to a window Step: exactly the window's messages and summary loaded.

        The rest repeats the Step's own options (Dex replaces them) and its declared loads.
        """
        assert step in WINDOW_STEPS, f"{step} reads no window"
        options = _with_loads(_base(step), STEP_DECLARATIONS[step].loaded(window=window))
        route = STEP_POLICIES[step].failure_route
        if route is None:
            return options
        return options.on_execute_failure_proceed_to(self._classes[route], self.static(route))

    def for_call(self, step: StepName, tool_call_id: str, window: ModelWindow | None = None) -> dex.StepOptions:
        """Return the options of one tool call's Step: its own record loaded, everything repeated.

        A tool Step whose call reads the turn's history (``window``, `AgentToolCall.history_window`)
        also loads the window's messages, its summary and the run state; its failure route does not.
        """
        assert step in PER_CALL_STEPS, f"{step} takes no tool-call ID"
        declaration = STEP_DECLARATIONS[step]
        options = _with_loads(_base(step), declaration.loaded(window=window, step_input=tool_call_id))
        if declaration.wait_loads:
            _, waits = dex_loads(declaration.wait_loaded(step_input=tool_call_id))
            options = replace(options, wait_for_load_attribute_map_instances=waits)
        route = STEP_POLICIES[step].failure_route
        if route is None:
            return options
        return options.on_execute_failure_proceed_to(self._classes[route], self.for_call(route, tool_call_id))
