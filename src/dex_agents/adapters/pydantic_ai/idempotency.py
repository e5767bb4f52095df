"""The idempotency key of a tool call, as a tool reads it from its `RunContext`.

Every tool Step runs the agent with run metadata
``{IDEMPOTENCY_KEY_METADATA_KEY: "<session ID>/<turn ID>/<tool call ID>"}``,
exactly `DeferredToolExecution.idempotency_key`, so a write can deduplicate
the retries of one call. Outside a tool Step (a plain ``agent.run``) the key
is absent and `deferred_tool_idempotency_key` returns ``None``.
"""

from typing import Any

from pydantic_ai import RunContext

IDEMPOTENCY_KEY_METADATA_KEY = "dex.idempotency_key"
"""The run metadata key that carries a tool call's idempotency key."""


def deferred_tool_idempotency_key(ctx: RunContext[Any]) -> str | None:
    """Return the idempotency key of the tool call ``ctx`` runs, or ``None`` outside a tool Step.

    The key is ``"<session ID>/<turn ID>/<tool call ID>"``, the same on every
    attempt of one call.
    """
    metadata = ctx.metadata
    if not metadata:
        return None
    key = metadata.get(IDEMPOTENCY_KEY_METADATA_KEY)
    return key if isinstance(key, str) else None
