"""The probes, one per assumption, and the command that prints their verdicts.

Each probe returns a `Finding`; a probe that raises or runs past its time limit
becomes ``could not be checked``. The redelivery probes run first, with only the
child Worker connected, so the probe's own Worker cannot take their tasks
(they are in `_redelivery`; what a probe reports is in `_findings`).
"""

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path

import dex
import grpc  # type: ignore[import-untyped]

from dex_agents.domain.shown_text import visible
from dex_agents.testing.conformance._findings import (
    PROBE_TIME_LIMIT,
    Finding,
    Verdict,
    _differs,
    _Env,
    _holds,
    _output,
    _wait_event,
    exit_code,
    format_finding,
)
from dex_agents.testing.conformance._flows import (
    BACK_OFF,
    EVENTS,
    FAILED_ONCE,
    HOLDING,
    RELEASE,
    SMALL,
    STREAMED,
    TIMER,
    ProbeFlow,
    event,
    make_registry,
    open_cache,
    streamed_value,
    worker_options,
)
from dex_agents.testing.conformance._redelivery import REDELIVER_BEFORE, RETRY_AFTER, finish_doomed, start_doomed
from dex_agents.testing.devserver import read_history_events

STREAM_MESSAGE_LIMIT = 100 * 1024
"""The Stream message limit dex-agents assumes (its events stay under 64 KiB)."""


# --------------------------------------------------------------------------- probes with the probe Worker

LOCK_BACK_OFF = "a Step keeps its lock through its retry back-off"


async def probe_lock_during_back_off(env: _Env) -> Finding:
    flow_id = await env.start("backoff", "flaky")
    await _wait_event(event(FAILED_ONCE, flow_id), 30, "the first attempt's failure")
    await asyncio.sleep(0.3)  # the failure reaches the server
    try:
        await env.client.invoke_rpc(env.flow.locked_write, flow_id, "during back-off")
    except dex.RpcLockConflictError:
        verdict = _holds(LOCK_BACK_OFF)
    else:
        verdict = _differs(LOCK_BACK_OFF, f"a locked RPC ran inside the {BACK_OFF.total_seconds():g} s back-off")
    await _settle_parked(env, flow_id)
    return verdict


async def _settle_parked(env: _Env, flow_id: str) -> None:
    """Feed the Parked Step until the Flow completes (retrying lock conflicts)."""
    await _locked_write(env, flow_id, "done")
    await _output(env, flow_id)


async def _publish_extras(env: _Env, flow_id: str, *values: str) -> None:
    """Publish ``values`` to the EXTRA Channel, one RPC each, in order."""
    for value in values:
        await env.client.invoke_rpc(env.flow.publish_extra, flow_id, value)


async def _locked_write(env: _Env, flow_id: str, value: str) -> None:
    """Publish ``value`` to the inbox through the locking RPC, retrying while the probe Step holds the lock."""
    deadline = time.monotonic() + 60
    while True:
        try:
            await env.client.invoke_rpc(env.flow.locked_write, flow_id, value)
            return
        except dex.RpcLockConflictError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


LOCK_CONFLICT = "an RPC needing a lock a Step holds fails at once with RpcLockConflictError"


async def probe_lock_conflict(env: _Env) -> Finding:
    flow_id = await env.start("conflict", "hold")
    await _wait_event(event(HOLDING, flow_id), 30, "the Step taking its lock")
    started = time.monotonic()
    try:
        await env.client.invoke_rpc(env.flow.locked_write, flow_id, "now")
    except dex.RpcLockConflictError:
        took = time.monotonic() - started
        verdict = _holds(LOCK_CONFLICT) if took < 5 else _differs(LOCK_CONFLICT, f"the conflict took {took:.1f} s")
    else:
        verdict = _differs(LOCK_CONFLICT, "the RPC ran while the Step held the lock")
    event(RELEASE, flow_id).set()
    await _settle_parked(env, flow_id)
    return verdict


CLOSED_QUERY = "a query-only RPC with an AttributeMap load answers for a closed Flow"


async def probe_closed_query(env: _Env) -> Finding:
    flow_id = await env.start("closed", "items")
    await _output(env, flow_id)
    keys = await env.client.invoke_rpc(env.flow.item_keys, flow_id)
    if list(keys) == ["a"]:
        return _holds(CLOSED_QUERY)
    return _differs(CLOSED_QUERY, f"the loaded map had keys {list(keys)!r}, expected ['a']")


