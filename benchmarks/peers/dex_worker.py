"""The dex Worker child of the ``dex`` configuration: ``run_agent_worker`` with the bench agent's Flow.

Started by `benchmarks.peers.app_dex.DexProcessRunner` with the server address and ready file in
the environment (``dex_agents.testing.stack`` conventions) and a CPU probe pipe.
"""

import os

from benchmarks.peers.app_dex import FLOOR_ENV, MAX_CONCURRENT_TASKS, build_flow
from benchmarks.peers.procstat import serve_cpu_probe_from_env
from dex_agents.testing import run_agent_worker


def main() -> None:
    """Serve the bench agent's Flow until SIGTERM."""
    serve_cpu_probe_from_env()
    run_agent_worker([build_flow(floor=os.environ.get(FLOOR_ENV) == "1")], max_concurrent_tasks=MAX_CONCURRENT_TASKS)


if __name__ == "__main__":
    main()
