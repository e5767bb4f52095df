"""The lifecycle tests' engine in the test process: the embedded dev server and a listening Worker."""

import asyncio
import contextlib
import dataclasses
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta

import attrs
import dex

from dex_agents import AgentSessionClient, AgentSessionFlow, DeferredToolExecution, ToolExecutionResult
from dex_agents.domain.turn_control import CancelTurnRequest
from dex_agents.infrastructure.dex.client import NO_WORKER_WAIT
from dex_agents.infrastructure.dex.container import (
    AgentContainer,
    WorkerMode,
    free_listen_address,
    wait_worker_serving,
)
from dex_agents.infrastructure.dex.persistence import (
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TURN_CANCEL_REQUEST,
)
from dex_agents.testing import TEST_RETRY_DELAY_SCALE, DevServer, DevServerConfig
from tests.lifecycle.runner import APPROVAL_DEADLINE, LifecycleRunner, lifecycle_options

FLOW_TYPE = "LifecycleAgent"


def lifecycle_flow(
    seen: Callable[[str, str, str], None] | None = None,
    *,
    flow_class: type[AgentSessionFlow] = AgentSessionFlow,
    deadline: timedelta = APPROVAL_DEADLINE,
) -> AgentSessionFlow:
    """The lifecycle runner's Flow (approvals expire after ``deadline``)."""
    return flow_class(LifecycleRunner(seen=seen), flow_type=FLOW_TYPE, options=lifecycle_options(deadline))


class GatedWithdrawFlow(AgentSessionFlow):
    """The lifecycle Flow whose ``withdraw_user_message`` RPC, once it read the queues, waits for ``release``."""

    reached: asyncio.Event | None = None
    release: asyncio.Event | None = None

    def arm(self) -> None:
        """Make the next withdrawals wait (call on the test's event loop)."""
        self.reached, self.release = asyncio.Event(), asyncio.Event()

    @dex.rpc(is_transactional=True, load_channels=(QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES))
    async def withdraw_user_message(self, context: dex.Context, client_message_id: str) -> dex.RPCResult[bool]:
        if self.reached is not None and self.release is not None:
            self.reached.set()
            await self.release.wait()
        result: dex.RPCResult[bool] = await super().withdraw_user_message(context, client_message_id)
        return result


class GatedCancelFlow(AgentSessionFlow):
    """The lifecycle Flow whose ``cancel_turn`` RPC, once it read the pending interrupts, waits for ``release``."""

    reached: asyncio.Event | None = None
    release: asyncio.Event | None = None

    def arm(self) -> None:
        """Make the next cancels wait (call on the test's event loop)."""
        self.reached, self.release = asyncio.Event(), asyncio.Event()

    @dex.rpc(lock_attributes=(PENDING_INTERRUPTS.lock(), TURN_CANCEL_REQUEST.lock()))
    async def cancel_turn(self, context: dex.Context, request: CancelTurnRequest) -> dex.RPCResult[bool]:
        if self.reached is not None and self.release is not None:
            self.reached.set()
            await self.release.wait()
        result: dex.RPCResult[bool] = await super().cancel_turn(context, request)
        return result


class GatedReadRunner(LifecycleRunner):
    """The lifecycle runner whose ``read`` tool waits for ``release`` (set on the Worker's event loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        if call.tool_call.tool_name == "read":
            await self.release.wait()
        return await super().execute_deferred_tool_call(call)


async def _start_after(worker: dex.AsyncWorker, delay: timedelta | None) -> None:
    if delay is not None:
        await asyncio.sleep(delay.total_seconds())
    await worker.start()


@attrs.frozen
class InProcessStack:
    fake: DevServer
    flow: AgentSessionFlow
    sessions: AgentSessionClient
    client: dex.AsyncClient
    """The Dex client under ``sessions`` (for a client of another Flow type on the same engine)."""


@contextlib.asynccontextmanager
async def in_process_stack(
    flow: AgentSessionFlow,
    *,
    serve: bool = True,
    dispatch_wait: timedelta | None = None,
    no_worker_wait: timedelta = NO_WORKER_WAIT,
    worker_delay: timedelta | None = None,
    other_flows: Sequence[AgentSessionFlow] = (),
) -> AsyncIterator[InProcessStack]:
    """The embedded dev server and, unless ``serve`` is false, a listening Worker serving ``flow``, in this process.

    ``dispatch_wait``: how long the server waits for a Worker before it fails a task (10 s by default).
    ``no_worker_wait``: how long the session client asks again after that (`AgentSessionClient`).
    ``worker_delay``: start the Worker this long after the stack is up (a Worker that restarts), not waiting for it.
    ``other_flows``: more Flow types the client knows and the Worker serves (``stack.client`` reaches them).
    """
    config = DevServerConfig(retry_delay_scale=TEST_RETRY_DELAY_SCALE)
    if dispatch_wait is not None:
        config = dataclasses.replace(config, dispatch_wait=dispatch_wait)
    with tempfile.TemporaryDirectory(prefix="lifecycle-cache-") as cache:
        async with DevServer(config) as fake:
            container = AgentContainer.build(
                flows=[flow, *other_flows],
                server_address=fake.address,
                worker_mode=WorkerMode.LISTEN,
                listen_address=free_listen_address(),
                blob_cache_directory=cache,
                stop_drain_seconds=1,
            )
            worker, client = container.worker(), container.client()
            serving = asyncio.create_task(_start_after(worker, worker_delay)) if serve else None
            try:
                if serving is not None and worker_delay is None:
                    await wait_worker_serving(worker, serving)
                yield InProcessStack(
                    fake, flow, AgentSessionClient(client, flow, no_worker_wait=no_worker_wait), client
                )
            finally:
                if serving is not None:
                    await worker.stop()
                    with contextlib.suppress(Exception):
                        await serving
                await client.close()
                await flow.close_client()
                container.blob_cache().close()
