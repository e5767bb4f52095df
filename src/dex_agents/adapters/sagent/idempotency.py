"""`deferred_tool_idempotency_key`: inside a sagent tool run by a tool Step, the call's idempotency key."""

from contextvars import ContextVar

IDEMPOTENCY_KEY: ContextVar[str | None] = ContextVar("dex_agents_sagent_idempotency_key", default=None)
"""Set by `SagentRunner.execute_deferred_tool_call` around the tool's run."""


def deferred_tool_idempotency_key() -> str | None:
    """Return ``"<session ID>/<turn ID>/<tool call ID>"`` inside a tool Step, else ``None``.

    The same on every attempt of the call (`DeferredToolExecution.idempotency_key`):
    a write keyed by it is done once however often its Step runs.
    """
    return IDEMPOTENCY_KEY.get()
