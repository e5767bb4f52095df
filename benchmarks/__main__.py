"""Run every benchmark of this folder: ``python -m benchmarks`` (what ``make bench`` runs).

A benchmark is a module ``benchmarks/<name>_bench.py`` runnable as
``python -m benchmarks.<name>_bench``; each runs with its defaults in its own
process, one after the other, and prints its own tables. Modules starting with
``_`` are helpers and ``binding_profile`` is a profiling tool, not a benchmark.
The peer comparison (``benchmarks/peers``) needs its own environment and has its
own command. Exits non-zero when any benchmark failed, after running them all.
"""

import subprocess
import sys
import time
from pathlib import Path

FOLDER = Path(__file__).resolve().parent


def benchmark_modules() -> list[str]:
    """Return the benchmark modules present, in name order."""
    return sorted(f"benchmarks.{path.stem}" for path in FOLDER.glob("*_bench.py") if not path.stem.startswith("_"))


def main() -> int:
    modules = benchmark_modules()
    failed: list[str] = []
    for module in modules:
        print(f"# {module}", flush=True)
        began = time.perf_counter()
        code = subprocess.call([sys.executable, "-m", module], cwd=FOLDER.parent)
        print(f"# {module}: {'ok' if code == 0 else f'failed (exit {code})'} in {time.perf_counter() - began:.0f} s\n")
        if code != 0:
            failed.append(module)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
