"""Live runs: one Pydantic AI run serves every model Step of a turn that lands on the same Worker.

Without them each ``RunModel`` is a new agent run over the turn's run state: Pydantic AI prepares
the run (capabilities, toolsets, the graph) and replays the deferred tool results, several times the
cost of the model request itself (``docs/performance.md``). With them, the model Step
runs the agent as before with `LiveModelStepCapability` (the model Step's capability plus a
``handle_deferred_tool_calls`` hook, one capability layer rather than two), whose hook
Pydantic AI calls where the run would end with `DeferredToolRequests`. The hook hands the requests
and the run's messages to the Step, which answers `ToolCallsRequested` with the same run state as
ever, and keeps the run waiting in the hook. When the next ``RunModel`` of the turn arrives here and
its committed run state is exactly the one this run handed over, the Step gives the hook the
`DeferredToolResults` the durable path would have built from the same records; Pydantic AI feeds
them through the same tool-execution pipeline as a resumed run (approvals, failures, unwrapping)
and makes the next model request in the same run.

Nothing durable changes: every Step still returns the outcome and run state the durable path
returns, and any Step may take the durable path instead: the Worker restarted, another Worker
took the Step, the run state differs (a retried Step, a compaction, another attempt's answer), the
live run was evicted or waited longer than `LIVE_RUN_IDLE_SECONDS`. A live run continues only while
it is indistinguishable from a fresh run over the same state, so the hook declines (and the run
ends with `DeferredToolRequests` as before) unless:

- the agent is a plain ``Agent`` (the tool Step's direct-path rules, `_direct_tool`), and nothing of
  the agent's that a model Step runs can read the run's context (whose step count, usage, prompt,
  ``run_id`` and deps differ from a fresh run's): no instruction or system-prompt functions, no
  output validators, an output type of classes only (no output functions or markers), no model
  settings or metadata computed from the context, no tool with a ``prepare`` function or an
  ``args_validator``. Tools themselves run in tool Steps. So a live run
  may keep the deps its first Step built: nothing in its model Steps reads them. The runner still
  calls ``deps_factory`` before every model Step, as the contract says, and a factory that raises
  fails the Step as it would have;
- the requests hold only calls (no approvals, no metadata), exactly the tool calls of the last
  model response, and the run so far holds no retry prompt (retry counters would carry over);
- the next Step brings no steered messages, the same earlier history and summary, the same run
  state text the run handed over, and no denied call (a rejected or expired approval: Pydantic AI
  words a denial answered inside a run differently from one given to a resumed run).

A live run differs from a fresh one only in what no Step output depends on: the messages of one
turn share the run's ``run_id``. Its usage is the turn's, as a resumed run's is: the tool Steps'
usage joins it before it goes on (`dex_agents.adapters.pydantic_ai._usage`).
"""

import asyncio
import contextlib
import contextvars
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.agent import AgentRunResult
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    ToolCallPart,
    ToolReturnPart,
    repair_messages,
)
from pydantic_ai.models import Model
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RunUsage

from dex_agents.adapters.pydantic_ai._capabilities import DeltaSink, ModelStepCapability, ModelStepRecord
from dex_agents.adapters.pydantic_ai._direct_tool import plain_agent
from dex_agents.adapters.pydantic_ai._history import UserPrompt
from dex_agents.adapters.pydantic_ai._streaming import DeltaForwardingModel
from dex_agents.adapters.pydantic_ai._usage import copy_usage

LIVE_RUN_LIMIT = 256
"""Live runs one runner keeps; the oldest is abandoned (its turn takes the durable path) beyond it."""

LIVE_RUN_IDLE_SECONDS = 600.0
"""How long a live run waits for its turn's next model Step before it is abandoned."""


@dataclass
class SwitchableDeltas:
    """A `DeltaSink` forwarding to the events of whichever Step the live run serves now."""

    target: DeltaSink | None = None

    def write_text_delta(self, text: str) -> None:
        """Forward one text delta."""
        if self.target is not None:
            self.target.write_text_delta(text)

    def write_reasoning_delta(self, text: str) -> None:
        """Forward one reasoning delta."""
        if self.target is not None:
            self.target.write_reasoning_delta(text)


def live_runs_possible(agent: object) -> bool:
    """Whether the agent's turns may run live (the module docstring's first rule); asked before every model Step."""
    if not plain_agent(agent):
        return False
    typed: Agent[Any, Any] = agent  # type: ignore[assignment]  # plain_agent checked the type
    try:
        return (
            all(isinstance(getattr(item, "instruction", item), str) for item in typed._instructions)  # noqa: SLF001
            and not typed._system_prompt_functions  # noqa: SLF001
            and not typed._system_prompt_dynamic_functions  # noqa: SLF001
            and not typed._output_validators  # noqa: SLF001
            and not callable(typed.model_settings)
            and not callable(typed._metadata)  # noqa: SLF001
            and _plain_output_type(typed.output_type)
            and all(
                tool.prepare is None and tool.args_validator is None
                for tool in typed._function_toolset.tools.values()  # noqa: SLF001
            )
        )
    except AttributeError:
        return False


