"""The dev server as a child process, with a CPU probe: ``python -m dex_agents.devserver`` plus one thread.

Same arguments and output as ``python -m dex_agents.devserver`` (the first stdout line is
the bound address); the probe thread only answers CPU-time requests from the benchmark.
"""

import sys

from benchmarks.peers.procstat import serve_cpu_probe_from_env
from dex_agents.devserver.__main__ import main as devserver_main


def main() -> int:
    """Serve the dev server until SIGTERM."""
    serve_cpu_probe_from_env()
    return devserver_main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
