"""CPU and memory of benchmark processes.

- `proc_cpu_s` / `proc_mem_kib` read any process's ``/proc`` entry (Linux). ``/proc`` counts CPU
  in clock ticks (10 ms here), too coarse for a few milliseconds per turn, so it is used only
  for the Temporal dev server (a Go binary) and as a cross-check.
- A *CPU probe* gives the exact CPU time of a Python child process: the child calls
  `serve_cpu_probe_from_env` at start-up, which starts a thread that answers each request byte
  on a pipe with ``time.process_time_ns()`` (all threads of the child, nanoseconds). The parent
  holds a `CpuProbe`, passes its pipe ends with `CpuProbe.child_fds` and reads with
  `CpuProbe.read`. An idle probe thread blocks in ``read(2)`` and costs nothing.
"""

import contextlib
import os
import threading
import time

PROBE_ENV = "PEERBENCH_CPU_PROBE_FDS"
"""``"<request fd>,<reply fd>"`` of a child's CPU probe pipes."""


def proc_cpu_s(pid: int) -> float | None:
    """User+system CPU seconds of a process from ``/proc`` (tick resolution), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def proc_mem_kib(pid: int) -> dict[str, int]:
    """``{"VmRSS": KiB, "VmHWM": KiB}`` (current and peak resident set) of a live process."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        pass
    return out


def serve_cpu_probe_from_env() -> None:
    """In a child: answer CPU probe requests on the pipes named by ``PEERBENCH_CPU_PROBE_FDS``."""
    spec = os.environ.pop(PROBE_ENV, "")
    if not spec:
        return
    request_fd, reply_fd = (int(x) for x in spec.split(","))

    def answer() -> None:
        while os.read(request_fd, 1):
            os.write(reply_fd, f"{time.process_time_ns()}\n".encode())

    threading.Thread(target=answer, name="peerbench-cpu-probe", daemon=True).start()


class CpuProbe:
    """The parent's end of one child's CPU probe."""

    def __init__(self) -> None:
        self._child_request, self._request = os.pipe()
        self._reply, self._child_reply = os.pipe()
        self._buffer = b""

    def child_env(self) -> dict[str, str]:
        """Environment entries for the child."""
        return {PROBE_ENV: f"{self._child_request},{self._child_reply}"}

    def child_fds(self) -> tuple[int, int]:
        """File descriptors to pass to the child (``pass_fds``)."""
        return (self._child_request, self._child_reply)

    def started(self) -> None:
        """Close the child's ends in the parent once the child runs."""
        os.close(self._child_request)
        os.close(self._child_reply)

    def read(self) -> float:
        """The child's CPU seconds so far (all threads); blocks until it answers."""
        os.write(self._request, b"?")
        while b"\n" not in self._buffer:
            chunk = os.read(self._reply, 64)
            if not chunk:
                raise RuntimeError("the CPU probe's child exited")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return int(line) / 1e9

    def close(self) -> None:
        """Close the parent's ends (the child's probe thread then ends)."""
        for fd in (self._request, self._reply):
            with contextlib.suppress(OSError):
                os.close(fd)