def _plain_output_type(output_type: object) -> bool:
    """Whether the output type is classes only: no output function or marker that could read the run's context."""
    if isinstance(output_type, (list, tuple)):
        return all(isinstance(item, type) for item in output_type)
    return isinstance(output_type, type)


@dataclass(frozen=True)
class Handoff:
    """What the run hands its Step where it would end with `DeferredToolRequests`."""

    requests: DeferredToolRequests
    messages: list[ModelMessage]
    """The run's messages at that point, earlier turns included."""
    usage: RunUsage
    """The run's usage so far (a copy)."""


Stop = Handoff | AgentRunResult[Any]
"""Where a live run stops for its Step: a handoff, or the run's end."""


def _accepts(ctx: RunContext[Any], requests: DeferredToolRequests, base: int, opening: Sequence[ModelMessage]) -> bool:
    """Whether the run may wait for the results itself (the module docstring's second rule)."""
    if requests.approvals or requests.metadata or not ctx.messages:
        return False
    last = ctx.messages[-1]
    if not isinstance(last, ModelResponse):
        return False
    asked = [part.tool_call_id for part in last.parts if isinstance(part, ToolCallPart)]
    if sorted(asked) != sorted(call.tool_call_id for call in requests.calls):
        return False
    return not any(
        _is_retry(part)
        for message in [*opening, *ctx.messages[base:]]
        if isinstance(message, ModelRequest)
        for part in message.parts
    )


def run_message_index(message_history: Sequence[ModelMessage]) -> int:
    """Where a run given ``message_history`` starts its own messages in its message list.

    Pydantic AI cleans the history first (``repair_messages`` without repairing the last response:
    adjacent requests are merged, orphaned results dropped), so a history holding two requests in a
    row (a cancelled or failed turn's user message and its note) is shorter in the run than it was
    given; counting the given messages would cut the run's own first messages off the turn.
    """
    return len(repair_messages(list(message_history), repair_last_response=False))


def _is_retry(part: object) -> bool:
    # The deprecated RetryPromptPart by name: Pydantic AI 2.68 writes the two others, older runs it.
    return (
        isinstance(part, RetryFeedbackPart)
        or (isinstance(part, ToolReturnPart) and part.outcome == "retried")
        or type(part).__name__ == "RetryPromptPart"
    )


