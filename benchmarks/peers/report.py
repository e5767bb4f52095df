"""Summaries and Markdown tables of a peer benchmark run (stdlib only).

Per-step figures divide by the turn's model calls plus tool calls (K+1 + K*M, 26 for 5x4), the
same denominator for every configuration; dex-agents also records ``ResumeTurn`` and
session Steps, shown as "recorded". CPU per turn is the turn's *cycle* (see `bench.Worker`),
less the process's idle CPU rate over the part of the cycle the turn did not run.
"""

import statistics
from collections.abc import Sequence
from typing import Any

from benchmarks.peers.steps import DEX_CONFIGS, DEX_PROCESS_CONFIGS

Sample = dict[str, Any]

LABELS = {
    "plain": "plain `agent.run` (floor)",
    "dbos": "DBOS, SQLite file",
    "temporal": "Temporal, stock dev server",
    "temporal-tuned": "Temporal, tuned dev server",
    "temporal-tuned-nosandbox": "Temporal tuned, no sandbox",
    "dex": "**dex-agents**, dev server on its SQLite data dir + Worker in own processes",
    "dex-live": "dex-agents, `dex` with the Client following every live event of the turn (a chat UI)",
    "dex-inmemory": "dex-agents, `dex` with the dev server in memory (`--in-memory`, keeps nothing)",
    "dex-inproc": "**dex-agents**, dev server on its SQLite data dir + Worker + Client in one process",
    "dex-floor": "dex-agents binding alone: `dex` with a framework-free scripted runner (not a peer)",
    "sdk-floor": "Dex SDK alone: the same Step graph, Steps that do nothing (a lower bound, not a peer)",
    "sdk-floor-agent": "`sdk-floor` + the plain `agent.run` in its first Step (the floor of any binding, not a peer)",
    "sdk-floor-store": "`sdk-floor` + reads and writes of what a session stores, same sizes (not a peer)",
}


def shape_key(shape: tuple[int, int]) -> str:
    return f"{shape[0]}x{shape[1]}"


def steps_of(shape: tuple[int, int]) -> int:
    k, m = shape
    return k + 1 + k * m


def ms(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x * 1000:.{digits}f}"


def kib(x: float | None) -> str:
    return "-" if x is None else f"{x / 1024:.0f} KiB"


def mib(x_kib: float | None) -> str:
    return "-" if x_kib is None else f"{x_kib / 1024:.0f}"


def _median(xs: Sequence[float | None]) -> float | None:
    ys = [x for x in xs if x is not None]
    return statistics.median(ys) if ys else None


def _stats(xs: Sequence[float]) -> dict[str, float]:
    ys = sorted(xs)
    return {
        "n": len(ys),
        "median": statistics.median(ys),
        "min": ys[0],
        "max": ys[-1],
        "p90": ys[min(len(ys) - 1, round(0.9 * (len(ys) - 1)))],
    }


def _fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    n = len(points)
    if n < 2:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - slope * mx, slope


def role_cpu(config: str, sample: Sample, idle: dict[str, dict[str, float]]) -> dict[str, float | None]:
    """CPU seconds of one turn by role: ``worker`` (runs the Steps), ``server``, ``client``, ``total``.

    ``worker`` is the dex Worker child for ``dex``, else the worker process itself (DBOS, Temporal's
    worker and client, the all-in-one ``dex-inproc``, or plain's ``agent.run``). ``server`` is the
    the dev server child (cycle, exact) or the Temporal dev server (``/proc`` ticks around the call).
    """
    cycle = sample.get("cycle")
    out: dict[str, float | None] = {"worker": None, "server": None, "client": None}
    if cycle is not None:
        idle_span = max(0.0, cycle["span"] - cycle["t"])
        rates = idle.get(config, {})
        corrected = {
            role: value - rates.get(role, 0.0) * idle_span for role, value in cycle.items() if role not in ("span", "t")
        }
        if config in DEX_PROCESS_CONFIGS:
            out.update(worker=corrected.get("worker"), server=corrected.get("server"), client=corrected.get("self"))
        else:
            out["worker"] = corrected.get("self")
    if config in ("temporal", "temporal-tuned", "temporal-tuned-nosandbox"):
        out["server"] = sample.get("server_call")
    parts = [v for v in out.values() if v is not None]
    out["total"] = sum(parts) if parts else None
    return out


