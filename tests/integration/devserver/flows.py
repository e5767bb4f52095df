"""Small Flows that exercise one dev server rule each (shared by in-process and child Workers)."""

import asyncio
import os
import time
from dataclasses import dataclass, replace
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
    StepDurability,
    StepList,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
)

SYNC = StepOptions(wait_for_durability=StepDurability.SYNC, execute_durability=StepDurability.SYNC)

STATE = dex.Attribute("STATE", str)
COUNTER = dex.Attribute("COUNTER", int)
ITEMS = dex.AttributeMap("ITEMS", str)
INBOX = dex.Channel("INBOX", str)
REPLIES = dex.ChannelMap("REPLIES", str)


# --------------------------------------------------------------------------- in-process gates

GATES: dict[str, asyncio.Event] = {}
REACHED: dict[str, asyncio.Event] = {}
INSIDE: set[str] = set()
OVERLAPS: list[set[str]] = []


def gate(name: str) -> asyncio.Event:
    """The event a handler waits on before it continues (in-process Workers only)."""
    return GATES.setdefault(name, asyncio.Event())


def reached(name: str) -> asyncio.Event:
    """The event a handler sets when it reaches its gate."""
    return REACHED.setdefault(name, asyncio.Event())


def reset_gates() -> None:
    GATES.clear()
    REACHED.clear()
    INSIDE.clear()
    OVERLAPS.clear()


# --------------------------------------------------------------------------- file gates

GATE_DIR_ENV = "FAKE_DEX_TEST_GATE_DIR"


async def file_gate(name: str) -> None:
    """Create ``<name>.reached`` then wait for ``<name>.release`` (child-process Workers).

    A gate some process reached before is passed at once (a redelivered attempt).
    """
    directory = Path(os.environ[GATE_DIR_ENV])
    if (directory / f"{name}.reached").exists():
        return
    (directory / f"{name}.reached").write_text(str(os.getpid()))
    release = directory / f"{name}.release"
    deadline = time.monotonic() + 60
    while not release.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gate {name} was never released")
        await asyncio.sleep(0.01)


# --------------------------------------------------------------------------- BasicFlow


@dataclass(frozen=True)
class Seen:
    step_execution_id: str
    from_step_execution_id: str
    attempt: int
    state: str
    item_a: str
    item_b_loaded: bool
    inbox_size: int
    pending: list[str]
    counter: int


BASIC_EVENTS = dex.Stream("basic.events", str, 1024 * 1024)


