"""The lifecycle tests' engine in the test process: the embedded dev server and a listening Worker."""

import asyncio
import contextlib
import dataclasses
import tempfile
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import attrs
import dex

from dex_agents import AgentSessionClient, AgentSessionFlow
from dex_agents.infrastructure.dex.container import (
    AgentContainer,
    WorkerMode,
    free_loopback_address,
    wait_worker_serving,
)
from dex_agents.infrastructure.dex.persistence import QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES
from dex_agents.testing import TEST_RETRY_DELAY_SCALE, DevServer, DevServerConfig
from tests.lifecycle.runner import LifecycleRunner, lifecycle_options

FLOW_TYPE = "LifecycleAgent"


def lifecycle_flow(
    seen: Callable[[str, str], None] | None = None, *, flow_class: type[AgentSessionFlow] = AgentSessionFlow
) -> AgentSessionFlow:
    """The lifecycle runner's Flow."""
    return flow_class(LifecycleRunner(seen=seen), flow_type=FLOW_TYPE, options=lifecycle_options())


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


@attrs.frozen
class InProcessStack:
    fake: DevServer
    flow: AgentSessionFlow
    sessions: AgentSessionClient


@contextlib.asynccontextmanager
async def in_process_stack(
    flow: AgentSessionFlow, *, serve: bool = True, dispatch_wait: timedelta | None = None
) -> AsyncIterator[InProcessStack]:
    """The embedded dev server and, unless ``serve`` is false, a listening Worker serving ``flow``, in this process.

    ``dispatch_wait``: how long the server waits for a Worker before it fails a task (10 s by default).
    """
    config = DevServerConfig(retry_delay_scale=TEST_RETRY_DELAY_SCALE)
    if dispatch_wait is not None:
        config = dataclasses.replace(config, dispatch_wait=dispatch_wait)
    with tempfile.TemporaryDirectory(prefix="lifecycle-cache-") as cache:
        async with DevServer(config) as fake:
            container = AgentContainer.build(
                flows=[flow],
                server_address=fake.address,
                worker_mode=WorkerMode.LISTEN,
                listen_address=free_loopback_address(),
                blob_cache_directory=cache,
                stop_drain_seconds=1,
            )
            worker, client = container.worker(), container.client()
            serving = asyncio.create_task(worker.start()) if serve else None
            try:
                if serving is not None:
                    await wait_worker_serving(worker, serving)
                yield InProcessStack(fake, flow, AgentSessionClient(client, flow))
            finally:
                if serving is not None:
                    await worker.stop()
                    with contextlib.suppress(Exception):
                        await serving
                await client.close()
                await flow.close_client()
                container.blob_cache().close()
