"""The Step graph's policies as data, so every host engine maps the same numbers, and the effect → Step rule.

`STEP_POLICIES` holds each Step's attempts, timeouts and failure route;
`tool_step_name` says which Step runs a call of each effect; `policy_resolver`
is the one way a tool's policy is resolved under an agent's options. The Step
table and the effect table of the `dex_agents` package docstring describe
them, and a parity test keeps them equal. "default" there is the engine's
default (on Dex: a 1-minute heartbeat timeout for a Step that does not beat,
which bounds every attempt). No Step is left on the engine's default retries
(on Dex: 4 hours of back-off), so every failure ends within minutes: in a
failure route that fails the turn and keeps the session, or, for the Steps
without one, which run only dex-agents code, in a failed session whose error
names the bug. Every Step persists its results synchronously (the host must
set that explicitly). `HEARTBEAT_INTERVAL` is how often model and tool Steps
beat in the background.
"""

from collections.abc import Mapping
from datetime import timedelta

import attrs

from dex_agents.application.next import StepName
from dex_agents.application.options import AgentSessionOptions
from dex_agents.application.runner import PolicyResolver
from dex_agents.domain.tools import ToolEffect, ToolPolicy, is_single_attempt, resolve_tool_policy

HEARTBEAT_INTERVAL = timedelta(seconds=20)
"""Background heartbeat period during model and tool calls."""


@attrs.frozen(kw_only=True)
class StepPolicy:
    """Retries, timeouts and the failure route of one Step."""

    maximum_attempts: int | None = None
    """Attempts of ``execute``, the first included; ``None`` is the engine default."""
    total_retry_duration: timedelta | None = None
    """Time all attempts together may take; ``None`` is the engine default."""
    method_timeout: timedelta | None = None
    """Limit of one ``execute`` attempt; ``None`` is the engine default."""
    heartbeat_timeout: timedelta | None = None
    """An attempt that stays silent this long fails; ``None`` is the engine default."""
    failure_route: StepName | None = None
    """Where the session goes when every attempt failed; ``None`` fails the session."""


_TURN_STEP_ATTEMPTS = 3
"""Attempts of a Step that belongs to a turn; a runner bug fails the turn inside the Step, so these cover crashes."""

_RECORD_ATTEMPTS = 5
"""Attempts of a Step that runs only dex-agents code and has nowhere else to go."""


def _model_call(*, failure_route: StepName) -> StepPolicy:
    """The policy of a Step that calls the model (``RunModel``, ``CompactHistory``), where one call may take minutes."""
    return StepPolicy(
        maximum_attempts=3,
        total_retry_duration=timedelta(minutes=30),
        method_timeout=timedelta(minutes=15),
        heartbeat_timeout=timedelta(minutes=2),
        failure_route=failure_route,
    )


def _tool_call(*, attempts: int, failure_route: StepName) -> StepPolicy:
    """The policy of a Step that runs a tool call or its reconcile probe: an attempt silent for 2 minutes fails."""
    return StepPolicy(maximum_attempts=attempts, heartbeat_timeout=timedelta(minutes=2), failure_route=failure_route)


STEP_POLICIES: Mapping[StepName, StepPolicy] = {
    StepName.START_AGENT_SESSION: StepPolicy(
        maximum_attempts=_TURN_STEP_ATTEMPTS, failure_route=StepName.RECORD_START_FAILURE
    ),
    StepName.AWAIT_USER_MESSAGE: StepPolicy(
        maximum_attempts=_TURN_STEP_ATTEMPTS, failure_route=StepName.RECORD_TURN_FAILURE
    ),
    StepName.RUN_MODEL: _model_call(failure_route=StepName.RECORD_TURN_FAILURE),
    StepName.AWAIT_TOOL_APPROVAL: StepPolicy(maximum_attempts=_RECORD_ATTEMPTS),
    StepName.CALL_TOOL: _tool_call(attempts=3, failure_route=StepName.RECORD_TOOL_FAILURE),
    StepName.CALL_SINGLE_ATTEMPT_TOOL: _tool_call(attempts=1, failure_route=StepName.RECORD_TOOL_OUTCOME_UNKNOWN),
    StepName.RECORD_TOOL_FAILURE: StepPolicy(maximum_attempts=_RECORD_ATTEMPTS),
    StepName.RECORD_TOOL_OUTCOME_UNKNOWN: StepPolicy(maximum_attempts=_RECORD_ATTEMPTS),
    StepName.RECONCILE_TOOL_CALL: _tool_call(attempts=3, failure_route=StepName.RECORD_TOOL_OUTCOME_UNKNOWN),
    StepName.RESUME_TURN: StepPolicy(
        maximum_attempts=_TURN_STEP_ATTEMPTS, failure_route=StepName.RECORD_RESUME_FAILURE
    ),
    StepName.RECORD_TURN_FAILURE: StepPolicy(maximum_attempts=_RECORD_ATTEMPTS),
    StepName.RECORD_RESUME_FAILURE: StepPolicy(maximum_attempts=_RECORD_ATTEMPTS),
    StepName.RECORD_START_FAILURE: StepPolicy(maximum_attempts=_RECORD_ATTEMPTS),
    StepName.COMPACT_HISTORY: _model_call(failure_route=StepName.RECORD_COMPACTION_FAILURE),
    StepName.RECORD_COMPACTION_FAILURE: StepPolicy(maximum_attempts=_RECORD_ATTEMPTS),
}
"""The policy of every Step."""


def tool_step_name(effect: ToolEffect) -> StepName:
    """Return the Step that runs calls of ``effect``: ``CallSingleAttemptTool`` for single-attempt effects."""
    return StepName.CALL_SINGLE_ATTEMPT_TOOL if is_single_attempt(effect) else StepName.CALL_TOOL


def policy_resolver(options: AgentSessionOptions) -> PolicyResolver:
    """Return how tool policies resolve under ``options``: explicit policy, framework effect, default effect."""

    def resolve(tool_name: str, framework_effect: ToolEffect | None) -> ToolPolicy:
        return resolve_tool_policy(
            tool_name,
            explicit=options.tool_policies,
            framework_effect=framework_effect,
            default_effect=options.default_tool_effect,
        )

    return resolve
