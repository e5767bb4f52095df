"""Configuration ``dbos``: Pydantic AI on DBOS (``DBOSDurability`` capability), SQLite system database.

pydantic-ai 2.68.0 routes model requests through DBOS steps, but it does NOT wrap plain function
tools: its docs say to decorate them with ``@DBOS.step`` yourself. We do, so every tool call is a
durable step, as in the other durable configurations. One turn is one DBOS workflow, run in this
process under ``SetWorkflowID``; the caller keeps the history and passes it in.
"""

import argparse
import collections
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai.messages import ModelMessage

from benchmarks.peers.runners import CallerHeldHistory, Describe
from benchmarks.peers.scenario import make_agent, work_body

TOOL_STEP = "bench_dbos.work"


class DBOSRunner(CallerHeldHistory):
    """DBOS in the worker process; the system database is a SQLite file in the work directory."""

    name = "dbos"

    async def start(self, args: argparse.Namespace) -> None:
        from dbos import DBOS, DBOSConfig
        from pydantic_ai.durable_exec.dbos import DBOSDurability

        self._db_path = os.path.join(args.workdir, f"dbos-{os.getpid()}.sqlite")
        config: DBOSConfig = {
            "name": "peerbench",
            "system_database_url": f"sqlite:///{self._db_path}",
            "log_level": "WARNING",
        }
        DBOS(config=config)

        @DBOS.step(name=TOOL_STEP)
        async def work(n: int) -> str:
            return await work_body(n)

        agent = make_agent("bench_dbos", [DBOSDurability()], tool=work)

        @DBOS.workflow(name="bench_dbos.turn")
        async def turn(prompt: str, history: list[ModelMessage]) -> list[ModelMessage]:
            result = await agent.run(prompt, message_history=history or None)
            return result.new_messages()

        self._turn: Callable[[str, list[ModelMessage]], Awaitable[list[ModelMessage]]] = turn
        DBOS.launch()

    async def run(self, prompt: str, history: list[ModelMessage]) -> tuple[list[ModelMessage], str]:
        from dbos import SetWorkflowID

        run_id = f"bench-{uuid.uuid4()}"
        with SetWorkflowID(run_id):
            new = await self._turn(prompt, history)
        return new, run_id

    async def describe(self, ref: str, *, session: bool) -> Describe:
        from dbos import DBOS

        steps: list[Any] = list(await DBOS.list_workflow_steps_async(ref))
        names = collections.Counter(str(s["function_name"]) for s in steps)
        tool = sum(n for name, n in names.items() if name == TOOL_STEP)
        model = sum(n for name, n in names.items() if "model" in name)
        return {
            "model_steps": model,
            "tool_steps": tool,
            "recorded_steps": len(steps),
            "step_names": dict(names),
            "db_bytes": os.path.getsize(self._db_path),
            **(self.history_info() if session else {}),
        }

    async def stop(self) -> None:
        from dbos import DBOS

        DBOS.destroy()
