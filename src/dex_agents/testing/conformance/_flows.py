"""The probe Flow: one Step type and a few RPCs, each input kind probing one server rule.

The same module runs in the probe's own Worker and in the short-lived child Worker
(`dex_agents.testing.conformance._worker`) the redelivery probes SIGKILL. The child
is told apart by ``DEX_CONFORMANCE_DOOMED_DIR``: there, ``die-before`` and
``die-after`` tasks write a marker file and hang (after one heartbeat for
``die-after``), so the probe can kill the Worker at a known point.
"""

import asyncio
import os
from datetime import timedelta
from pathlib import Path

import dex
from dex import (
    AsyncContext,
    Context,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepOptions,
    Timer,
    Wait,
)

DOOMED_DIR_ENV = "DEX_CONFORMANCE_DOOMED_DIR"
"""Set in the child Worker only: the directory its doomed tasks write markers to."""

LOCKED = dex.Attribute("PROBE_LOCKED", str)
BIG = dex.Attribute("PROBE_BIG", str)
ITEMS = dex.AttributeMap("PROBE_ITEMS", str)
INBOX = dex.Channel("PROBE_INBOX", str)
EXTRA = dex.Channel("PROBE_EXTRA", str)
EVENTS = dex.Stream("conformance.events", str, 1024 * 1024)
SMALL = dex.Stream("conformance.small", str, 4000)

BACK_OFF = timedelta(seconds=3)
"""The first retry interval of the probe Step: long enough to call an RPC inside it."""

FAILED_ONCE: dict[str, asyncio.Event] = {}
"""Set (per Flow ID) when the probe Step's first attempt of ``flaky`` fails."""
HOLDING: dict[str, asyncio.Event] = {}
RELEASE: dict[str, asyncio.Event] = {}
STREAMED: dict[str, asyncio.Event] = {}
"""Set (per Flow ID) once the ``stream`` Step wrote its Stream message and beat; it then waits for `RELEASE`."""


def streamed_value(flow_id: str) -> str:
    """The Stream message the ``stream`` Step of ``flow_id`` writes."""
    return f"written by the running Step of {flow_id}"


def event(table: dict[str, asyncio.Event], flow_id: str) -> asyncio.Event:
    """The in-process event of one probe Flow."""
    return table.setdefault(flow_id, asyncio.Event())


class Probe(Step[str]):
    """Does what its input kind asks (``kind`` or ``kind:argument``)."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_lock_attributes=(LOCKED.lock(),),
            execute_retry=RetryPolicy(maximum_attempts=5, initial_interval=BACK_OFF, backoff_coefficient=2.0),
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        kind, _, argument = input.partition(":")
        flow_id = context.flow_id
        doomed = os.environ.get(DOOMED_DIR_ENV)
        if kind in {"die-before", "die-after"} and doomed:
            if kind == "die-after":
                await context.heartbeat("alive")
                await asyncio.sleep(0.5)  # let the heartbeat frame leave before the marker
            Path(doomed, f"{flow_id}.reached").write_text(str(os.getpid()))
            await asyncio.Event().wait()  # parked until the probe SIGKILLs this Worker
        if kind == "flaky" and context.attempt == 1:
            event(FAILED_ONCE, flow_id).set()
            raise RuntimeError("the first attempt fails on purpose")
        if kind == "hold":
            event(HOLDING, flow_id).set()
            await asyncio.wait_for(event(RELEASE, flow_id).wait(), 60)
        if kind == "stream":
            # As CallSingleAttemptTool announces a call: write, await a heartbeat, keep running.
            EVENTS.write(context, streamed_value(flow_id))
            await context.heartbeat("written")
            event(STREAMED, flow_id).set()
            await asyncio.wait_for(event(RELEASE, flow_id).wait(), 60)
        if kind == "big":
            BIG.set(context, argument)
            return dex.go_to(Check, "")
        if kind == "items":
            ITEMS.set(context, "a", "A")
            return dex.graceful_complete("items")
        waiting = _WAITING_STEPS.get(kind)
        if waiting is not None:
            return dex.go_to(waiting, "")
        return dex.graceful_complete(f"attempt={context.attempt}")


class Check(Step[str]):
    """Reads back the large Attribute the previous Step stored."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete(BIG.get(context) or "")


