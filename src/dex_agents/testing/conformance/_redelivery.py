"""The redelivery probes: a child Worker SIGKILLed before and after its first output, and its attempts' fate."""

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from dex_agents.testing.conformance._findings import PROBE_TIME_LIMIT, Finding, Verdict, _differs, _Env, _holds, _output
from dex_agents.testing.conformance._flows import (
    DOOMED_DIR_ENV,
)

# --------------------------------------------------------------------------- redelivery (child Worker)

REDELIVER_BEFORE = "an attempt whose Worker died before its first output is dispatched again (same attempt)"
RETRY_AFTER = "an attempt whose Worker died after output fails and is retried (next attempt)"


async def _start_child(address: str, work: Path) -> asyncio.subprocess.Process:
    env = dict(os.environ, **{DOOMED_DIR_ENV: str(work)})
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dex_agents.testing.conformance._worker",
        "--server",
        address,
        "--cache",
        str(work / "child-cache"),
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), 30)
    if line.strip() != b"ready":
        child.kill()
        raise RuntimeError("the child Worker did not start")
    return child


async def _marker(path: Path, within: float) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the child Worker never reached {path.name}")
        await asyncio.sleep(0.05)


async def start_doomed(env: _Env, work: Path) -> tuple[str, str]:
    """Start both redelivery Flows on a child Worker, wait until both hang, and SIGKILL it."""
    before, after = env.flow_id("die-before"), env.flow_id("die-after")
    child = await _start_child(env.address, work)
    try:
        await env.client.start_flow(env.flow, before, "die-before")
        await env.client.start_flow(env.flow, after, "die-after")
        await _marker(work / f"{before}.reached", 30)
        await _marker(work / f"{after}.reached", 30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGKILL)
        await child.wait()
    return before, after


async def finish_doomed(env: _Env, before: str, after: str) -> list[Finding]:
    """With the probe Worker running, see which attempt finished each redelivery Flow."""
    findings = []
    for flow_id, assumption, expected in ((before, REDELIVER_BEFORE, 1), (after, RETRY_AFTER, 2)):
        try:
            output = await _output(env, flow_id, within=PROBE_TIME_LIMIT)
        except Exception as error:  # noqa: BLE001 - reported as not checked
            findings.append(Finding(assumption, Verdict.UNCHECKED, f"{type(error).__name__}: {error}"))
            continue
        attempt = int(output.removeprefix("attempt="))
        if attempt == expected:
            findings.append(_holds(assumption))
        else:
            findings.append(_differs(assumption, f"it finished on attempt {attempt}, expected {expected}"))
    return findings
