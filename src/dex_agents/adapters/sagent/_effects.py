"""Tool effects, same-resource waves and the session's tool state.

Effect of a call (`framework_effect`), passed to the session's policy
resolver, which applies ``tool_policies`` first and ``default_tool_effect``
last: sagent's ``Bash`` tool is the one sagent tool that knows whether a call
writes. Its ``serialize_key`` runs sagent's conservative shell classifier:
``None`` means the command is read-only (``read``); anything it cannot prove
read-only is a writer, which gives no effect (the default applies). Every
other tool gives no effect.

Waves (`waves`): calls of one model response that share a sagent
``serialize_key`` (same-file ``Read``/``Edit``/``Write``; a Bash writer's
``EXCLUSIVE_KEY`` contends with every keyed call) must not race. sagent's own
runtime groups them exactly so (``AgentRuntime._partition_cohort``) and runs
each group in submission order. Here wave ``n`` holds the ``n``-th call of
every group, unkeyed calls all in wave 0; the runner hands the session one
wave per ``ToolCallsRequested`` and the next one from the following
``RunModel`` (which then makes no model call), so a wave's tool Steps start
only after every call of the previous wave has its final record.

Tool state (`merge_tool_states`): each call's tool Step starts from the
state the wave was issued with and returns the state it ended with; the next
``RunModel`` merges the wave's states, in call order, into the session's.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from sagent.agent.runtime import EXCLUSIVE_KEY
from sagent.agent.session_io import restore_tool_state, serialize_tool_state
from sagent.agent.state import ToolState, tool_state_context
from sagent.tools.bash import Bash
from sagent.types.runtime import ToolCall
from sagent.types.tools import Tool

from dex_agents.domain.tools import ToolEffect


def serialize_key(tool: Tool | None, call: ToolCall, state: ToolState) -> str | None:
    """Return sagent's serialization key of ``call`` (``None`` for an unknown tool or bad arguments)."""
    if tool is None:
        return None
    with tool_state_context(state):
        try:
            return tool.serialize_key(call.args)
        except Exception:  # noqa: BLE001 - a key is advice; bad arguments fail in the tool Step, seen by the model
            return EXCLUSIVE_KEY


def framework_effect(tool: Tool | None, key: str | None) -> ToolEffect | None:
    """Return the effect sagent itself knows for a call: ``read`` for a read-only Bash command, else ``None``."""
    if isinstance(tool, Bash) and key is None:
        return ToolEffect.READ
    return None


def waves(calls: Sequence[ToolCall], keys: Sequence[str | None]) -> list[list[str]]:
    """Return the call IDs of each wave, as the module docstring says (sagent's grouping, in submission order)."""
    exclusive = EXCLUSIVE_KEY in keys
    groups: list[list[str]] = []
    by_key: dict[str, list[str]] = {}
    for call, key in zip(calls, keys, strict=True):
        if key is None:
            groups.append([call.id])
            continue
        slot = EXCLUSIVE_KEY if exclusive else key
        group = by_key.get(slot)
        if group is None:
            by_key[slot] = group = [call.id]
            groups.append(group)
        else:
            group.append(call.id)
    depth = max((len(group) for group in groups), default=0)
    return [[group[n] for group in groups if n < len(group)] for n in range(depth)]


def tool_state_from(snapshot: Mapping[str, object] | None) -> ToolState:
    """Return a fresh ``ToolState`` holding ``snapshot`` (sagent's ``serialize_tool_state`` form)."""
    state = ToolState()
    if snapshot:
        restore_tool_state(state, snapshot)
    return state


def snapshot_of(state: ToolState) -> dict[str, object]:
    """Return ``state`` in sagent's ``serialize_tool_state`` form."""
    return serialize_tool_state(state)


def _entries(snapshot: Mapping[str, object]) -> dict[str, Any]:
    raw = snapshot.get("read_cache")
    items = raw if isinstance(raw, list) else []
    return {entry["path"]: entry for entry in items if isinstance(entry, dict) and "path" in entry}


def _strings(snapshot: Mapping[str, object], key: str) -> list[str]:
    raw = snapshot.get(key)
    return [item for item in raw if isinstance(item, str)] if isinstance(raw, list) else []


def merge_tool_states(base: Mapping[str, object], ended: Sequence[Mapping[str, object]]) -> dict[str, object]:
    """Return ``base`` with what each call's ended state changed, applied in call order.

    A read-cache entry a call added or changed is taken, one it dropped is
    dropped; a changed working directory is taken; recent files, extra
    directories, skills and rules are unions in first-seen order.
    """
    merged = dict(base)
    cache = _entries(base)
    before = dict(cache)
    for state in ended:
        after = _entries(state)
        for path, entry in after.items():
            if before.get(path) != entry:
                cache[path] = entry
        for path in before:
            if path not in after:
                cache.pop(path, None)
        if state.get("bash_cwd") != base.get("bash_cwd"):
            merged["bash_cwd"] = state.get("bash_cwd")
        for key in ("recent_files", "additional_dirs", "invoked_skills", "invoked_rules"):
            seen = _strings(merged, key)
            merged[key] = seen + [item for item in _strings(state, key) if item not in seen]
    merged["read_cache"] = list(cache.values())
    return merged
