"""Which engine call a use case runs in."""

import attrs


@attrs.frozen(kw_only=True)
class StepCall:
    """One attempt of one Step execution."""

    flow_id: str
    """The session ID."""
    step_execution_id: str
    """The Step execution, shared by its attempts."""
    attempt: int
    """The attempt, from 1."""
