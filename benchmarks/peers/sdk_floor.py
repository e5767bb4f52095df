"""Configuration ``sdk-floor``: the Dex SDK alone, running the turn's Step graph with Steps that do nothing.

Not a peer and not dex-agents: a lower bound. A raw SDK Flow with the session's task shape for one
K x M turn and no agent, no binding, no events, no stored state:

- ``Start`` (the turn's start, like ``AwaitUserMessage``) moves to ``Model``;
- ``Model`` (like ``RunModel``) fans out M ``Tool`` Steps and one ``Join`` K times, then completes the Flow;
- ``Tool`` (like ``CallTool``) publishes one message to the ``RESULTS`` Channel and ends;
- ``Join`` (like ``ResumeTurn``) waits in ``wait_for`` for M results, then moves to ``Model``.
- For M = 1 there is nothing to join, as in the session: ``Model`` moves to its one ``Tool``, which moves to
  ``Model`` itself.

The Steps write the live events dex-agents' event contract asks of such a turn, one Stream frame each
(``turn_started``; per model call ``usage_recorded`` and one ``tool_call_deferred`` per call; per tool
``tool_call_started`` and ``tool_call_finished``; at the end one ``text_delta`` and ``turn_completed``:
69 frames for 5x4, as ``dex`` writes), with bodies of about the same size, and read none.

Every method is SYNC, as in the session Flow. Each turn is one Flow started by ``start_flow`` and
awaited by ``wait_for_flow``. the dev server and the listening Worker are child processes, as in ``dex``,
so the Worker's CPU per step is what the SDK (its dispatcher, value mapping and gRPC transport) costs
for the Steps a durable turn of this shape must make, with nothing of dex-agents in it. Against the
plain agent's CPU per step in the same run it bounds from below what any binding on this SDK can
reach (``docs/performance.md``).

Configuration ``sdk-floor-agent`` is the same Flow whose ``Start`` Step first runs the plain agent's
whole turn (``agent.run`` of the bench agent, as ``plain`` does, on the Worker). Its Worker CPU per
step is therefore the SDK's floor plus the plain agent's own work, measured in the same process and
under the same contention as ``dex``'s Worker: the least any durable Pydantic AI binding of this Step
graph can cost, before it stores, records or resumes anything (``docs/performance.md``).

Configuration ``sdk-floor-store`` is ``sdk-floor`` whose Steps also read and write what a session stores,
with the SDK's Attributes and AttributeMaps and at about the sizes the ``dex`` turn stores them (on the dev
server, its task requests average about 10% more bytes than ``dex``'s and its results about 40% fewer): the
session state, usage and interrupts; one tool-call record per call, written when the model asks for it and
twice by its tool Step, the batch's records loaded by the join and the next model call; the run state as the
session stores it, one part of about 850 bytes per model call that asks for tools, every part loaded by the
next model call; the turn's messages at its end. The Steps' reads
and writes follow the binding's ports (the state read twice per Step, as the binding does for the events'
turn and the use case). Against ``sdk-floor`` it shows what the SDK alone costs for the values the spec has
a session keep, before any of dex-agents' code.

``python -m benchmarks.peers.sdk_floor`` is the Worker child (server address, listen address and
ready file from the environment, as for ``dex``; ``PEERBENCH_SDK_FLOOR_AGENT=1`` for
``sdk-floor-agent``, ``PEERBENCH_SDK_FLOOR_STORE=1`` for ``sdk-floor-store``).
"""

import argparse
import asyncio
import dataclasses
import os
import re
import shutil
import signal
import tempfile
import uuid
from pathlib import Path
from typing import Any

import dex

from benchmarks.peers.app_dex import ChildProcesses, ChildProcessesRunner, describe_history
from benchmarks.peers.procstat import serve_cpu_probe_from_env
from benchmarks.peers.runners import Describe
from benchmarks.peers.scenario import make_agent
from benchmarks.peers.steps import SDK_FLOOR_CONFIGS
from dex_agents import wait_worker_serving
from dex_agents.infrastructure.dex.container import free_listen_address
from dex_agents.testing.stack import LISTEN_ADDRESS_ENV, READY_FILE_ENV, SERVER_ADDRESS_ENV