def _cpu_medians(config: str, samples: Sequence[Sample], idle: dict[str, dict[str, float]]) -> dict[str, float | None]:
    roles = [role_cpu(config, s, idle) for s in samples]
    return {role: _median([r[role] for r in roles]) for role in ("worker", "server", "client", "total")}


def summarize_results(results: dict[str, Any], configs: Sequence[str], shapes: Sequence[tuple[int, int]]) -> Any:
    idle = results.get("idle_cpu_per_s", {})
    out: dict[str, Any] = {"shapes": {}, "fit": {}, "sustained": {}, "growth": {}}
    samples = results.get("samples", {})
    describe = results.get("describe", {})
    for shape in shapes:
        key = shape_key(shape)
        steps = steps_of(shape)
        floor_samples = [s["t"] for s in samples.get(key, {}).get("plain", []) if "t" in s]
        floor = statistics.median(floor_samples) if floor_samples else None
        rows: dict[str, Any] = {}
        for c in configs:
            xs = [s for s in samples.get(key, {}).get(c, []) if "t" in s]
            if not xs:
                continue
            wall = _stats([s["t"] for s in xs])
            d = describe.get(key, {}).get(c, {})
            recorded = d.get("recorded_steps") or None
            cpu = _cpu_medians(c, xs, idle)
            row: dict[str, Any] = {
                "wall": wall,
                "steps": steps,
                "recorded_steps": recorded,
                "steps_ok": d.get("steps_ok"),
                "steps_text": d.get("steps_text"),
                "describe": {
                    key: d.get(key)
                    for key in (
                        "model_steps",
                        "tool_steps",
                        "step_names",
                        "live_events",
                        "live_event_types",
                        "worker_mode",
                    )
                },
                "cpu_turn": cpu,
                "cpu_per_step": {role: (v / steps if v is not None else None) for role, v in cpu.items()},
                "cpu_call_median": statistics.median(s["cpu"] for s in xs),
            }
            if floor is not None and c != "plain":
                row["overhead_per_step"] = (wall["median"] - floor) / steps
                if recorded:
                    row["overhead_per_recorded_step"] = (wall["median"] - floor) / recorded
            rows[c] = row
        out["shapes"][key] = rows
    if len(shapes) >= 2:
        for c in configs:
            if c == "plain":
                continue
            pts = []
            for shape in shapes:
                rows = out["shapes"].get(shape_key(shape), {})
                if c in rows and "plain" in rows:
                    pts.append((steps_of(shape), rows[c]["wall"]["median"] - rows["plain"]["wall"]["median"]))
            fit = _fit(pts)
            if fit is not None:
                out["fit"][c] = {"fixed_per_turn": fit[0], "per_step": fit[1], "points": pts}
    steps = steps_of(shapes[0])
    sustained = results.get("sustained", {})
    floor_sus = None
    if sustained.get("plain"):
        floor_sus = statistics.median(s["t"] for s in sustained["plain"])
    for c, xs in sustained.items():
        wall = _stats([s["t"] for s in xs])
        row = {
            "wall": wall,
            "cpu_per_step": {k: (v / steps if v is not None else None) for k, v in _cpu_medians(c, xs, idle).items()},
        }
        if floor_sus is not None and c != "plain":
            row["overhead_per_step"] = (wall["median"] - floor_sus) / steps
        out["sustained"][c] = row
    sessions = results.get("sessions")
    if sessions:
        by_turn: dict[str, list[list[Sample]]] = sessions["by_turn"]
        info: dict[str, dict[str, Any]] = sessions["info"]
        n = max((len(v) for v in by_turn.values()), default=0)
        plain = by_turn.get("plain", [])
        floor_by_turn = [_median([s.get("t") for s in turn]) for turn in plain] if plain else []
        for c in configs:
            turns = by_turn.get(c, [])
            if not turns or not turns[0]:
                continue
            med = [_median([s.get("t") for s in turn]) for turn in turns]
            worker_cpu = [_median([role_cpu(c, s, idle)["worker"] for s in turn]) for turn in turns]
            server_cpu = [_median([role_cpu(c, s, idle)["server"] for s in turn]) for turn in turns]
            growth: dict[str, Any] = {
                "median_by_turn": med,
                "worker_cpu_by_turn": worker_cpu,
                "server_cpu_by_turn": server_cpu,
            }
            if floor_by_turn and c != "plain":
                over = [
                    (m - f) / steps if m is not None and f is not None else None
                    for m, f in zip(med, floor_by_turn, strict=False)
                ]
                growth["overhead_per_step_by_turn"] = over
                turn_points = [(i + 1.0, o) for i, o in enumerate(over) if o is not None]
                fit = _fit(turn_points)
                if fit is not None:
                    growth["overhead_fit_turn1"] = fit[0] + fit[1]
                    growth["overhead_fit_turnN"] = fit[0] + fit[1] * n
            growth["stored"] = _stored(c, info.get(c, {}), n)
            growth["info"] = info.get(c, {})
            out["growth"][c] = growth
    return out


