"""The Worker tasks one session turn costs, counted from the dev server's attempt records (not a timed test).

Run: ``python -m benchmarks.turn_tasks [--tools-per-round 4] [--rounds 5]``.

Serves the peer benchmark's agent (`benchmarks.peers.app_dex.build_flow`) with a
listening Worker on the dev server, all in this process, runs a first turn, then counts
the Step tasks (``wait_for`` / ``execute`` attempts) and live events of the second
turn (``send_user_message`` on an idle session, one Worker RPC task on top).
"""

import argparse
import asyncio
import collections
import tempfile
from datetime import timedelta

from benchmarks.peers.app_dex import build_flow
from benchmarks.peers.scenario import make_prompt
from dex_agents import AgentContainer, AgentEventType, AgentSessionClient, WorkerMode, wait_worker_serving
from dex_agents.infrastructure.dex.container import free_listen_address
from dex_agents.testing.devserver import DevServer


async def _follow(sessions: AgentSessionClient, token: str, events: collections.Counter[str]) -> str:
    while True:
        message = await sessions.read_agent_event("turns", token, long_poll=timedelta(seconds=30))
        token = message.resume_token
        events[message.event.type.value] += 1
        if message.event.type is AgentEventType.TURN_COMMITTED:
            return token


async def _committed(server: DevServer) -> int:
    """Wait until the turn's last task, the next ``AwaitUserMessage.wait_for``, is recorded; return the count."""
    for _ in range(500):
        attempts = server.attempts("turns")
        if attempts and (attempts[-1].step_type, attempts[-1].method) == ("AwaitUserMessage", "wait_for"):
            return len(attempts)
        await asyncio.sleep(0.01)
    raise TimeoutError("the turn's AwaitUserMessage.wait_for was not recorded")


async def _run(rounds: int, tools: int) -> None:
    flow = build_flow()
    async with DevServer() as server:
        with tempfile.TemporaryDirectory(prefix="turn-tasks-") as cache:
            container = AgentContainer.build(
                flows=[flow],
                server_address=server.address,
                blob_cache_directory=cache,
                worker_mode=WorkerMode.LISTEN,
                listen_address=free_listen_address(),
            )
            worker, client = container.worker(), container.client()
            serving = asyncio.create_task(worker.start())
            try:
                await wait_worker_serving(worker, serving)
                sessions = AgentSessionClient(client, flow)
                await sessions.start_session("turns", make_prompt(rounds, tools, 1))
                token = await _follow(sessions, "", collections.Counter())
                before = await _committed(server)
                events: collections.Counter[str] = collections.Counter()
                await sessions.send_user_message("turns", make_prompt(rounds, tools, 2))
                await _follow(sessions, token, events)
                await _committed(server)
                tasks = collections.Counter((a.step_type, a.method) for a in server.attempts("turns")[before:])
            finally:
                await client.close()
                await worker.stop()
                await serving
                container.blob_cache().close()
    print(f"one {rounds}x{tools} session turn: 1 send_user_message RPC task + {sum(tasks.values())} Step tasks")
    for (step, method), count in sorted(tasks.items()):
        print(f"  {count:3d} {step}.{method}")
    print(f"live events: {sum(events.values())}")
    for kind, count in sorted(events.items()):
        print(f"  {count:3d} {kind}")


def main() -> None:
    """Print the counts."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.turn_tasks")
    parser.add_argument("--rounds", type=int, default=5, help="model rounds that call tools (K)")
    parser.add_argument("--tools-per-round", type=int, default=4, help="parallel tool calls per round (M)")
    args = parser.parse_args()
    asyncio.run(_run(args.rounds, args.tools_per_round))


if __name__ == "__main__":
    main()