FLOW_TYPE = "PeerBenchSdkFloor"
RESULTS = dex.Channel("RESULTS", int)
EVENTS = dex.Stream("sdk_floor.events", str, 10 * 1024 * 1024)
_BODY = "x" * 250
"""About the size of one of dex-agents' tool lifecycle events."""


AGENT_ENV = "PEERBENCH_SDK_FLOOR_AGENT"
"""Set to ``1`` in the Worker child of ``sdk-floor-agent``: ``Start`` runs the plain agent's turn first."""
_AGENT = make_agent("sdk-floor-agent") if os.environ.get(AGENT_ENV) == "1" else None


STORE_ENV = "PEERBENCH_SDK_FLOOR_STORE"
"""Set to ``1`` in the Worker child of ``sdk-floor-store``: the Steps also read and write what a session stores."""
_STORE = os.environ.get(STORE_ENV) == "1"
STATE = dex.Attribute("STATE", str)
USAGE = dex.Attribute("USAGE", str)
INTERRUPTS = dex.Attribute("INTERRUPTS", str)
RUN_STATE = dex.AttributeMap("RUN_STATE", str)
RECORDS = dex.AttributeMap("RECORDS", str)
MESSAGES = dex.AttributeMap("MESSAGES", str)
# Sizes of dex-agents' stored JSON values in a 5x4 turn of the bench agent (measured on the dev server's task requests).
_STATE_VALUE = "s" * 300
_USAGE_VALUE = "u" * 130
_RECORD_VALUE = "r" * 480
_MESSAGE_VALUE = "m" * 600
_RUN_STATE_PART = 850
"""Bytes of the run state part a model call that asks for tools writes: one response and its results, deflated (the
session's parts are 780 bytes on 10x1 and about 900 on 5x4; `dex_agents.infrastructure.dex.run_state_parts`)."""
_TURN_MESSAGES = 11
"""Messages a 5x4 turn stores at its end (the responses and requests after the prompt)."""


def _model_load(*loads: dex.AttributeMapLoad) -> dex.StepOptions:
    """A model call's loads: the records and the run state's parts (whole maps, as ``RunModel``'s) and ``loads``."""
    return dataclasses.replace(
        SYNC, execute_load_attribute_maps=(RECORDS, RUN_STATE), execute_load_attribute_map_instances=loads
    )


def _load(*loads: dex.AttributeMapLoad) -> dex.StepOptions:
    return dataclasses.replace(SYNC, execute_load_attribute_maps=(RECORDS,), execute_load_attribute_map_instances=loads)


def _own_record(n: str) -> dex.StepOptions:
    return dataclasses.replace(SYNC, execute_load_attribute_map_instances=(RECORDS.load(n),))


def _read_session(context: dex.AsyncContext) -> None:
    """What every session Step reads: the state (twice: once for its events' turn), usage and interrupts."""
    STATE.get(context)
    STATE.get(context)
    USAGE.get(context)
    INTERRUPTS.get(context)


def _read_records(context: dex.AsyncContext) -> None:
    for key in RECORDS.get_all_instance_keys(context):
        RECORDS.get(context, key)


def _event(context: dex.AsyncContext, kind: str) -> None:
    EVENTS.write(context, f'{{"type": "{kind}", "body": "{_BODY}"}}')


SYNC = dex.StepOptions(wait_for_durability=dex.StepDurability.SYNC, execute_durability=dex.StepDurability.SYNC)
_SHAPE = re.compile(r"k=(\d+)\s+m=(\d+)")


_Step: Any = dex.Step
"""dex 1.23's Step base, typed as ``Any``: its sync ``Context`` signatures do not describe async handlers."""


def _shape(state: str) -> tuple[int, int, int]:
    k, m, done = (int(part) for part in state.split())
    return k, m, done