BLOBS = "values over 1 KiB (blob offload, LoadBlobs) reach Workers and RPCs intact"


async def probe_large_values(env: _Env) -> Finding:
    flow_id = env.flow_id("blob")
    value = "".join(f"{i:06d}" for i in range(64 * 1024 // 6))
    await env.client.start_flow(env.flow, flow_id, f"big:{value}")
    echoed = await _output(env, flow_id)
    read = await env.client.invoke_rpc(env.flow.read_big, flow_id)
    if echoed == value and read == value:
        return _holds(BLOBS)
    return _differs(BLOBS, f"a {len(value)}-character value came back as {len(echoed)} / {len(read)} characters")


STREAM_LIMIT = "a Stream message over 100 KiB is rejected, one under it is kept"


async def probe_stream_message_limit(env: _Env) -> Finding:
    flow_id = env.flow_id("stream-limit")
    await env.client.write_stream(flow_id, EVENTS, "probe#1", "x" * (STREAM_MESSAGE_LIMIT - 1024))
    try:
        await env.client.write_stream(flow_id, EVENTS, "probe#1", "x" * (STREAM_MESSAGE_LIMIT + 1024))
    except dex.DexServiceError:
        return _holds(STREAM_LIMIT)
    return _differs(STREAM_LIMIT, "a 101 KiB message was accepted")


STREAM_READ_BACK = "a Stream message a Step wrote is readable through a Client while that Step still runs"

READ_BACK_WITHIN = 30.0
"""Seconds the read-back probe reads for: the delivery ledger's confirm timeout, after which it fails the attempt."""


async def probe_stream_read_back(env: _Env) -> Finding:
    """What the single-attempt delivery ledger relies on: a Step's own ``tool_call_started`` reads back mid-Step."""
    flow_id = env.flow_id("read-back")
    expected = streamed_value(flow_id)
    await env.client.start_flow(env.flow, flow_id, "stream")
    await _wait_event(event(STREAMED, flow_id), 30, "the Step writing its Stream message")
    deadline = time.monotonic() + READ_BACK_WITHIN
    seen = False
    try:
        while not seen and time.monotonic() < deadline:
            page = await env.client.list_stream_messages(flow_id, EVENTS, 10)
            seen = any(message.value == expected for message in page.messages)
            if not seen:
                await asyncio.sleep(0.1)
    finally:
        event(RELEASE, flow_id).set()
    await _output(env, flow_id)
    if seen:
        return _holds(STREAM_READ_BACK)
    return _differs(STREAM_READ_BACK, f"not readable within {READ_BACK_WITHIN:g} s while the Step ran")


STREAM_CAPACITY = "a Stream trims its oldest messages and rejects a write past its capacity"


async def probe_stream_capacity(env: _Env) -> Finding:
    flow_id = env.flow_id("stream-cap")
    for index in range(12):
        await env.client.write_stream(flow_id, SMALL, "probe#1", f"m-{index}")
    page = await env.client.list_stream_messages(flow_id, SMALL, 100)
    kept = [m.value for m in page.messages]
    if not kept or kept[0] != "m-11" or len(kept) >= 12:
        return _differs(STREAM_CAPACITY, f"after 12 writes to a 4000-byte Stream it keeps {len(kept)} messages")
    try:
        await env.client.write_stream(flow_id, SMALL, "probe#1", "y" * 3000)
    except dex.DexServiceError:
        return _holds(STREAM_CAPACITY)
    return _differs(STREAM_CAPACITY, "a write past the capacity was accepted")


HISTORY = "history has flow_started, step_execute_completed and flow_closed events"


async def probe_history(env: _Env) -> Finding:
    flow_id = await env.start("history", "plain")
    await _output(env, flow_id)
    events = await read_history_events(env.address, flow_id)
    seen = {kind for kind in (e.WhichOneof("payload") for e in events) if kind}
    needed = {"flow_started_or_continued", "step_execute_completed", "flow_closed"}
    if needed <= seen:
        return _holds(HISTORY)
    return _differs(HISTORY, f"events seen: {sorted(seen)}")


CLOSING = "a CANCEL closes asynchronously; requests while it closes get FlowClosingError"


async def probe_flow_closing(env: _Env) -> Finding:
    flow_id = await env.start("closing", "park")
    await asyncio.sleep(0.5)
    await env.client.stop_flow(flow_id, dex.StopFlowOptions(type=dex.StopType.CANCEL, reason="probe"))
    try:
        await env.client.stop_flow(flow_id, dex.StopFlowOptions(type=dex.StopType.CANCEL))
    except dex.FlowClosingError:
        verdict = _holds(CLOSING)
    except dex.FlowNotActiveOrNotFoundError:
        verdict = Finding(CLOSING, Verdict.UNCHECKED, "the Flow had closed before the second request")
    else:
        verdict = _differs(CLOSING, "a second CANCEL of a closing Flow was accepted")
    result = await env.client.wait_for_flow(flow_id, timeout=timedelta(seconds=30))
    if result.status is not dex.FlowStatus.CANCELED:
        return _differs(CLOSING, f"the cancelled Flow ended {result.status.name}")
    return verdict


TIMER_FIRES = "a Timer fires after its duration on the server's clock"
EARLY_SKIP = "skip_timer for a Step that does not wait yet is rejected (INVALID_ARGUMENT)"


async def probe_early_skip(env: _Env) -> Finding:
    flow_id = await env.start("early-skip", "park")
    try:
        await env.client.skip_timer(flow_id, dex.StepExecutionId("Timed", 1), dex.TimerId(condition_index=0))
    except dex.DexServiceError as error:
        verdict = (
            _holds(EARLY_SKIP)
            if error.code is grpc.StatusCode.INVALID_ARGUMENT
            else _differs(EARLY_SKIP, f"rejected with {error.code.name}")
        )
    else:
        verdict = _differs(EARLY_SKIP, "the skip was accepted")
    await _settle_parked(env, flow_id)
    return verdict


async def probe_timer(env: _Env) -> Finding:
    flow_id = env.flow_id("timer")
    started = time.monotonic()
    await env.client.start_flow(env.flow, flow_id, "timer")
    await _output(env, flow_id)
    took = time.monotonic() - started
    if took >= TIMER.total_seconds() * 0.9:
        return _holds(TIMER_FIRES)
    return _differs(TIMER_FIRES, f"a {TIMER.total_seconds():g} s Timer fired after {took:.1f} s")


GATHER = "a wait all_of(for_one, at_most(n)) takes the messages queued by then without waiting for more"


async def probe_gather(env: _Env) -> Finding:
    flow_id = await env.start("gather", "gather")
    await _publish_extras(env, flow_id, "a", "b")
    await _locked_write(env, flow_id, "x")
    output = await _output(env, flow_id)
    if output == "x|a,b":
        return _holds(GATHER)
    return _differs(GATHER, f"the Step got {output!r}, expected 'x|a,b'")


SKIM = "a wait of at_most(n) alone completes at once, on an empty Channel too"


async def probe_skim(env: _Env) -> Finding:
    flow_id = await env.start("skim", "skim")
    output = await _output(env, flow_id)
    if output == "skim|":
        return _holds(SKIM)
    return _differs(SKIM, f"the Step got {output!r}, expected 'skim|'")


WITHDRAW = "an RPC lists a Channel's pending messages (load_channels) and deletes one"


async def probe_withdraw(env: _Env) -> Finding:
    flow_id = await env.start("withdraw", "park")
    await _publish_extras(env, flow_id, "a", "b")
    removed = await env.client.invoke_rpc(env.flow.withdraw_extra, flow_id, "a")
    again = await env.client.invoke_rpc(env.flow.withdraw_extra, flow_id, "a")
    pending = await env.client.invoke_rpc(env.flow.pending_extra, flow_id)
    left = list(pending)
    await _settle_parked(env, flow_id)
    if (removed, again, left) == (True, False, ["b"]):
        return _holds(WITHDRAW)
    return _differs(WITHDRAW, f"withdraw answered {removed!r} then {again!r}; pending {left!r}, expected ['b']")


FIRST_ATTEMPT_AT = "the server sets a method's first_attempt_at (its clock; within 5 min of this machine's)"


async def probe_first_attempt_at(env: _Env) -> Finding:
    flow_id = env.flow_id("stamp")
    before = time.time()
    await env.client.start_flow(env.flow, flow_id, "stamp")
    stamped = float(await _output(env, flow_id) or 0)
    after = time.time()
    if before - 300 <= stamped <= after + 300:
        return _holds(FIRST_ATTEMPT_AT)
    return _differs(FIRST_ATTEMPT_AT, f"first_attempt_at was {stamped:.0f}, this machine said {before:.0f}")


# --------------------------------------------------------------------------- running

Probe = Callable[[_Env], Awaitable[Finding]]

PROBES: tuple[tuple[str, Probe], ...] = (
    (LOCK_CONFLICT, probe_lock_conflict),
    (LOCK_BACK_OFF, probe_lock_during_back_off),
    (CLOSED_QUERY, probe_closed_query),
    (BLOBS, probe_large_values),
    (STREAM_LIMIT, probe_stream_message_limit),
    (STREAM_CAPACITY, probe_stream_capacity),
    (STREAM_READ_BACK, probe_stream_read_back),
    (HISTORY, probe_history),
    (CLOSING, probe_flow_closing),
    (TIMER_FIRES, probe_timer),
    (EARLY_SKIP, probe_early_skip),
    (GATHER, probe_gather),
    (SKIM, probe_skim),
    (WITHDRAW, probe_withdraw),
    (FIRST_ATTEMPT_AT, probe_first_attempt_at),
)

NOT_PROBED: tuple[str, ...] = ()
"""Assumptions the probe lists but does not check yet."""


async def _guarded(assumption: str, probe: Awaitable[Finding]) -> Finding:
    try:
        return await asyncio.wait_for(probe, PROBE_TIME_LIMIT)
    except TimeoutError:
        return Finding(assumption, Verdict.UNCHECKED, f"no answer within {PROBE_TIME_LIMIT:g} s")
    except Exception as error:  # noqa: BLE001 - every failure of a probe is a finding, not a crash
        return Finding(assumption, Verdict.UNCHECKED, f"{type(error).__name__}: {error}")


async def run_probes(address: str, *, report: Callable[[Finding], None] | None = None) -> list[Finding]:
    """Run every probe against the Dex server at ``address`` and return the findings in order."""
    findings: list[Finding] = []

    def found(finding: Finding) -> None:
        findings.append(finding)
        if report is not None:
            report(finding)

    flow = ProbeFlow()
    with tempfile.TemporaryDirectory(prefix="dex-conformance-") as directory:
        work = Path(directory)
        client_cache = open_cache(work / "client-cache")
        client = dex.AsyncClient(make_registry(flow), client_cache, dex.ClientOptions(server_address=address))
        try:
            env = _Env(client, flow, address, f"conformance-{uuid.uuid4().hex[:8]}")
            doomed: tuple[str, str] | None = None
            try:
                doomed = await asyncio.wait_for(start_doomed(env, work), PROBE_TIME_LIMIT)
            except Exception as error:  # noqa: BLE001 - reported as not checked
                for assumption in (REDELIVER_BEFORE, RETRY_AFTER):
                    found(Finding(assumption, Verdict.UNCHECKED, f"{type(error).__name__}: {error}"))
            worker_cache = open_cache(work / "worker-cache")
            worker = dex.AsyncWorker(make_registry(flow), worker_cache, worker_options(address))
            task = asyncio.create_task(worker.start())
            try:
                await worker.wait_pull_registered(timeout=30)
                if doomed is not None:
                    for finding in await finish_doomed(env, *doomed):
                        found(finding)
                for assumption, probe in PROBES:
                    found(await _guarded(assumption, probe(env)))
            finally:
                await worker.stop()
                await task
                worker_cache.close()
            for assumption in NOT_PROBED:
                found(Finding(assumption, Verdict.UNCHECKED, "no probe yet"))
        finally:
            await client.close()
            client_cache.close()
    return findings


async def run_conformance(address: str, write: Callable[[str], None]) -> int:
    """Run the probes, write one line per assumption, and return the exit code.

    Every line shows control characters visibly (`format_finding`; the address as given is passed through
    `visible` too): what a finding quotes comes from the server, and a terminal would run it.
    """
    write(f"Dex conformance probe against {visible(address)}")
    findings = await run_probes(address, report=lambda finding: write(format_finding(finding)))
    differing = sum(f.verdict is Verdict.DIFFERS for f in findings)
    unchecked = sum(f.verdict is Verdict.UNCHECKED for f in findings)
    write(f"{len(findings) - differing - unchecked} hold, {differing} differ, {unchecked} could not be checked")
    return exit_code(findings)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dex_agents.testing.conformance --server HOST:PORT``."""
    parser = argparse.ArgumentParser(
        prog="python -m dex_agents.testing.conformance",
        description="Check the Dex server rules dex-agents relies on; exit 1 when one differs.",
    )
    parser.add_argument("--server", required=True, help="the Dex server's HOST:PORT")
    args = parser.parse_args(argv)

    def write(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    return asyncio.run(run_conformance(args.server, write))


if __name__ == "__main__":
    raise SystemExit(main())
