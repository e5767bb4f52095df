"""The long-form example of docs/client.md, run as written against the dev server."""

import asyncio
from pathlib import Path

import pytest

from dex_agents.testing import DevServer
from tests.integration.agent.scripted_agent import ScriptedAgentRunner

# The scripted runner reads its user message as a script: this one searches and answers.
FIND_MY_OPEN_TICKETS = '{"tools": [{"id": "t1", "name": "search_tickets"}], "tool_results": "each"}'

pytestmark = pytest.mark.integration


async def test_readme_example_runs_a_session_to_its_answer(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the example opens .dex-cache in the working directory
    async with DevServer() as fake:
        address = fake.address
        # --- the docs/client.md example, unchanged but for `address`, the scripted runner and its message ---
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
            TurnStatus,
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
        await sessions.start_session("session-42")

        # The application loop: send, wait for the turn's committed end, show it.
        receipt = await sessions.submit_user_message("session-42", FIND_MY_OPEN_TICKETS)
        result = await sessions.wait_for_turn("session-42", receipt, timeout=120)
        if result.status is TurnStatus.FAILED:
            print("the turn failed:", result.error)  # noqa: T201 - the documented example prints
        else:
            print(result.reply)  # noqa: T201
        for outcome in result.tool_outcomes:  # stored with the turn's messages, readable for every past turn
            print(outcome.tool_name, outcome.status, outcome.attempts, outcome.approval, outcome.approver)  # noqa: T201
        await sessions.wait_until_idle("session-42", timeout=60)
        # --- end of the example ---
        try:
            assert result.status is TurnStatus.COMPLETED
            assert result.reply == '{"t1": "succeeded: search_tickets done with key session-42/turn-1/t1"}'
            assert [(o.tool_name, o.status.value, o.attempts) for o in result.tool_outcomes] == [
                ("search_tickets", "succeeded", 1)
            ]
        finally:
            await worker.stop()
            await serving
            await client.close()
            cache.close()


async def test_readme_listening_worker_example_serves_a_session_through_the_container(
    tmp_path: Path, state_dir: Path
) -> None:
    from dex_agents import (
        AgentContainer,
        AgentSessionClient,
        AgentSessionFlow,
        AgentSessionOptions,
        ToolEffect,
        ToolPolicy,
        TurnStatus,
        WorkerMode,
        wait_worker_serving,
    )
    from dex_agents.infrastructure.dex.container import free_listen_address

    flow = AgentSessionFlow(
        ScriptedAgentRunner(),
        flow_type="TriageAgent",
        options=AgentSessionOptions(tool_policies={"search_tickets": ToolPolicy(ToolEffect.READ)}),
    )
    listen = free_listen_address()  # docs/client.md binds 127.0.0.1:8803; a free port keeps parallel runs apart
    async with DevServer() as fake:
        # --- docs/client.md's listening variant, but for the address, the port and the cache folder ---
        container = AgentContainer.build(
            flows=[flow],
            server_address=fake.address,
            worker_mode=WorkerMode.LISTEN,
            listen_address=listen,
            blob_cache_directory=str(tmp_path / "cache"),
        )
        worker, client = container.worker(), container.client()  # the Client routes started Flows to `listen`
        serving = asyncio.create_task(worker.start())
        await wait_worker_serving(worker, serving)  # either mode: registered, or accepting calls
        # --- end of the example ---
        try:
            sessions = AgentSessionClient(client, flow)
            await sessions.start_session("session-42")
            receipt = await sessions.submit_user_message("session-42", FIND_MY_OPEN_TICKETS)
            result = await sessions.wait_for_turn("session-42", receipt, timeout=120)
            assert result.status is TurnStatus.COMPLETED
            assert worker.worker_target.address == listen
            assert not fake.pull_worker_ids()  # the dev server called the Worker; no task streams
        finally:
            await worker.stop()
            await serving
            await client.close()
            container.blob_cache().close()