class Start(_Step):  # type: ignore[misc]
    """The turn's first Step: reads K and M from the prompt."""

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        match = _SHAPE.search(input)
        if match is None:
            raise ValueError(f"the prompt carries no k= and m=: {input!r}")
        if _AGENT is not None:
            result = await _AGENT.run(input)
            if not result.output.startswith("done:"):
                raise RuntimeError(f"the plain agent answered {result.output!r}")
        _event(context, "turn_started")
        if _STORE:
            STATE.set(context, _STATE_VALUE)
            USAGE.set(context, _USAGE_VALUE)
            INTERRUPTS.set(context, "[]")
            MESSAGES.set(context, "0", _MESSAGE_VALUE)
            first = f"{match.group(1)} {match.group(2)} 0"
            return dex.go_to_many(dex.StepMovement.of(Model, first, options=_model_load(MESSAGES.load("0"))))
        return dex.go_to(Model, f"{match.group(1)} {match.group(2)} 0")

    def get_step_options(self) -> dex.StepOptions:
        return SYNC


class Model(_Step):  # type: ignore[misc]
    """A model call that asks for M tools K times, then answers."""

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        k, m, done = _shape(input)
        if _STORE:
            _read_session(context)
            _read_records(context)
            MESSAGES.get(context, "0")
            for part in RUN_STATE.get_all_instance_keys(context):
                RUN_STATE.get(context, part)
            USAGE.set(context, _USAGE_VALUE)
            STATE.set(context, _STATE_VALUE)
        _event(context, "usage_recorded")
        if done >= k:
            if _STORE:
                for sequence in range(1, _TURN_MESSAGES + 1):
                    MESSAGES.set(context, str(sequence), _MESSAGE_VALUE)
            _event(context, "text_delta")
            _event(context, "turn_completed")
            return dex.graceful_complete(output="answered")
        for _ in range(m):
            _event(context, "tool_call_deferred")
        after = f"{k} {m} {done + 1}"
        calls = [f"{done * 1000 + j} {after}" for j in range(m)]
        if _STORE:
            RUN_STATE.set(context, f"part-{done:06d}", "x" * _RUN_STATE_PART)
            for j in range(m):
                RECORDS.set(context, str(done * 1000 + j), _RECORD_VALUE)
            tools = [dex.StepMovement.of(Tool, call, options=_own_record(call.split()[0])) for call in calls]
            if m == 1:
                return dex.go_to_many(*tools)
            return dex.go_to_many(*tools, dex.StepMovement.of(Join, after, options=_load()))
        tools = [dex.StepMovement.of(Tool, call, options=SYNC) for call in calls]
        if m == 1:
            return dex.go_to_many(*tools)
        return dex.go_to_many(*tools, dex.StepMovement.of(Join, after, options=SYNC))

    def get_step_options(self) -> dex.StepOptions:
        return SYNC


class Tool(_Step):  # type: ignore[misc]
    """A tool call (input: its number and the shape after it): publishes its result, or, alone, resumes the turn."""

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        number, after = input.split(" ", 1)
        _event(context, "tool_call_started")
        if _STORE:
            _read_session(context)
            RECORDS.get(context, number)
            RECORDS.set(context, number, _RECORD_VALUE)
            RECORDS.set(context, number, _RECORD_VALUE)
        _event(context, "tool_call_finished")
        if _shape(after)[1] == 1:
            return _resume(context, after)
        RESULTS.publish(context, int(number))
        return dex.dead_end()

    def get_step_options(self) -> dex.StepOptions:
        return SYNC


def _resume(context: dex.AsyncContext, shape: str) -> dex.StepDecision:
    """The model next, as ``ResumeTurn`` (or a lone call's tool Step) moves it with the state it writes."""
    if _STORE:
        STATE.set(context, _STATE_VALUE)
        return dex.go_to_many(dex.StepMovement.of(Model, shape, options=_model_load(MESSAGES.load("0"))))
    return dex.go_to(Model, shape)


class Join(_Step):  # type: ignore[misc]
    """The join of one batch of tool calls: waits for M results."""

    async def wait_for(self, context: dex.AsyncContext, input: str) -> dex.Wait:
        _, m, _ = _shape(input)
        return dex.Wait.until(RESULTS.for_n(m))

    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        if _STORE:
            _read_session(context)
            _read_records(context)
        return _resume(context, input)

    def get_step_options(self) -> dex.StepOptions:
        return SYNC


