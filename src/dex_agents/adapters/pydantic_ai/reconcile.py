"""Reconcile probes of Pydantic AI tools, declared in the tool's metadata.

A function tool declares its probe with ``metadata=reconcile_probe(probe)``
(for example ``@agent.tool_plain(metadata=reconcile_probe(find_in_outbox))``).
``probe(call)`` is an async read: did the call with ``call.idempotency_key``
take effect, and with what result? It returns a `ReconcileResult`
(``applied(output)``, ``not_applied()`` or ``unknown()``); an exception fails
the ``ReconcileToolCall`` attempt, which is retried (3 attempts) and then
leaves the call ``outcome_unknown``.

A tool with a probe gets ``reconcilable=True`` on its policy (`tool_has_probe`
on its definition in the model Step), so a single-attempt call of it whose
outcome is unknown is reconciled. `find_reconcile_probe` finds the probe again
in the reconcile Step by walking the agent's toolsets (combined, wrapped,
prefixed) down to the function tool of that name. The metadata value is the callable itself, so keep the
tool's metadata out of anything that serializes it.
"""

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, FunctionToolset, PrefixedToolset, WrapperToolset

from dex_agents.application.runner import ReconcileResult

RECONCILE_METADATA_KEY = "dex_agents_reconcile_probe"
"""The tool metadata key holding a tool's reconcile probe."""


@attrs.frozen(kw_only=True)
class ReconcileCall:
    """What a reconcile probe gets: the call whose outcome is unknown."""

    session_id: str
    """The session (Flow) ID."""
    tool_name: str
    """The tool's name."""
    arguments: Mapping[str, Any]
    """The call's arguments (empty when they were not a JSON object)."""
    idempotency_key: str
    """``<session ID>/<turn ID>/<tool call ID>``: the key the tool ran with (`deferred_tool_idempotency_key`)."""
    deps: Any
    """The agent's dependencies, from the runner's ``deps_factory`` (``None`` without one)."""


ReconcileProbe = Callable[[ReconcileCall], Awaitable[ReconcileResult]]
"""A tool's reconcile probe."""


def reconcile_probe(probe: ReconcileProbe) -> dict[str, Any]:
    """Return the tool metadata that declares ``probe`` as the tool's reconcile probe."""
    return {RECONCILE_METADATA_KEY: probe}


def _probe_in(metadata: Mapping[str, Any] | None) -> ReconcileProbe | None:
    probe = (metadata or {}).get(RECONCILE_METADATA_KEY)
    return probe if callable(probe) else None


def tool_has_probe(definition: ToolDefinition | None) -> bool:
    """Whether a tool's definition declares a reconcile probe."""
    return definition is not None and _probe_in(definition.metadata) is not None


def find_reconcile_probe(agent: AbstractAgent[Any, Any], tool_name: str) -> ReconcileProbe | None:
    """Return the reconcile probe of the agent's function tool called ``tool_name`` by the model, or ``None``.

    Looks through combined toolsets, wrappers and prefixes down to each `FunctionToolset`.
    """
    for toolset in agent.toolsets:
        probe = _probe_of(toolset, tool_name)
        if probe is not None:
            return probe
    return None


def _probe_of(toolset: AbstractToolset[Any], name: str) -> ReconcileProbe | None:
    match toolset:
        case FunctionToolset():
            tool = toolset.tools.get(name)
            return None if tool is None else _probe_in(tool.metadata)
        case PrefixedToolset():
            start = f"{toolset.prefix}_"
            return _probe_of(toolset.wrapped, name.removeprefix(start)) if name.startswith(start) else None
        case WrapperToolset():
            return _probe_of(toolset.wrapped, name)
        case CombinedToolset():
            for inner in toolset.toolsets:
                probe = _probe_of(inner, name)
                if probe is not None:
                    return probe
            return None
        case _:
            return None