def _stored(c: str, info: dict[str, Any], n: int) -> dict[str, Any]:
    """Bytes stored per turn over the described session (see docs/benchmarks.md)."""
    first, last = info.get("turn1", {}), info.get(f"turn{n}", {})
    if c == "plain":
        return {"per_turn": 0, "how": "nothing stored"}
    if c in DEX_CONFIGS and last:
        stored: dict[str, Any] = {
            "per_turn": last["state_bytes"] / n,
            "history_per_turn": last["history_bytes"] / n,
            "state_after_n": last["state_bytes"],
            "history_after_n": last["history_bytes"],
            "how": f"session Attributes after {n} turns / {n} (history: all writes / {n})",
        }
        if first and n > 1 and "db_bytes" in last and "db_bytes" in first:
            stored["db_per_turn"] = (last["db_bytes"] - first["db_bytes"]) / (n - 1)
            stored["db_after_n"] = last["db_bytes"]
        return stored
    if c == "dbos" and first and last and n > 1:
        return {
            "per_turn": (last["db_bytes"] - first["db_bytes"]) / (n - 1),
            "how": f"SQLite file growth from turn 1 to turn {n} / {n - 1}",
        }
    if c.startswith("temporal") and first and last:
        return {
            "per_turn": (first["history_bytes"] + last["history_bytes"]) / 2,
            "turn1": first["history_bytes"],
            "turnN": last["history_bytes"],
            "how": f"workflow history of one turn, mean of turn 1 and turn {n}",
        }
    return {}


# ----------------------------------------------------------------------------- Markdown


def _rss(results: dict[str, Any], c: str) -> str:
    mem = results.get("memory", {}).get(c)
    if not mem:
        return "-"
    children = mem.get("children", {})
    if c in DEX_PROCESS_CONFIGS:
        return (
            f"client {mib(mem.get('max_rss_kib'))}, Worker {mib(children.get('worker', {}).get('VmHWM'))}, "
            f"server {mib(children.get('server', {}).get('VmHWM'))}"
        )
    text = mib(mem.get("max_rss_kib"))
    label = {"temporal": "default", "temporal-tuned": "tuned", "temporal-tuned-nosandbox": "tuned"}.get(c)
    if label:
        srv = results.get("memory", {}).get(f"temporal-server-{label}", {}).get("children", {}).get("server", {})
        text += f", server {mib(srv.get('VmHWM'))}" + (" (shared)" if label == "tuned" else "")
    return text


def _short_steps(c: str, row: dict[str, Any]) -> str:
    """The headline's account of a turn's records: dex-agents' Steps by type, the peers' model + tool."""
    if c in DEX_PROCESS_CONFIGS or c in DEX_CONFIGS:
        return str(row["steps_text"])
    d = row.get("describe", {})
    return f"{d.get('model_steps', '?')} model + {d.get('tool_steps', '?')} tool = {row.get('recorded_steps')}"