class Begin(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        STATE.set(context, input)
        COUNTER.set(context, 7)
        ITEMS.set(context, "a", "A")
        ITEMS.set(context, "b", "B")
        INBOX.publish(context, "m1")
        INBOX.publish(context, "m2")
        BASIC_EVENTS.write(context, f"begin:{context.step_execution_id}")
        options = replace(
            SYNC,
            execute_load_attribute_map_instances=(ITEMS.load("a"),),
            execute_load_channels=(INBOX,),
        )
        return dex.go_to_many(StepMovement.of(Inspect, "a", options=options))


class Inspect(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        try:
            ITEMS.get(context, "b")
            b_loaded = True
        except dex.AttributeMapNotLoadedError:
            b_loaded = False
        pending = [m.value for m in INBOX.pending_messages(context)]
        return dex.graceful_complete(
            Seen(
                step_execution_id=context.step_execution_id,
                from_step_execution_id=context.from_step_execution_id,
                attempt=context.attempt,
                state=STATE.get(context),
                item_a=ITEMS.get(context, input),
                item_b_loaded=b_loaded,
                inbox_size=INBOX.size(context),
                pending=pending,
                counter=COUNTER.get(context),
            )
        )


class BasicFlow(dex.Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Begin()).other_steps(Inspect())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(STATE, COUNTER, ITEMS, INBOX, BASIC_EVENTS)

    @dex.rpc
    def state(self, context: Context) -> RPCResult[str]:
        return RPCResult(STATE.get(context))


# --------------------------------------------------------------------------- WaitFlow


@dataclass(frozen=True)
class WaitOutcome:
    step_execution_id: str
    mode: str
    values: list[str]
    replies: list[str]
    timer_fired: bool
    timer_0: bool
    timer_1: bool
    inbox_left: int
    wait_for_failed: bool


@dataclass(frozen=True)
class Batch:
    mode: str
    values: list[str]


def _wait_for_mode(mode: str) -> Wait:
    seconds = timedelta(seconds=30)
    waits = {
        "for_one": lambda: Wait.until(INBOX.for_one()),
        "for_n": lambda: Wait.until(INBOX.for_n(2)),
        "at_least": lambda: Wait.until(INBOX.at_least(2)),
        "at_most": lambda: Wait.until(INBOX.at_most(2)),
        "for_range": lambda: Wait.until(INBOX.for_range(at_least=1, at_most=2)),
        "idle": lambda: Wait.until(REPLIES.for_one("never")),
        "timer": lambda: Wait.until(Timer.by_duration(seconds)),
        "any_of": lambda: Wait.any_of(INBOX.for_one(), Timer.by_duration(seconds)),
        "any_of_map": lambda: Wait.any_of(REPLIES.for_one("k"), Timer.by_duration(seconds), INBOX.for_one()),
        "all_of": lambda: Wait.all_of(INBOX.for_one(), REPLIES.for_one("k"), Timer.by_duration(timedelta(seconds=5))),
        "two_timers": lambda: Wait.any_of(
            Timer.by_duration(timedelta(seconds=100), condition_id="late"),
            Timer.by_duration(timedelta(seconds=10), condition_id="early"),
        ),
        "combination": lambda: Wait.any_combination_of(
            dex.ConditionCombination.of(
                INBOX.for_n(2, condition_id="inbox2"), REPLIES.for_one("k", condition_id="reply")
            ),
            dex.ConditionCombination.of(
                INBOX.for_one(condition_id="inbox1"),
                Timer.by_duration(seconds, condition_id="timer"),
            ),
        ),
    }
    return waits[mode]()


class Waiter(Step[str]):
    def get_step_options(self) -> StepOptions:
        return replace(
            SYNC, wait_for_failure=dex.WaitForFailurePolicy.PROCEED, wait_for_retry=RetryPolicy(maximum_attempts=3)
        )

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        if input == "fail":
            raise RuntimeError("wait_for refuses")
        context.set_step_execution_local("mode", input)
        return _wait_for_mode(input)

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.force_complete(
            WaitOutcome(
                step_execution_id=context.step_execution_id,
                mode=context.get_step_execution_local("mode", str) or "",
                values=list(INBOX.results(context)),
                replies=list(REPLIES.results(context, "k")),
                timer_fired=context.has_timer_fired(),
                timer_0=context.has_timer_fired(0),
                timer_1=context.has_timer_fired(1),
                inbox_left=INBOX.size(context),
                wait_for_failed=context.wait_for_method_failed(),
            )
        )


class WaitFlow(dex.Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Waiter())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(INBOX, REPLIES)

    @dex.rpc
    def publish(self, context: Context, value: str) -> RPCResult[int]:
        INBOX.publish(context, value)
        return RPCResult(INBOX.size(context) + 0)

    @dex.rpc
    def reply(self, context: Context, value: str) -> RPCResult[bool]:
        REPLIES.publish(context, "k", value)
        return RPCResult(True)

    @dex.rpc(load_channel_map_instances=(REPLIES.load_messages("k"),))
    def pending_replies(self, context: Context) -> RPCResult[list[str]]:
        return RPCResult([m.value for m in REPLIES.pending_messages(context, "k")])

    @dex.rpc
    def pending_replies_unloaded(self, context: Context) -> RPCResult[list[str]]:
        return RPCResult([m.value for m in REPLIES.pending_messages(context, "k")])

    @dex.rpc
    def reply_keys(self, context: Context) -> RPCResult[list[str]]:
        return RPCResult([*REPLIES.get_all_instance_keys(context), str(REPLIES.size(context, "k"))])

    @dex.rpc
    def load(self, context: Context, batch: Batch) -> RPCResult[bool]:
        """Publish ``batch.values`` and start another ``Waiter`` in one commit."""
        for value in batch.values:
            INBOX.publish(context, value)
        return RPCResult(True, next_steps=(StepMovement.of(Waiter, batch.mode),))


# --------------------------------------------------------------------------- RetryFlow


@dataclass(frozen=True)
class Recovered:
    input: str
    error_type: str
    detail: str
    from_step_execution_id: str
    step_execution_id: str
    attempt: int


@dataclass(frozen=True)
class Succeeded:
    attempt: int
    first_attempt_at: str
    last_heartbeat: str
    step_execution_id: str


RETRY_LOG: list[tuple[str, int, str]] = []


def retry_options(attempts: int, *, seconds: int = 1) -> StepOptions:
    return replace(
        SYNC,
        execute_retry=RetryPolicy(
            maximum_attempts=attempts,
            initial_interval=timedelta(seconds=seconds),
            backoff_coefficient=2.0,
        ),
    ).on_execute_failure_proceed_to(Recover, SYNC)


class Flaky(Step[str]):
    """``fail-N``: fails attempts 1..N (heartbeating ``hb-<attempt>`` first)."""

    def get_step_options(self) -> StepOptions:
        return retry_options(3)

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        RETRY_LOG.append((context.step_execution_id, context.attempt, context.first_attempt_at.isoformat()))
        last = context.get_last_heartbeat_value(str) or ""
        await context.heartbeat(f"hb-{context.attempt}")
        kind, _, count = input.partition("-")
        if kind == "retry_after" and context.attempt == 1:
            raise dex.retry_after(7, RuntimeError("not ready"))
        if kind == "fail" and context.attempt <= int(count):
            STATE.set(context, f"staged by attempt {context.attempt}")
            raise RuntimeError(f"attempt {context.attempt} failed")
        return dex.graceful_complete(
            Succeeded(
                attempt=context.attempt,
                first_attempt_at=context.first_attempt_at.isoformat(),
                last_heartbeat=last,
                step_execution_id=context.step_execution_id,
            )
        )


class Recover(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        error = context.recovery_error
        return dex.graceful_complete(
            Recovered(
                input=input,
                error_type=error.error_type if error else "",
                detail=error.detail if error else "",
                from_step_execution_id=context.from_step_execution_id,
                step_execution_id=context.step_execution_id,
                attempt=context.attempt,
            )
        )


class NoRoute(Step[str]):
    def get_step_options(self) -> StepOptions:
        return replace(SYNC, execute_retry=RetryPolicy(maximum_attempts=2))

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        raise RuntimeError("always fails")


class RetryFlow(dex.Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Flaky()).other_steps(Recover())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(STATE)

    @dex.rpc
    def state(self, context: Context) -> RPCResult[str]:
        return RPCResult(STATE.get(context))


class NoRouteFlow(dex.Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(NoRoute())


# --------------------------------------------------------------------------- TimeoutFlow


class Silent(Step[str]):
    """Attempt 1 hangs (``heartbeat``: heartbeats once first); later attempts complete."""

    def get_step_options(self) -> StepOptions:
        return replace(
            SYNC,
            execute_retry=RetryPolicy(maximum_attempts=2),
            heartbeat_timeout=timedelta(seconds=10),
            execute_method_timeout=timedelta(seconds=60),
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        if context.attempt == 1:
            if input == "heartbeat":
                await context.heartbeat("alive")
            reached(f"silent@{context.attempt}").set()
            await asyncio.Event().wait()
        return dex.graceful_complete(context.get_last_heartbeat_value(str) or "none")


class Slow(Step[str]):
    """Attempt 1 never finishes (only the 20 s method timeout can end it)."""

    def get_step_options(self) -> StepOptions:
        return replace(
            SYNC,
            execute_retry=RetryPolicy(maximum_attempts=2),
            execute_method_timeout=timedelta(seconds=20),
        )

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        if context.attempt == 1:
            reached("slow@1").set()
            await asyncio.Event().wait()
        return dex.graceful_complete("slow done")


class TimeoutFlow(dex.Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Silent()).other_steps(Slow())

    @dex.rpc
    def slow(self, context: Context, value: str) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(StepMovement.of(Slow, value),))


# --------------------------------------------------------------------------- FanFlow


DONE = dex.Channel("DONE", str)


class Fan(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        tools = [StepMovement.of(Tool, f"t{i}", options=SYNC) for i in range(input)]
        return dex.go_to_many(*tools, StepMovement.of(Join, input, options=SYNC))


class Tool(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        INSIDE.add(input)
        OVERLAPS.append(set(INSIDE))
        reached(input).set()
        try:
            await asyncio.wait_for(gate("tools").wait(), 10)
        finally:
            INSIDE.discard(input)
        DONE.publish(context, f"{input}:{context.step_execution_id}")
        return dex.dead_end()


class Join(Step[int]):
    async def wait_for(self, context: AsyncContext, input: int) -> Wait:  # type: ignore[override]
        return Wait.until(DONE.for_n(input))

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete(sorted(DONE.results(context)))


class FanFlow(dex.Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Fan()).other_steps(Tool(), Join())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(DONE)


# --------------------------------------------------------------------------- LockFlow


class Holder(Step[str]):
    """Holds the ``STATE`` lock while parked on the ``holder`` gate, then waits for INBOX.

    ``fail-N`` fails attempts 1..N first (default retry policy: no attempt limit).
    """

    def get_step_options(self) -> StepOptions:
        return replace(SYNC, execute_lock_attributes=(STATE.lock(),))

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        kind, _, count = input.partition("-")
        if kind == "fail" and context.attempt <= int(count):
            raise RuntimeError(f"attempt {context.attempt} failed")
        INSIDE.add(context.step_execution_id)
        OVERLAPS.append(set(INSIDE))
        reached("holder").set()
        try:
            await asyncio.wait_for(gate("holder").wait(), 10)
        finally:
            INSIDE.discard(context.step_execution_id)
        STATE.set(context, "held")
        return dex.go_to(Listener, "")


class Listener(Step[str]):
    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        return Wait.until(INBOX.for_one())

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete(INBOX.results(context)[0])


@dataclass(frozen=True)
class Ticket:
    key: str
    value: str


class LockFlow(dex.Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Holder()).other_steps(Listener())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(STATE, ITEMS, INBOX)

    @dex.rpc(lock_attributes=(STATE.lock(),), is_transactional=True)
    def locked_write(self, context: Context, value: str) -> RPCResult[str]:
        previous = STATE.get(context)
        STATE.set(context, value)
        INBOX.publish(context, value)
        return RPCResult(previous)

    @dex.rpc(is_transactional=True)
    def transactional_fail(self, context: Context, value: str) -> RPCResult[str]:
        STATE.set(context, value)
        raise RuntimeError("refused after staging a write")

    @dex.rpc
    def read_state(self, context: Context) -> RPCResult[str]:
        return RPCResult(STATE.get(context))

    @dex.rpc
    def read_item(self, context: Context, key: str) -> RPCResult[str]:
        return RPCResult(ITEMS.get(context, key))

    @dex.rpc(load_attribute_maps=(ITEMS,))
    def item_keys(self, context: Context) -> RPCResult[list[str]]:
        return RPCResult(list(ITEMS.get_all_instance_keys(context)))

    @dex.rpc(is_transactional=True)
    def put_item(self, context: Context, ticket: Ticket) -> RPCResult[int]:
        ITEMS.set(context, ticket.key, ticket.value)
        return RPCResult(0)

    @dex.rpc(is_transactional=True, load_channels=(INBOX,))
    def drop_first(self, context: Context, message_id: str) -> RPCResult[list[str]]:
        ids = [m.message_id for m in INBOX.pending_messages(context)]
        INBOX.delete(context, message_id or ids[0])
        return RPCResult(ids)

    @dex.rpc
    def kick(self, context: Context, value: str) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(StepMovement.of(Listener, value, options=SYNC),))

    @dex.rpc
    def another_holder(self, context: Context) -> RPCResult[bool]:
        return RPCResult(True, next_steps=(StepMovement.of(Holder, ""),))


# --------------------------------------------------------------------------- StreamFlow

STREAM_EVENTS = dex.Stream("stream.events", str, 1024 * 1024)
SMALL_EVENTS = dex.Stream("stream.small", str, 4000)


class Emit(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        for index in range(input):
            STREAM_EVENTS.write(context, f"event-{index}")
        for index in range(10):
            SMALL_EVENTS.write(context, f"small-{index:02d}-" + "x" * 20)
        return dex.go_to(Idle, "")


class Idle(Step[str]):
    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        return Wait.until(INBOX.for_one())

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete("done")


class StreamFlow(dex.Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Emit()).other_steps(Idle())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(STREAM_EVENTS, SMALL_EVENTS, INBOX)


# --------------------------------------------------------------------------- DecideFlow


class Decide(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        if input == "force_complete":
            return dex.force_complete("forced")
        if input == "force_fail":
            return dex.force_fail("broken on purpose")
        if input == "dead_end":
            return dex.dead_end()
        if input == "graceful":
            return dex.go_to_many(
                StepMovement.of(Branch, "slow", options=SYNC),
                StepMovement.of(Branch, "fast", options=SYNC),
            )
        if input == "cancel":
            return dex.go_to_many(
                StepMovement.of(Parked, "p1", options=SYNC),
                StepMovement.of(Canceller, "c", options=SYNC),
            )
        if input == "if_empty":
            INBOX.publish(context, "left over")
            return dex.force_complete_if_channels_empty("empty", StepMovement.of(Drain, "", options=SYNC), INBOX)
        raise ValueError(input)


class Branch(Step[str]):
    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        if input == "slow":
            return Wait.until(INBOX.for_one())
        return Wait.skip_immediately()

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete(input)


class Parked(Step[str]):
    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        return Wait.until(INBOX.for_one())

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete("parked ran")


class Canceller(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.graceful_complete("cancelled parked").with_canceling_steps(Parked)


class Drain(Step[str]):
    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # type: ignore[override]
        return Wait.until(INBOX.at_most(10))

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.force_complete_if_channels_empty(
            f"drained {len(INBOX.results(context))}",
            StepMovement.of(Drain, "", options=SYNC),
            INBOX,
        )


class DecideFlow(dex.Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Decide()).other_steps(Branch(), Parked(), Canceller(), Drain())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(INBOX)

    @dex.rpc(is_transactional=True, load_channels=(INBOX,))
    def drop(self, context: Context, message_id: str) -> RPCResult[list[str]]:
        """Return the pending ``id=value`` pairs, then delete ``message_id`` (or the first)."""
        pending = INBOX.pending_messages(context)
        INBOX.delete(context, message_id or pending[0].message_id)
        return RPCResult([f"{m.message_id}={m.value}" for m in pending])

    @dex.rpc
    def publish(self, context: Context, value: str) -> RPCResult[bool]:
        INBOX.publish(context, value)
        return RPCResult(True)


# --------------------------------------------------------------------------- KillFlow


class KillStep(Step[str]):
    """Attempt 1 parks on a file gate (so the test can SIGKILL its Worker).

    It heartbeats first unless its input starts with ``quiet``.
    """

    def get_step_options(self) -> StepOptions:
        return replace(SYNC, execute_retry=RetryPolicy(maximum_attempts=3))

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        if not input.startswith("quiet"):
            await context.heartbeat(f"pid-{os.getpid()}")
        STATE.set(context, f"attempt {context.attempt} in {os.getpid()}")
        if context.attempt == 1:
            await file_gate(f"{input}-attempt-1")
        return dex.graceful_complete(f"attempt={context.attempt} pid={os.getpid()}")


class KillFlow(dex.Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(KillStep())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(STATE)


# --------------------------------------------------------------------------- registry


class Unregistered(dex.Flow[str]):
    """Registered by the Client only: no Worker serves it."""

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Decide())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(INBOX)

    @dex.rpc
    def publish(self, context: Context, value: str) -> RPCResult[bool]:
        return RPCResult(True)


class Ghost(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        return dex.dead_end()


class GhostBasicFlow(dex.Flow[str]):
    """Claims the ``BasicFlow`` type with a Step and an RPC the Workers do not know."""

    def get_flow_type(self) -> str:
        return "BasicFlow"

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Ghost())

    @dex.rpc
    def ghost(self, context: Context) -> RPCResult[bool]:
        return RPCResult(True)


@dataclass(frozen=True)
class Flows:
    basic: BasicFlow
    wait: WaitFlow
    retry: RetryFlow
    no_route: NoRouteFlow
    timeout: TimeoutFlow
    fan: FanFlow
    lock: LockFlow
    stream: StreamFlow
    decide: DecideFlow
    kill: KillFlow


def make_flows() -> Flows:
    return Flows(
        BasicFlow(),
        WaitFlow(),
        RetryFlow(),
        NoRouteFlow(),
        TimeoutFlow(),
        FanFlow(),
        LockFlow(),
        StreamFlow(),
        DecideFlow(),
        KillFlow(),
    )


def make_registry(flows: Flows, *extra: dex.Flow[str]) -> dex.Registry:
    return dex.Registry(
        [
            flows.basic,
            flows.wait,
            flows.retry,
            flows.no_route,
            flows.timeout,
            flows.fan,
            flows.lock,
            flows.stream,
            flows.decide,
            flows.kill,
            *extra,
        ],
        allow_async_handlers=True,
    )
