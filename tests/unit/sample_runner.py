"""Runs documentation samples, each in a fresh process forked from one interpreter that imported the library.

Importing ``dex_agents`` and ``pydantic_ai`` costs seconds of CPU per interpreter, more than most
samples take to run, so this process imports them once and forks a child per sample. The child
starts from a clean ``__main__`` namespace: a sample that lacks an import still fails, as with
``python -c``. Protocol: one JSON request per stdin line (``code``, ``cwd``, ``env``,
``timeout``), one JSON reply per stdout line (``returncode``, ``stdout``, ``stderr``;
``returncode`` is ``None`` when the sample ran out of time and was killed).
"""

import atexit
import contextlib
import importlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback

PRELOADED = (
    "dex",
    "dex_agents",
    "dex_agents.testing",
    "pydantic_ai",
    "dex_agents.adapters.pydantic_ai",
    "sagent.agent.agent",
    "dex_agents.adapters.sagent",
)
"""Imported once here when installed (sagent only on Python 3.13+)."""


def preload() -> None:
    for name in PRELOADED:
        with contextlib.suppress(Exception):  # not installed here: the sample imports it itself
            importlib.import_module(name)


def run_child(code: str, cwd: str, env: dict[str, str], out_path: str, err_path: str) -> None:
    """Run ``code`` as ``__main__`` in this (forked) process and exit with its status; never returns."""
    status = 0
    atexit._clear()  # the exit handlers are the sample's own, not this runner's
    try:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        for fd, path in ((1, out_path), (2, err_path)):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own descriptors
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        sys.argv = ["-c"]
        sys.path[0] = ""  # as for ``python -c``: the working directory
        signal.signal(signal.SIGINT, signal.default_int_handler)
        exec(compile(code, "<sample>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported as the interpreter would
        traceback.print_exc()
        status = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def run(request: dict[str, object]) -> dict[str, object]:
    code, cwd, env, timeout = request["code"], request["cwd"], request["env"], request["timeout"]
    assert isinstance(code, str)
    assert isinstance(cwd, str)
    assert isinstance(env, dict)
    assert isinstance(timeout, (int, float))
    scratch = tempfile.mkdtemp(prefix="sample-")
    try:
        out_path, err_path = os.path.join(scratch, "out"), os.path.join(scratch, "err")
        for path in (out_path, err_path):
            open(path, "w").close()
        pid = os.fork()
        if pid == 0:
            run_child(code, cwd, env, out_path, err_path)
        deadline = time.monotonic() + timeout
        returncode: int | None = None
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                returncode = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.02)
        with open(out_path, errors="replace") as out, open(err_path, errors="replace") as err:
            return {"returncode": returncode, "stdout": out.read(), "stderr": err.read()}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    preload()
    for line in sys.stdin:
        reply = run(json.loads(line))
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
