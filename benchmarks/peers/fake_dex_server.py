"""Fake Dex as a child process, with a CPU probe: ``python -m dex_agents.testing.fake_dex`` plus one thread.

Same arguments and output as ``python -m dex_agents.testing.fake_dex`` (the first stdout line is
the bound address); the probe thread only answers CPU-time requests from the benchmark.
"""

import sys

from benchmarks.peers.procstat import serve_cpu_probe_from_env
from dex_agents.testing.fake_dex.__main__ import main as fake_dex_main


def main() -> int:
    """Serve fake Dex until SIGTERM."""
    serve_cpu_probe_from_env()
    return fake_dex_main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
