"""Dex `StepOptions` for every Step, mapped from the application's Step policies.

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
from dataclasses import replace
from datetime import timedelta

import dex

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
    RUN_STATE_KEY,
)

RUN_STATE_LOAD = FRAMEWORK_RUN_STATES.load(RUN_STATE_KEY)
"""The run state's one map instance: loaded by ``RunModel`` and ``CompactHistory``, and by the tool Step of a call
that reads the turn's history."""

SYNC = dex.StepOptions(wait_for_durability=dex.StepDurability.SYNC, execute_durability=dex.StepDurability.SYNC)
"""Synchronous durability for both methods."""

PER_CALL_STEPS = frozenset(
    {
        StepName.AWAIT_TOOL_APPROVAL,
        StepName.CALL_TOOL,
        StepName.CALL_SINGLE_ATTEMPT_TOOL,
        StepName.RECORD_TOOL_FAILURE,
        StepName.RECORD_TOOL_OUTCOME_UNKNOWN,
        StepName.RECONCILE_TOOL_CALL,
    }
)
"""Steps whose input is a tool-call ID and that load only that call's record."""

HISTORY_TOOL_STEPS = frozenset({StepName.CALL_TOOL, StepName.CALL_SINGLE_ATTEMPT_TOOL})
"""Per-call Steps that load the turn's history for a call that reads it (`AgentToolCall.history_window`)."""

WINDOW_STEPS = frozenset({StepName.RUN_MODEL, StepName.COMPACT_HISTORY})
"""Steps that read the model's window: a movement to one loads exactly the window's messages and summary."""


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
    """Options of ``step`` without its failure route."""
    options = _with_policy(SYNC, STEP_POLICIES[step])
    match step:
        case StepName.RUN_MODEL:
            # Used only by a movement that names no window: every message, as before windows.
            everything = (AGENT_MESSAGES, AGENT_HISTORY_SUMMARIES, AGENT_TOOL_CALLS)
            return replace(
                options, execute_load_attribute_maps=everything, execute_load_attribute_map_instances=(RUN_STATE_LOAD,)
            )
        case StepName.COMPACT_HISTORY:
            # The turn's tool-call records too: a cancelled turn ends there (`TurnCloser.end_cancelled` clears them).
            everything = (AGENT_MESSAGES, AGENT_HISTORY_SUMMARIES, AGENT_TOOL_CALLS)
            return replace(
                options, execute_load_attribute_maps=everything, execute_load_attribute_map_instances=(RUN_STATE_LOAD,)
            )
        case (
            StepName.RESUME_TURN
            | StepName.RECORD_TURN_FAILURE
            | StepName.RECORD_RESUME_FAILURE
            | StepName.RECORD_START_FAILURE
            | StepName.RECORD_COMPACTION_FAILURE
        ):
            return replace(options, execute_load_attribute_maps=(AGENT_TOOL_CALLS,))
        case StepName.AWAIT_TOOL_APPROVAL:
            # Expiring an interrupt rewrites PENDING_INTERRUPTS; the lock keeps a
            # concurrent resolve_interrupt (or another expiry) from being overwritten.
            return replace(options, execute_lock_attributes=(PENDING_INTERRUPTS.lock(),))
        case _:
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

        The rest repeats the Step's own options (Dex replaces them); both also
        load the run state and every tool-call record of the turn (``RunModel`` gives them to the
        runner; either may end a cancelled turn, which clears them).
        """
        assert step in WINDOW_STEPS, f"{step} reads no window"
        loads = [AGENT_MESSAGES.load(message_sequence_key(sequence)) for sequence in window.sequences]
        loads.append(RUN_STATE_LOAD)
        if window.summary_number is not None:
            loads.append(AGENT_HISTORY_SUMMARIES.load(summary_key(window.summary_number)))
        maps = (AGENT_TOOL_CALLS,)
        options = replace(
            _base(step), execute_load_attribute_maps=maps, execute_load_attribute_map_instances=tuple(loads)
        )
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
        own = (AGENT_TOOL_CALLS.load(tool_call_id),)
        loads: tuple[dex.AttributeMapLoad, ...] = own
        if window is not None and step in HISTORY_TOOL_STEPS:
            history = [AGENT_MESSAGES.load(message_sequence_key(sequence)) for sequence in window.sequences]
            history.append(RUN_STATE_LOAD)
            if window.summary_number is not None:
                history.append(AGENT_HISTORY_SUMMARIES.load(summary_key(window.summary_number)))
            loads = (*own, *history)
        options = replace(_base(step), execute_load_attribute_map_instances=loads)
        if step is StepName.AWAIT_TOOL_APPROVAL:
            options = replace(options, wait_for_load_attribute_map_instances=own)
        route = STEP_POLICIES[step].failure_route
        if route is None:
            return options
        return options.on_execute_failure_proceed_to(self._classes[route], self.for_call(route, tool_call_id))
