"""The Step graph's policies as data, so every host engine maps the same numbers.

| Step                    | attempts      | method timeout | heartbeat timeout | failure route              |
|-------------------------|---------------|----------------|-------------------|----------------------------|
| `RunModel`              | 3 in 30 min   | 15 min         | 2 min             | `RecordTurnFailure`        |
| `CallTool`              | 3             | default        | 2 min             | `RecordToolFailure`        |
| `CallSingleAttemptTool` | 1             | default        | 2 min             | `RecordToolOutcomeUnknown` |
| every other Step        | default       | default        | default           | none                       |

"default" is the engine's default.
Every Step persists its results synchronously (the host must set that
explicitly). `HEARTBEAT_INTERVAL` is how often model and tool Steps beat in the
background.
"""

from collections.abc import Mapping
from datetime import timedelta

import attrs

from dex_agents.application.next import StepName

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


_TOOL_HEARTBEAT_TIMEOUT = timedelta(minutes=2)

STEP_POLICIES: Mapping[StepName, StepPolicy] = {
    StepName.START_AGENT_SESSION: StepPolicy(),
    StepName.AWAIT_USER_MESSAGE: StepPolicy(),
    StepName.RUN_MODEL: StepPolicy(
        maximum_attempts=3,
        total_retry_duration=timedelta(minutes=30),
        method_timeout=timedelta(minutes=15),
        heartbeat_timeout=timedelta(minutes=2),
        failure_route=StepName.RECORD_TURN_FAILURE,
    ),
    StepName.AWAIT_TOOL_APPROVAL: StepPolicy(),
    StepName.CALL_TOOL: StepPolicy(
        maximum_attempts=3,
        heartbeat_timeout=_TOOL_HEARTBEAT_TIMEOUT,
        failure_route=StepName.RECORD_TOOL_FAILURE,
    ),
    StepName.CALL_SINGLE_ATTEMPT_TOOL: StepPolicy(
        maximum_attempts=1,
        heartbeat_timeout=_TOOL_HEARTBEAT_TIMEOUT,
        failure_route=StepName.RECORD_TOOL_OUTCOME_UNKNOWN,
    ),
    StepName.RECORD_TOOL_FAILURE: StepPolicy(),
    StepName.RECORD_TOOL_OUTCOME_UNKNOWN: StepPolicy(),
    StepName.RESUME_TURN: StepPolicy(),
    StepName.RECORD_TURN_FAILURE: StepPolicy(),
}
"""The policy of every Step."""
