"""One benchmark configuration in its own process, driven by bench.py over stdin/stdout (JSON lines).

Running each configuration in its own process keeps max RSS per configuration honest and stops one
engine's background threads from disturbing another; bench.py interleaves the measured turns.

Commands (one JSON object per line) and replies:

- ``{"cmd": "turn" | "session_turn", "k", "m", "describe": bool}`` → ``{"t", "cpu", "marks0",
  ["marks_settled", "describe"]}``: wall seconds and this process's CPU seconds around the turn,
  and the CPU marks (`cpu_marks`) taken just before it. With ``describe``, the worker waits
  ``SETTLE_S``, takes ``marks_settled``, then asks the engine what it recorded.
- ``{"cmd": "marks", "settle": s}`` → ``{"marks0"}`` after sleeping ``s`` (closes a CPU cycle).
- ``{"cmd": "session_reset"}``, ``{"cmd": "stats"}`` (memory), ``{"cmd": "quit"}``.
"""

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from typing import Any

from benchmarks.peers.runners import Runner
from benchmarks.peers.steps import SDK_FLOOR_CONFIGS

SETTLE_S = 0.2
"""How long a describing turn waits for the engine to go idle before its closing CPU marks."""


def make_runner(name: str) -> Runner:
    """Return the runner of one configuration (imports only what it needs)."""
    if name == "plain":
        from benchmarks.peers.app_plain import PlainRunner

        return PlainRunner()
    if name == "dbos":
        from benchmarks.peers.app_dbos import DBOSRunner

        return DBOSRunner()
    if name in ("temporal", "temporal-tuned", "temporal-tuned-nosandbox"):
        from benchmarks.peers.app_temporal import TemporalRunner

        return TemporalRunner(name, sandboxed=name != "temporal-tuned-nosandbox")
    if name in ("dex", "dex-live", "dex-inmemory", "dex-floor"):
        from benchmarks.peers.app_dex import DexProcessRunner

        return DexProcessRunner(floor=name == "dex-floor", in_memory=name == "dex-inmemory", live=name == "dex-live")
    if name in SDK_FLOOR_CONFIGS:
        from benchmarks.peers.sdk_floor import SdkFloorRunner

        return SdkFloorRunner(name)
    if name == "dex-inproc":
        from benchmarks.peers.app_dex import DexInProcessRunner

        return DexInProcessRunner()
    raise SystemExit(f"unknown configuration {name!r}")


def _rss_now_kib() -> int | None:
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _marks(runner: Runner) -> dict[str, float]:
    """CPU seconds so far: this process (``self``), the runner's children, and the wall clock."""
    return {"wall": time.perf_counter(), "self": time.process_time(), **runner.cpu_marks()}


async def main() -> None:
    """Serve commands until ``quit`` or end of input."""
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--temporal-address", default="127.0.0.1:7233")
    args = parser.parse_args()

    # Keep stdout for the protocol; anything a library prints goes to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def reply(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    from benchmarks.peers.scenario import make_prompt

    try:
        runner = make_runner(args.config)
        t0 = time.perf_counter()
        await runner.start(args)
    except Exception as e:  # noqa: BLE001 - reported to bench.py, which shows it in the table
        import traceback

        traceback.print_exc()
        reply({"error": f"start failed: {type(e).__name__}: {e}"})
        return
    reply({"ready": True, "startup_s": time.perf_counter() - t0, "rss_kib": _rss_now_kib(), "pids": runner.pids()})

    session_turn = 0
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        cmd = json.loads(line)
        kind = cmd["cmd"]
        try:
            if kind in ("turn", "session_turn"):
                turn_no = 1
                if kind == "session_turn":
                    session_turn += 1
                    turn_no = session_turn
                prompt = make_prompt(cmd["k"], cmd["m"], turn_no)
                marks0 = _marks(runner)
                c0 = time.process_time()
                t0 = time.perf_counter()
                if kind == "turn":
                    ref = await runner.fresh_turn(prompt)
                else:
                    ref = await runner.session_turn(prompt)
                wall = time.perf_counter() - t0
                cpu = time.process_time() - c0
                res: dict[str, Any] = {"t": wall, "cpu": cpu, "marks0": marks0, "turn": turn_no}
                if cmd.get("describe"):
                    await asyncio.sleep(SETTLE_S)
                    res["marks_settled"] = _marks(runner)
                    res["describe"] = await runner.describe(ref, session=kind == "session_turn")
                reply(res)
            elif kind == "marks":
                await asyncio.sleep(float(cmd.get("settle", 0.0)))
                reply({"marks0": _marks(runner)})
            elif kind == "session_reset":
                runner.reset_session()
                session_turn = 0
                reply({"ok": True})
            elif kind == "stats":
                ru = resource.getrusage(resource.RUSAGE_SELF)
                reply({"max_rss_kib": ru.ru_maxrss, "rss_kib": _rss_now_kib(), "children": runner.memory()})
            elif kind == "quit":
                await runner.stop()
                reply({"ok": True})
                break
            else:
                reply({"error": f"unknown command {kind!r}"})
        except Exception as e:  # noqa: BLE001 - reported to bench.py
            import traceback

            traceback.print_exc()
            reply({"error": f"{type(e).__name__}: {e}"})


if __name__ == "__main__":
    asyncio.run(main())
