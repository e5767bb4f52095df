"""The README's "use it in your app" example, run as written against fake Dex."""

import asyncio
from pathlib import Path

import pytest

from dex_agents.testing import FakeDex, session_is_idle
from tests.integration.agent.scripted_agent import ScriptedAgentRunner

pytestmark = pytest.mark.integration


async def test_readme_example_runs_a_session_to_its_answer(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the example opens .dex-cache in the working directory
    async with FakeDex() as fake:
        address = fake.address
        # --- the README example, unchanged but for `address` and the scripted runner ---
        from dex import (
            AsyncClient,
            AsyncWorker,
            BlobCacheConfig,
            ClientOptions,
            PullWorkerOptions,
            Registry,
            WorkerOptions,
            WorkerTarget,
            open_blob_cache,
        )

        from dex_agents import (
            AgentSessionClient,
            AgentSessionFlow,
            AgentSessionOptions,
            ToolEffect,
            ToolPolicy,
            codec_registry,
        )

        flow = AgentSessionFlow(
            ScriptedAgentRunner(),
            flow_type="TriageAgent",
            options=AgentSessionOptions(tool_policies={"search_tickets": ToolPolicy(ToolEffect.READ)}),
        )
        registry = Registry([flow], codec_registry(), allow_async_handlers=True)
        cache = open_blob_cache(BlobCacheConfig(".dex-cache", 64 * 1024 * 1024))
        worker = AsyncWorker(
            registry, cache, WorkerOptions(server_address=address, pull=PullWorkerOptions(max_concurrent_tasks=8))
        )
        client = AsyncClient(
            registry, cache, ClientOptions(server_address=address, worker_target=WorkerTarget(pull=True))
        )
        serving = asyncio.create_task(worker.start())
        await worker.wait_pull_registered(timeout=30)

        sessions = AgentSessionClient(client, flow)
        await sessions.start_session("session-42", '{"tools": [{"id": "t1", "name": "search_tickets"}]}')
        snapshot = await sessions.get_agent_snapshot("session-42")
        # --- end of the example ---
        try:
            while session_is_idle(snapshot) is None:
                await asyncio.sleep(0.01)
                snapshot = await sessions.get_agent_snapshot("session-42")
            assert (
                snapshot.messages[-1].text == '{"t1": "succeeded: search_tickets done with key session-42/turn-1/t1"}'
            )
        finally:
            await worker.stop()
            await serving
            await client.close()
            cache.close()