def render_markdown(
    results: dict[str, Any], configs: Sequence[str], shapes: Sequence[tuple[int, int]], *, readme: bool = False
) -> str:
    """The run's tables; ``readme`` keeps only the run's description, the headline and the growth tables."""
    summary = results["summary"]
    unavailable: dict[str, str] = results.get("unavailable", {})
    head = shape_key(shapes[0])
    k, m = shapes[0]
    steps = steps_of(shapes[0])
    machine = results.get("machine", {})
    versions = results.get("versions", {})
    lines: list[str] = []
    lines.append(
        f"Run {results.get('date')} on {machine.get('cpus')} vCPU ({machine.get('cpu')}), "
        f"{machine.get('memory_gib')} GiB, Python {machine.get('python')}, {machine.get('platform')}; "
        f"load average before/after {results['load_before'][0]:.2f} / {results['load_after'][0]:.2f}; "
        f"took {results.get('duration_s', 0) / 60:.1f} min."
    )
    lines.append(
        "Versions: " + ", ".join(f"{name} {v}" for name, v in versions.items() if v) + "; "
        f"{results.get('temporal_version', '').splitlines()[0] if results.get('temporal_version') else ''}."
    )
    loads = sorted(results.get("load_during") or [])
    load_text = "not recorded"
    if loads:
        load_text = f"median {statistics.median(loads):.2f}, min {loads[0]:.2f}, max {loads[-1]:.2f}"
    lines.append(
        f"dex-agents source: {results.get('source', 'unknown')}. Load average (1 min) during the measured "
        f"phases: {load_text} (on 2 vCPU, above ~1.5 means other work competed for the CPUs)."
    )
    args = results.get("args", {})
    lines.append(
        f"Settings: {args.get('runs')} interleaved rounds, {args.get('warmup')} warm-up turns, "
        f"{args.get('sustained')} sustained turns, {args.get('sessions')} sessions of "
        f"{args.get('session_turns')} turns; shapes {args.get('shapes')}."
    )
    lines.append("")

    # --- headline
    lines.append(f"### Headline: turn shape {head} ({k + 1} model calls + {k * m} tool calls = {steps} steps)")
    lines.append("")
    lines.append(
        "| configuration | durable steps (engine's record) | median ms | min / max ms | p90 ms "
        "| overhead per step ms | Worker CPU per step ms | server CPU per step ms | client CPU per step ms "
        "| sustained median ms (overhead/step) |"
    )
    lines.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = summary["shapes"].get(head, {})
    for c in configs:
        if c not in rows:
            reason = unavailable.get(c, "no samples")
            lines.append(f"| {LABELS.get(c, c)} | **not run**: {reason} | | | | | | | | |")
            continue
        row = rows[c]
        w = row["wall"]
        check = "no engine" if c == "plain" else (("✓ " if row["steps_ok"] else "✗ ") + _short_steps(c, row))
        per = ms(row.get("overhead_per_step"), 2)
        if row.get("overhead_per_recorded_step") is not None and c in DEX_CONFIGS:
            per += f" ({ms(row['overhead_per_recorded_step'], 2)} per recorded)"
        cpu = row["cpu_per_step"]
        sus = summary["sustained"].get(c)
        sus_text = "-"
        if sus:
            sus_text = ms(sus["wall"]["median"])
            if sus.get("overhead_per_step") is not None:
                sus_text += f" ({ms(sus['overhead_per_step'], 2)})"
        worker = ms(cpu["worker"], 2)
        if c in (*DEX_CONFIGS, *DEX_PROCESS_CONFIGS) and cpu["worker"] is not None and row.get("recorded_steps"):
            worker += f" ({ms(row['cpu_turn']['worker'] / row['recorded_steps'], 2)} per recorded)"
        if c == "plain":
            worker = f"{worker} (floor)"
        elif c == "dex-inproc":
            worker = f"{worker} (all in one)"
        elif c not in DEX_PROCESS_CONFIGS:
            worker = f"{worker} (in process)"
        server = ms(cpu["server"], 2)
        if c in DEX_PROCESS_CONFIGS and cpu["server"] is not None and row.get("recorded_steps"):
            server += f" ({ms(row['cpu_turn']['server'] / row['recorded_steps'], 2)} per recorded)"
        lines.append(
            f"| {LABELS.get(c, c)} | {check} | {ms(w['median'])} | {ms(w['min'])} / {ms(w['max'])} | {ms(w['p90'])} "
            f"| {per} | {worker} | {server} | {ms(cpu['client'], 2)} | {sus_text} |"
        )
    if unavailable:
        for c, reason in unavailable.items():
            if c in rows:
                lines.append(f"| {LABELS.get(c, c)} | **failed during the run**: {reason} | | | | | | | | |")
    lines.append("")

    records = [(c, rows[c]) for c in configs if c in rows and c != "plain"]
    if records and not readme:
        lines.append(f"Step records of one {head} turn, by the engines' own names:")
        lines.append("")
        for c, row in records:
            names = row.get("describe", {}).get("step_names") or {}
            text = ", ".join(f"{n} `{name}`" for name, n in names.items())
            events = row.get("describe", {}).get("live_events")
            if events:
                types = row["describe"].get("live_event_types") or {}
                deltas = types.get("text_delta", 0) + types.get("reasoning_delta", 0)
                mode = row["describe"].get("worker_mode", "pull")
                text += f"; {events} live events (Stream frames) in the turn, {deltas} of them deltas; {mode} Worker"
            lines.append(f"- {c}: {text}")
        lines.append("")

    # --- growth, memory, storage
    growth = summary.get("growth", {})
    if growth:
        n = args.get("session_turns")
        lines.append(
            f"### Growing session: {n} turns of {head}, interleaved turn by turn (median of {args.get('sessions')} "
            "sessions)"
        )
        lines.append("")
        lines.append(
            f"| configuration | turn 1 ms | turn {n} ms | overhead/step turn 1 → {n} ms (x) | same, linear fit (x) "
            f"| Worker CPU/step turn 1 → {n} ms (x) | server CPU/step turn 1 → {n} ms | stored per turn "
            "| max RSS MiB |"
        )
        lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for c in configs:
            g = growth.get(c)
            if g is None:
                lines.append(f"| {LABELS.get(c, c)} | not run | | | | | | | {_rss(results, c)} |")
                continue
            med = g["median_by_turn"]
            over = g.get("overhead_per_step_by_turn")
            over_text = fit_text = "-"
            if over and over[0] is not None and over[-1] is not None:
                over_text = f"{ms(over[0], 2)} → {ms(over[-1], 2)} ({over[-1] / over[0]:.2f}x)"
            if g.get("overhead_fit_turn1"):
                a, b = g["overhead_fit_turn1"], g["overhead_fit_turnN"]
                fit_text = f"{ms(a, 2)} → {ms(b, 2)} ({b / a:.2f}x)"
            cpu = g["worker_cpu_by_turn"]
            cpu_text = "-"
            if cpu and cpu[0] and cpu[-1]:
                cpu_text = f"{ms(cpu[0] / steps, 2)} → {ms(cpu[-1] / steps, 2)} ({cpu[-1] / cpu[0]:.2f}x)"
            srv = g["server_cpu_by_turn"]
            srv_text = "-"
            if srv and srv[0] is not None and srv[-1] is not None:
                srv_text = f"{ms(srv[0] / steps, 2)} → {ms(srv[-1] / steps, 2)}"
            stored = g.get("stored", {})
            stored_text = "-" if stored.get("per_turn") is None else kib(stored["per_turn"])
            if "history_per_turn" in stored:
                stored_text += f" state ({kib(stored['history_per_turn'])} history)"
            if "turn1" in stored:
                stored_text += f" ({kib(stored['turn1'])} → {kib(stored['turnN'])})"
            lines.append(
                f"| {LABELS.get(c, c)} | {ms(med[0])} | {ms(med[-1])} | {over_text} | {fit_text} | {cpu_text} "
                f"| {srv_text} | {stored_text} | {_rss(results, c)} |"
            )
        lines.append("")
        checks = [
            (c, info)
            for c in configs
            for key, info in growth.get(c, {}).get("info", {}).items()
            if key == f"turn{n}" and c != "plain"
        ]
        if checks and not readme:
            lines.append(f"Step records at turn {n} of the last session:")
            lines.append("")
            for c, info in checks:
                mark = "✓" if info.get("steps_ok") else "✗"
                scope = "whole session" if c in DEX_CONFIGS else f"turn {n}'s workflow"
                lines.append(f"- {c} ({scope}): {mark} {info.get('steps_text')}")
            lines.append("")

    if readme:
        return "\n".join(lines)

    # --- shapes
    lines.append("### All turn shapes (interleaved; median ms, overhead per step ms)")
    lines.append("")
    header = "| configuration | " + " | ".join(f"{shape_key(s)} ({steps_of(s)} steps)" for s in shapes)
    lines.append(header + " | fixed per turn ms | marginal per step ms |")
    lines.append("| --- | " + " | ".join("---:" for _ in shapes) + " | ---: | ---: |")
    for c in configs:
        cells = []
        for s in shapes:
            row = summary["shapes"].get(shape_key(s), {}).get(c)
            if row is None:
                cells.append("-")
                continue
            cell = ms(row["wall"]["median"])
            if row.get("overhead_per_step") is not None:
                cell += f" ({ms(row['overhead_per_step'], 2)})"
            if row.get("steps_ok") is False:
                cell += " ✗steps"
            cells.append(cell)
        fit = summary["fit"].get(c)
        fixed = ms(fit["fixed_per_turn"]) if fit else "-"
        marginal = ms(fit["per_step"], 2) if fit else "-"
        lines.append(f"| {LABELS.get(c, c)} | " + " | ".join(cells) + f" | {fixed} | {marginal} |")
    lines.append("")

    idle = results.get("idle_cpu_per_s", {})
    if idle:
        parts = []
        for name, rates in idle.items():
            parts.append(name + " " + ", ".join(f"{role} {v * 1000:.2f}" for role, v in rates.items()))
        lines.append("Idle CPU while every configuration waits (ms of CPU per s): " + "; ".join(parts) + ".")
        lines.append("")
    return "\n".join(lines)


