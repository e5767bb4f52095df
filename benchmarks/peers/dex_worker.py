"""The dex Worker child of the ``dex`` configuration: ``run_agent_worker`` with the bench agent's Flow.

Started by `benchmarks.peers.app_dex.DexProcessRunner` with the server address and ready file in
the environment (``dex_agents.testing.stack`` conventions) and a CPU probe pipe.

With ``PEERBENCH_WORKER_PROFILE=<file>`` in the environment the Worker runs under the stdlib's
cProfile, timed by the CPU time of its event loop's thread (time waiting in ``epoll`` does not
count), and writes the stats to ``<file>.<pid>`` when it stops. The profiler inflates CPU several
times over, so a profiled run's timings are not results; a sampling profiler attached to the
Worker's PID (which bench.py prints) distorts less.
"""

import cProfile
import os
import time

from benchmarks.peers.app_dex import FLOOR_ENV, MAX_CONCURRENT_TASKS, build_flow
from benchmarks.peers.procstat import serve_cpu_probe_from_env
from dex_agents.testing import run_agent_worker

PROFILE_ENV = "PEERBENCH_WORKER_PROFILE"
"""Where a profiled Worker writes its cProfile stats (``<value>.<pid>``); unset: no profiler."""


def main() -> None:
    """Serve the bench agent's Flow until SIGTERM."""
    serve_cpu_probe_from_env()
    flows = [build_flow(floor=os.environ.get(FLOOR_ENV) == "1")]
    target = os.environ.get(PROFILE_ENV)
    if not target:
        run_agent_worker(flows, max_concurrent_tasks=MAX_CONCURRENT_TASKS)
        return
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    try:
        run_agent_worker(flows, max_concurrent_tasks=MAX_CONCURRENT_TASKS)
    finally:
        profile.disable()
        profile.dump_stats(f"{target}.{os.getpid()}")


if __name__ == "__main__":
    main()