class Parked(Step[str]):
    """Waits for one INBOX message, then completes with it."""

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        return Wait.until(INBOX.for_one())

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete(INBOX.results(context)[0])


TIMER = timedelta(seconds=2)
"""The probe Timer's duration."""


class Timed(Step[str]):
    """Waits on one Timer of `TIMER`, then completes."""

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        return Wait.until(Timer.by_duration(TIMER))

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete("timer")


class Gathered(Step[str]):
    """Waits for one INBOX message and takes whatever EXTRA holds by then (``at_most``), as ``ResumeTurn`` does."""

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        return Wait.all_of(INBOX.for_one(), EXTRA.at_most(10))

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete(f"{INBOX.results(context)[0]}|{','.join(EXTRA.results(context))}")


class Skimmed(Step[str]):
    """Takes whatever EXTRA holds (``at_most`` alone, waiting for nothing), as ``ResumeTurn`` with input 0 does."""

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        return Wait.until(EXTRA.at_most(10))

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete(f"skim|{','.join(EXTRA.results(context))}")


class Stamped(Step[str]):
    """Completes with the ``first_attempt_at`` its wait_for saw (as ``AwaitToolApproval`` reads the engine's time)."""

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        context.set_step_execution_local("first_attempt_at", str(context.first_attempt_at.timestamp()))
        return Wait.skip_immediately()

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete(context.get_step_execution_local("first_attempt_at", str) or "")


_WAITING_STEPS: dict[str, type[Step[str]]] = {
    "park": Parked,
    "flaky": Parked,
    "hold": Parked,
    "timer": Timed,
    "gather": Gathered,
    "stamp": Stamped,
    "skim": Skimmed,
}
"""The waiting Step each probe kind goes on to."""


class ProbeFlow(dex.Flow[str]):
    """The conformance probe's Flow type (``DexAgentsConformanceProbe``)."""

    def get_flow_type(self) -> str:
        return "DexAgentsConformanceProbe"

    def get_steps(self) -> dex.StepList[str]:
        return dex.StepList.start_step(Probe()).other_steps(
            Check(), Parked(), Timed(), Gathered(), Skimmed(), Stamped()
        )

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(LOCKED, BIG, ITEMS, INBOX, EXTRA, EVENTS, SMALL)

    @dex.rpc(lock_attributes=(LOCKED.lock(),), is_transactional=True)
    def locked_write(self, context: Context, value: str) -> RPCResult[str]:
        LOCKED.set(context, value)
        INBOX.publish(context, value)
        return RPCResult(value)

    @dex.rpc(is_transactional=True)
    def publish_extra(self, context: Context, value: str) -> RPCResult[str]:
        EXTRA.publish(context, value)
        return RPCResult(value)

    @dex.rpc(is_transactional=True, load_channels=(EXTRA,))
    def withdraw_extra(self, context: Context, value: str) -> RPCResult[bool]:
        for message in EXTRA.pending_messages(context):
            if message.value == value:
                EXTRA.delete(context, message.message_id)
                return RPCResult(output=True)
        return RPCResult(output=False)

    @dex.rpc(load_channels=(EXTRA,))
    def pending_extra(self, context: Context) -> RPCResult[list[str]]:
        return RPCResult([message.value for message in EXTRA.pending_messages(context)])

    @dex.rpc(load_attribute_maps=(ITEMS,))
    def item_keys(self, context: Context) -> RPCResult[list[str]]:
        return RPCResult(sorted(ITEMS.get_all_instance_keys(context)))

    @dex.rpc
    def read_big(self, context: Context) -> RPCResult[str]:
        return RPCResult(BIG.get(context) or "")


def make_registry(flow: ProbeFlow) -> dex.Registry:
    """The registry of the probe Flow (async handlers allowed); Clients must invoke this ``flow`` instance."""
    return dex.Registry([flow], allow_async_handlers=True)


def worker_options(address: str) -> dex.WorkerOptions:
    """Pull-mode options of every probe Worker."""
    return dex.WorkerOptions(
        server_address=address,
        pull=dex.PullWorkerOptions(max_concurrent_tasks=8, stop_drain_timeout=timedelta(seconds=1)),
    )


def open_cache(directory: Path) -> dex.BlobCache:
    """A small BlobCache in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    return dex.open_blob_cache(dex.BlobCacheConfig(str(directory), 16 * 1024 * 1024))
