"""A warm interpreter that forks Worker children: ``python -m dex_agents.testing._worker_zygote``.

Every Worker child of a test imports the SDK, gRPC, Pydantic AI and this library
before it serves: about two seconds of CPU each, most of what a kill test spends.
The zygote imports them once and forks a child per request, which then runs its
module as ``python -m`` would (``runpy``), in its own session (process group),
working directory, environment and log file. It never opens a channel or starts a
thread before forking, so the children inherit no gRPC state.

Protocol (JSON lines): the parent writes ``{"module", "cwd", "env", "log"}`` to
stdin; the zygote answers ``{"pid": N}``, and ``{"exit": N, "code": C}`` when
child ``N`` ended (``C`` negative for a signal, as `subprocess` reports it). The
zygote ends when its stdin closes, leaving running children to their process
groups.
"""

import json
import os
import runpy
import select
import sys
import traceback
from typing import Any

PRELOADED = (
    "grpc",
    "dex",
    "pydantic",
    "pydantic_ai",
    "pydantic_ai.models.function",
    "dex_agents",
    "dex_agents.adapters.pydantic_ai",
    "dex_agents.testing",
)
"""What the zygote imports before its first fork (the modules every Worker child needs)."""


def _run_child(request: dict[str, Any]) -> int:
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    extra = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:0] = [entry for entry in extra if entry not in sys.path]
    sys.argv = [request["module"]]
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        code = stop.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        sys.stderr.write(f"{code}\n")
        return 1
    except BaseException:  # noqa: BLE001 - the child's last word goes to its log, as an uncaught error would
        traceback.print_exc()
        return 1
    return 0


def _fork(request: dict[str, Any]) -> int:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = _run_child(request)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _reap(out: Any) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        out.write(json.dumps({"exit": pid, "code": code}) + "\n")
        out.flush()


def main() -> None:
    """Import `PRELOADED`, then serve fork requests until stdin closes."""
    for name in PRELOADED:
        __import__(name)
    requests, out = sys.stdin.buffer, sys.stdout
    out.write(json.dumps({"ready": os.getpid()}) + "\n")
    out.flush()
    buffered = b""
    while True:
        readable, _, _ = select.select([requests], [], [], 0.05)
        _reap(out)
        if not readable:
            continue
        chunk = os.read(requests.fileno(), 65536)
        if not chunk:
            return
        buffered += chunk
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            pid = _fork(json.loads(line))
            out.write(json.dumps({"pid": pid}) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
