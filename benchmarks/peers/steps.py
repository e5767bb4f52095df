"""The durable-step shape each configuration must record for one turn (stdlib only)."""

from typing import Any

DEX_CONFIGS = ("dex", "dex-live", "dex-inmemory", "dex-inproc", "dex-floor")
SDK_FLOOR_CONFIGS = ("sdk-floor", "sdk-floor-agent", "sdk-floor-store")
DEX_PROCESS_CONFIGS = ("dex", "dex-live", "dex-inmemory", "dex-floor", *SDK_FLOOR_CONFIGS)
"""Configurations whose dev server and Worker are child processes of their own (CPU measured per role)."""
DEX_TASK_SLOTS = 16
"""The dex Worker's task slots: a turn's M parallel tool Steps plus the slot Dex keeps for RPCs."""


def dex_expected_steps(k: int, m: int, turns: int) -> dict[str, int]:
    """dex-agents' Step executions (``step_execute_completed``) of a session after ``turns`` turns.

    Per turn (the spec's Step table): K+1 ``RunModel``, K*M ``CallTool``, K ``ResumeTurn`` (none for
    M = 1: a response of one call is resumed by its tool Step); once ``StartAgentSession`` (which
    starts the first turn), then one ``AwaitUserMessage`` per later turn. The ``AwaitUserMessage``
    waiting after the last turn has run only its ``wait_for``.
    """
    counts = {"StartAgentSession": 1, "RunModel": turns * (k + 1), "CallTool": turns * k * m}
    if k and m > 1:
        counts["ResumeTurn"] = turns * k
    if turns > 1:
        counts["AwaitUserMessage"] = turns - 1
    return counts


def check_steps(config: str, describe: dict[str, Any], k: int, m: int, session_turns: int = 1) -> tuple[bool, str]:
    """Check what the engine recorded against the turn shape; return (ok, a one-line account).

    Peers record one workflow per turn: K+1 model steps and K*M tool steps. dex-agents records
    the whole session in one Flow: after ``session_turns`` turns, `dex_expected_steps` exactly.
    """
    if config == "plain":
        return True, "no engine"
    names = describe.get("step_names", {})
    if config in DEX_CONFIGS:
        expected = dex_expected_steps(k, m, session_turns)
        # CompactHistory runs when the window passes the agent's context budget (issue 11): at most
        # once per turn after the first, and never in a one-turn measurement.
        compactions = names.get("CompactHistory", 0)
        fixed = {name: count for name, count in names.items() if name != "CompactHistory"}
        ok = fixed == expected and compactions <= max(0, session_turns - 1)
        order = ("StartAgentSession", "AwaitUserMessage", "RunModel", "CallTool", "ResumeTurn")
        text = " + ".join(f"{names.get(n, 0)} {n}" for n in order if n in names or n in expected)
        extra = sorted(set(names) - set(order))
        if extra:
            text += " + " + " + ".join(f"{names[n]} {n}" for n in extra)
        return ok, f"{text} = {sum(names.values())}" + ("" if ok else f" (expected {expected})")
    if config in SDK_FLOOR_CONFIGS:
        expected = {"Start": 1, "Model": k + 1, "Tool": k * m, **({"Join": k} if k and m > 1 else {})}
        ok = names == expected
        text = " + ".join(
            f"{names.get(n, 0)} {n}" for n in ("Start", "Model", "Tool", "Join") if n in names or n in expected
        )
        return ok, f"{text} = {sum(names.values())}" + ("" if ok else f" (expected {expected})")
    model, tool = describe.get("model_steps", 0), describe.get("tool_steps", 0)
    ok = model == k + 1 and tool == k * m and describe.get("recorded_steps", 0) == model + tool
    text = " + ".join(f"{n} {name}" for name, n in sorted(names.items())) + f" = {describe.get('recorded_steps', 0)}"
    return ok, text + ("" if ok else f" (expected {k + 1} model + {k * m} tool)")