class LiveRun:
    """One turn's agent run, alive between its model Steps."""

    def __init__(self, key: tuple[str, str], history_key: object, base: int, turn_base: Sequence[ModelMessage]) -> None:
        """Prepare a live run of turn ``key`` = (session, turn).

        ``base`` is where the run's own messages start in its message list: the length of the history
        it was given as Pydantic AI holds it (`run_message_index`), which merges adjacent requests.
        ``turn_base`` are the turn's messages the run started from (the run state's, for a run that
        started from a durable resume); the turn's messages at a stop are they and the run's own.
        """
        self.key = key
        self.history_key = history_key
        self.base = base
        self.opening = list(turn_base)
        """The turn's messages the run started from (fixed): its own messages come after them."""
        self.turn_base = list(turn_base)
        self.deltas = SwitchableDeltas()
        self.state: str | None = None
        """The run state text this run last handed over; the next Step must bring exactly it."""
        self.tool_call_ids: tuple[str, ...] = ()
        self.turn_length = len(self.turn_base)
        """How many of the turn's messages earlier Steps of this run already returned."""
        self.usage_mark = RunUsage()
        """The run's usage that earlier Steps already reported (tool Steps' included)."""
        self.run_usage = RunUsage()
        """The run's own usage object (``agent.run(usage=...)``): the turn's usage as it goes."""
        self.supplied: frozenset[str] = frozenset()
        """The calls whose results the run's current segment answers."""
        self.record = ModelStepRecord()
        """What the run learned about its tools (shared by its Steps)."""
        self.prompt: UserPrompt = ""
        """The turn's prompt (to drop a bare opening request from the turn's messages)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The event loop the run runs on; a Step on another loop cannot continue it."""
        self._task: asyncio.Task[AgentRunResult[Any]] | None = None
        self._context: contextvars.Context | None = None
        self._handoff: asyncio.Future[Handoff] | None = None
        self._results: asyncio.Future[DeferredToolResults] | None = None
        self.abandoned = False

    def start(self, run: Callable[[], Awaitable[AgentRunResult[Any]]]) -> None:
        """Start the run (``run`` calls ``agent.run`` with `capability` among its capabilities)."""
        loop = asyncio.get_running_loop()
        self.loop = loop
        self._handoff = loop.create_future()

        async def running() -> AgentRunResult[Any]:
            return await run()

        self._context = contextvars.copy_context()
        self._task = loop.create_task(running(), context=self._context)
        self._task.add_done_callback(_retrieve)

    def capability(self) -> "LiveModelStepCapability":
        """The model Step's capability for this run: it also hands deferred calls to the Step."""
        return LiveModelStepCapability(record=self.record, live=self)

    async def handle(self, ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults | None:
        """The ``handle_deferred_tool_calls`` hook: hand over and wait for the next Step's results, or decline."""
        handoff = self._handoff
        if self.abandoned or handoff is None or handoff.done() or not _accepts(ctx, requests, self.base, self.opening):
            return None
        results: asyncio.Future[DeferredToolResults] = asyncio.get_running_loop().create_future()
        self._results = results
        handoff.set_result(Handoff(requests=requests, messages=list(ctx.messages), usage=copy_usage(ctx.usage)))
        return await results

    async def next_stop(self) -> Stop:
        """Wait for the run's next handoff or its end (its error raised here); the caller's cancellation ends the run.

        Raises:
            Exception: what the run raised.
        """
        task, handoff = self._task, self._handoff
        assert task is not None, "start the run first"
        assert handoff is not None, "start the run first"
        waited: set[asyncio.Future[Any]] = {task, handoff}
        try:
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self.abandon()
            raise
        if handoff.done():
            return handoff.result()
        return task.result()

    def resume(self, results: DeferredToolResults, deltas: DeltaSink) -> None:
        """Give the waiting run the next Step's results; its deltas now go to ``deltas``."""
        waiting = self._results
        assert waiting is not None, "the run is not waiting for results"
        assert not waiting.done(), "the run is not waiting for results"
        self.deltas.target = deltas
        if self._context is not None:
            carry_trace_context(self._context)
        self._handoff = asyncio.get_running_loop().create_future()
        self._results = None
        waiting.set_result(results)

    @property
    def waiting_here(self) -> bool:
        """Whether the run waits for results on the running event loop."""
        task = self._task
        return (
            not self.abandoned
            and task is not None
            and not task.done()
            and self.loop is asyncio.get_running_loop()
            and self._results is not None
            and not self._results.done()
        )

    def abandon(self) -> None:
        """Stop the run: its turn goes on through the durable path."""
        self.abandoned = True
        task = self._task
        if task is not None and not task.done():
            # A run left on an event loop that has closed since (a test's loop) cannot be cancelled; it is gone.
            with contextlib.suppress(RuntimeError):
                task.cancel()


def carry_trace_context(into: contextvars.Context) -> None:
    """Make the resuming Step's current OpenTelemetry context current in the waiting run's ``into`` as well.

    The run's task was created under its first Step's span; without this, the spans
    Pydantic AI's instrumentation opens for the next model request would nest under
    that Step's (ended) span rather than the Step now serving the run. Nothing is
    imported: no OpenTelemetry loaded means no span to carry. The run is waiting, so
    its context is not entered and may be run here.
    """
    otel_context: Any = sys.modules.get("opentelemetry.context")
    if otel_context is None:
        return
    into.run(otel_context.attach, otel_context.get_current())


def _retrieve(task: "asyncio.Task[Any]") -> None:
    # The Step that waits reads the error; an abandoned run's cancellation or error is nobody's.
    if not task.cancelled():
        task.exception()


@dataclass
class LiveModelStepCapability(ModelStepCapability):
    """`ModelStepCapability` that hands the run's deferred tool calls to its live run's Step (`LiveRun.handle`).

    It also serves the run's model requests with `DeltaForwardingModel`, as `DeltaForwardingCapability`
    does for a model Step that is not live: a live run's agent is plain (no capability, toolset or
    instrumentation of its own, `_direct_tool.plain_agent`), so no other capability of the run wraps or
    picks the model, and the outermost wrapper is the innermost one.
    """

    live: LiveRun | None = None

    def get_wrapper_model(self, model: Model) -> Model | None:
        """Serve each request with a streamed one whose text and reasoning go to the live run's deltas."""
        if self.live is None:
            return None
        return DeltaForwardingModel(model, self.live.deltas)

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        """Wait for the next Step's results, or decline (the run ends with the requests)."""
        if self.live is None:
            return None
        return await self.live.handle(ctx, requests)


class LiveRuns:
    """The live runs one runner keeps, by (session, turn): bounded, each abandoned after an idle wait."""

    def __init__(self, limit: int = LIVE_RUN_LIMIT, idle_seconds: float = LIVE_RUN_IDLE_SECONDS) -> None:
        """Keep at most ``limit`` runs, each at most ``idle_seconds`` between Steps."""
        self._limit = limit
        self._idle_seconds = idle_seconds
        self._runs: OrderedDict[tuple[str, str], tuple[LiveRun, asyncio.TimerHandle]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._runs)

    def keep(self, live: LiveRun) -> None:
        """Keep ``live`` until its next Step takes it (abandoning a run kept for the same turn)."""
        self.discard(live.key)
        timer = asyncio.get_running_loop().call_later(self._idle_seconds, self.discard, live.key)
        self._runs[live.key] = (live, timer)
        while len(self._runs) > self._limit:
            oldest = next(iter(self._runs))
            self.discard(oldest)

    def take(self, key: tuple[str, str]) -> LiveRun | None:
        """Remove and return the live run of ``key``, if any."""
        entry = self._runs.pop(key, None)
        if entry is None:
            return None
        live, timer = entry
        timer.cancel()
        return live

    def discard(self, key: tuple[str, str]) -> None:
        """Abandon the live run of ``key``, if any."""
        live = self.take(key)
        if live is not None:
            live.abandon()