class SdkFloorFlow(dex.Flow[str]):
    """One K x M turn as a Flow of do-nothing Steps."""

    def get_flow_type(self) -> str:
        return FLOW_TYPE

    def get_steps(self) -> dex.StepList[str]:
        return dex.StepList.start_step(Start()).other_steps(Model(), Tool(), Join())

    def get_persistence_schema(self) -> dex.PersistenceSchema:
        return dex.PersistenceSchema.of(RESULTS, EVENTS, STATE, USAGE, INTERRUPTS, RUN_STATE, RECORDS, MESSAGES)


FLOW = SdkFloorFlow()


def _registry() -> dex.Registry:
    return dex.Registry([FLOW], allow_async_handlers=True)


class SdkFloorRunner(ChildProcessesRunner):
    """``sdk-floor`` or ``sdk-floor-agent``: dev server and raw SDK Worker in child processes; the Client here."""

    def __init__(self, name: str = "sdk-floor") -> None:
        assert name in SDK_FLOOR_CONFIGS, name
        self.name = name
        self.address = ""
        self._cache_dir = tempfile.mkdtemp(prefix="peerbench-sdk-floor-")
        self._cache: dex.BlobCache | None = None
        self._client: dex.AsyncClient | None = None

    async def start(self, args: argparse.Namespace) -> None:
        self._children = ChildProcesses(args.workdir, self.name)
        listen = free_listen_address()
        worker_env = {
            LISTEN_ADDRESS_ENV: listen,
            AGENT_ENV: "1" if self.name == "sdk-floor-agent" else "",
            STORE_ENV: "1" if self.name == "sdk-floor-store" else "",
        }
        # On a data dir, as ``dex`` (the floor of the headline rows).
        data_dir = os.path.join(args.workdir, f"{self.name}-data-{os.getpid()}")
        shutil.rmtree(data_dir, ignore_errors=True)
        self.address = await self._children.start("benchmarks.peers.sdk_floor", worker_env, data_dir=data_dir)
        self._cache = dex.open_blob_cache(dex.BlobCacheConfig(os.path.join(self._cache_dir, "client"), 64 << 20))
        self._client = dex.AsyncClient(
            _registry(),
            self._cache,
            dex.ClientOptions(server_address=self.address, worker_target=dex.WorkerTarget(listen)),
        )

    async def fresh_turn(self, prompt: str) -> str:
        assert self._client is not None
        flow_id = f"sdk-floor-{uuid.uuid4()}"
        await self._client.start_flow(FLOW, flow_id, prompt)
        result = await self._client.wait_for_flow(flow_id)
        if result.status is not dex.FlowStatus.COMPLETED:
            raise RuntimeError(f"the sdk-floor Flow ended {result.status}")
        return flow_id

    async def session_turn(self, prompt: str) -> str:
        # No session state to keep: every turn is a Flow of its own, so a "growing session" stays flat.
        return await self.fresh_turn(prompt)

    async def describe(self, ref: str, *, session: bool) -> Describe:
        _, described = await describe_history(self.address, ref, model_step="Model", tool_step="Tool")
        return described

    async def stop(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._cache is not None:
            self._cache.close()
        await self._children.stop()


async def _serve() -> None:
    address = os.environ[SERVER_ADDRESS_ENV]
    listen = os.environ[LISTEN_ADDRESS_ENV]
    directory = tempfile.mkdtemp(prefix="peerbench-sdk-floor-worker-")
    cache = dex.open_blob_cache(dex.BlobCacheConfig(directory, 64 << 20))
    worker = dex.AsyncWorker(
        _registry(),
        cache,
        dex.WorkerOptions(server_address=address, bind_address=listen, worker_target=dex.WorkerTarget(listen)),
    )
    serving = asyncio.create_task(worker.start())
    await wait_worker_serving(worker, serving)
    Path(os.environ[READY_FILE_ENV]).touch()
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    await stopped.wait()
    await worker.stop()
    await serving
    cache.close()


def main() -> None:
    """Serve the sdk-floor Flow until SIGTERM."""
    serve_cpu_probe_from_env()
    asyncio.run(_serve())


if __name__ == "__main__":
    main()