TEMPORAL_CONFIGS = ("temporal", "temporal-tuned", "temporal-tuned-nosandbox")
"""The README's summary shows the best of these three set-ups as "Temporal"."""

_FLOORS = ("sdk-floor", "sdk-floor-store", "sdk-floor-agent")


def additive_floor(rows: dict[str, Any]) -> float | None:
    """Worker CPU per durable step the SDK's floors add up to: ``sdk-floor``, plus what storing and the agent add.

    ``sdk-floor`` + (``sdk-floor-store`` - ``sdk-floor``) + (``sdk-floor-agent`` - ``sdk-floor``), from one
    shape's rows; ``None`` when the run lacks one of the three.
    """
    worker = {c: (rows.get(c) or {}).get("cpu_per_step", {}).get("worker") for c in _FLOORS}
    base, store, agent = (worker[c] for c in _FLOORS)
    if base is None or store is None or agent is None:
        return None
    return float(store + agent - base)


def render_summary(results: dict[str, Any], shapes: Sequence[tuple[int, int]]) -> str:
    """The README's few lines: median turn per shape for ``dex`` and its peers, the Worker CPU ratio, the load."""
    summary = results["summary"]["shapes"]
    loads = sorted(results.get("load_during") or [])
    load = f"load average median {statistics.median(loads):.2f}, max {loads[-1]:.2f}" if loads else "load not recorded"
    lines = [
        f"`make bench-peers` of {results.get('date')} (source {results.get('source', 'unknown')}, "
        f"{results.get('machine', {}).get('cpus')} vCPU, {load}); median turn in ms, lower is better:",
        "",
        "| turn shape | dex-agents (dev server on SQLite) | DBOS (SQLite) | Temporal (best set-up) "
        "| plain `agent.run` |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for shape in shapes:
        rows = summary.get(shape_key(shape), {})

        def median(c: str, rows: dict[str, Any] = rows) -> float | None:
            row = rows.get(c)
            return None if row is None else float(row["wall"]["median"])

        temporal = [t for t in (median(c) for c in TEMPORAL_CONFIGS) if t is not None]
        cells = [median("dex"), median("dbos"), min(temporal) if temporal else None, median("plain")]
        label = f"{shape[0]}x{shape[1]} ({steps_of(shape)} steps)"
        lines.append(f"| {label} | " + " | ".join(ms(c) for c in cells) + " |")
    head = summary.get(shape_key(shapes[0]), {})
    floor = additive_floor(head)
    dex_worker = (head.get("dex") or {}).get("cpu_per_step", {}).get("worker")
    if floor is not None and dex_worker is not None:
        lines += [
            "",
            f"Worker CPU per durable step on {shape_key(shapes[0])}: {ms(dex_worker, 2)} ms, "
            f"{dex_worker / floor:.2f}x the SDK's additive floor of the same run ({ms(floor, 2)} ms).",
        ]
    return "\n".join(lines)


SUMMARY_BEGIN = "<!-- bench-peers-summary:begin (generated by python -m benchmarks.peers.bench --summary) -->"
SUMMARY_END = "<!-- bench-peers-summary:end -->"


README_BEGIN = "<!-- bench-peers:begin (generated by python -m benchmarks.peers.bench --readme) -->"
README_END = "<!-- bench-peers:end -->"


def replace_readme_block(text: str, block: str, *, markers: tuple[str, str] = (README_BEGIN, README_END)) -> str:
    """Put ``block`` between a page's ``markers`` (the bench-peers ones by default), which must exist."""
    first, last = markers
    begin, end = text.find(first), text.find(last)
    if begin < 0 or end < begin:
        raise ValueError(f"the page needs the markers {first!r} and {last!r}")
    return text[: begin + len(first)] + "\n" + block.rstrip() + "\n" + text[end:]
