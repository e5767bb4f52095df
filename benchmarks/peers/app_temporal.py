"""Configurations ``temporal*``: Pydantic AI on Temporal (``TemporalDurability``), local dev server.

pydantic-ai 2.68.0 runs every model request and every function-tool call as a Temporal activity
(tools can opt out per tool; we do not). The agent and workflow live at module level because
Temporal's workflow sandbox re-imports this module for each workflow run. One turn is one
workflow; the caller keeps the history and passes it in as a workflow argument.
"""

import argparse
import asyncio
import collections
import os
import uuid
from typing import Any

from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
from pydantic_ai.messages import ModelMessage
from temporalio import workflow

from benchmarks.peers.runners import CallerHeldHistory, Describe
from benchmarks.peers.scenario import make_agent

agent = make_agent("bench_temporal", [TemporalDurability()])


@workflow.defn(name="BenchTurn")
class BenchTurn(PydanticAIWorkflow):
    """One turn: ``agent.run`` inside a workflow."""

    __pydantic_ai_agents__ = (agent,)

    @workflow.run
    async def run(self, prompt: str, history: list[ModelMessage]) -> list[ModelMessage]:
        """Run the agent on ``prompt`` after ``history``; return the new messages."""
        result = await agent.run(prompt, message_history=history or None)
        return result.new_messages()


class TemporalRunner(CallerHeldHistory):
    """A Temporal client and worker in the worker process; the dev server is started by bench.py."""

    def __init__(self, name: str, *, sandboxed: bool = True) -> None:
        super().__init__()
        self.name = name
        self.sandboxed = sandboxed

    async def start(self, args: argparse.Namespace) -> None:
        from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
        from temporalio.client import Client
        from temporalio.worker import UnsandboxedWorkflowRunner, Worker

        last_error: Exception | None = None
        for _ in range(120):  # the dev server may still be starting
            try:
                self._client = await Client.connect(args.temporal_address, plugins=[PydanticAIPlugin()])
                break
            except Exception as e:  # noqa: BLE001 - any connection error means "not up yet"
                last_error = e
                await asyncio.sleep(0.5)
        else:
            raise RuntimeError(f"cannot connect to Temporal at {args.temporal_address}: {last_error!r}")
        self._task_queue = f"peerbench-{self.name}-{os.getpid()}"
        kwargs: dict[str, Any] = {}
        if not self.sandboxed:
            kwargs["workflow_runner"] = UnsandboxedWorkflowRunner()
        self._worker = Worker(self._client, task_queue=self._task_queue, workflows=[BenchTurn], **kwargs)
        await self._worker.__aenter__()

    async def run(self, prompt: str, history: list[ModelMessage]) -> tuple[list[ModelMessage], str]:
        run_id = f"bench-{uuid.uuid4()}"
        new: list[ModelMessage] = await self._client.execute_workflow(
            BenchTurn.run, args=[prompt, history], id=run_id, task_queue=self._task_queue
        )
        return new, run_id

    async def describe(self, ref: str, *, session: bool) -> Describe:
        from temporalio.api.enums.v1 import EventType

        history = await self._client.get_workflow_handle(ref).fetch_history()
        kinds = collections.Counter(EventType.Name(e.event_type) for e in history.events)
        activities = collections.Counter(
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        )
        return {
            "model_steps": sum(n for name, n in activities.items() if "model_request" in name),
            "tool_steps": sum(n for name, n in activities.items() if "call_tool" in name),
            "recorded_steps": kinds.get("EVENT_TYPE_ACTIVITY_TASK_SCHEDULED", 0),
            "step_names": dict(activities),
            "history_events": len(history.events),
            "workflow_tasks": kinds.get("EVENT_TYPE_WORKFLOW_TASK_COMPLETED", 0),
            "history_bytes": sum(e.ByteSize() for e in history.events),
            **(self.history_info() if session else {}),
        }

    async def stop(self) -> None:
        await self._worker.__aexit__(None, None, None)
