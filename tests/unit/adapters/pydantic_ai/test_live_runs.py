"""Live runs: one agent run serves a turn's model Steps, and every Step answers what the durable path answers.

Each case drives the same sessions through a runner with live runs (the default) and one without
(``live_runs=False``), and compares every model Step's outcome: the run state's messages, the
requested calls and their policies, the usage, and the turn's stored messages, up to the two fields
a live run changes (``timestamp`` and ``run_id``). That the live path was taken shows in the
messages themselves: a live turn's messages carry one ``run_id``, a durable turn's one per model Step.
"""

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pytest
from pydantic_ai import Agent, DeferredToolRequests, ModelMessagesTypeAdapter, ModelRetry, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from dex_agents import (
    AgentMessage,
    AgentTurnContext,
    AgentUserMessage,
    ToolCallsRequested,
    TurnCompleted,
)
from dex_agents.adapters.pydantic_ai import PydanticAIRunner, _history
from dex_agents.adapters.pydantic_ai._history import (
    ENCODED_MESSAGES_CHARACTERS,
    EncodedMessages,
    RunState,
    dump_message,
)
from dex_agents.adapters.pydantic_ai._live_runs import LiveRun, LiveRuns
from dex_agents.domain.errors import RunnerContractError
from dex_agents.domain.events import TextDeltaPayload
from dex_agents.testing import RecordingEventSink, make_tool_call, make_turn_context
from tests.unit.adapters.pydantic_ai.support import Approval, SessionDriver, Turn

Script = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


def batches(k: int, m: int) -> Script:
    """A model that asks for ``m`` calls of ``work`` ``k`` times in a turn, then answers."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        start = max(
            i for i, message in enumerate(messages) if isinstance(message, ModelRequest) and message_has_prompt(message)
        )
        done = sum(isinstance(message, ModelResponse) for message in messages[start:])
        if done < k:
            seq = sum(isinstance(message, ModelResponse) for message in messages)
            return ModelResponse(
                parts=[ToolCallPart("work", {"n": seq * 100 + j}, tool_call_id=f"c{seq}-{j}") for j in range(m)]
            )
        return ModelResponse(parts=[TextPart(f"done after {done} batches")])

    return respond


def message_has_prompt(message: ModelRequest) -> bool:
    return any(part.part_kind == "user-prompt" for part in message.parts)


def build_agent(script: Script, **kwargs: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(script), instructions="Do the work.", **kwargs)

    @agent.tool_plain
    def work(n: int) -> str:
        """Do one piece of work."""
        if n % 100 == 3:
            raise ModelRetry("n ending in 3 is refused, try another")
        return f"result {n}"

    return agent


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {key: _strip(item) for key, item in value.items() if key not in ("timestamp", "run_id")}
    if isinstance(value, list):
        return [_strip(item) for item in value]
    return value


def _messages_json(messages: list[ModelMessage] | tuple[ModelMessage, ...]) -> object:
    return _strip(json.loads(ModelMessagesTypeAdapter.dump_json(list(messages))))


def comparable(turn: Turn) -> list[object]:
    """Every model Step's outcome without the fields a live run changes."""
    steps: list[object] = []
    for outcome in turn.outcomes:
        if isinstance(outcome, ToolCallsRequested):
            state = RunState.decode(outcome.framework_run_state)
            steps.append(
                ("calls", _messages_json(state.messages), state.tool_call_ids, outcome.tool_calls, outcome.usage)
            )
        else:
            stored = [_strip(json.loads(m.framework_item)) for m in outcome.new_messages]
            display = [(m.role, m.text, m.tool_name, m.tool_call_id) for m in outcome.new_messages]
            steps.append(("completed", stored, display, outcome.usage))
    if turn.error is not None:
        steps.append(("error", type(turn.error), str(turn.error)))
    return steps


def run_ids(turn: Turn) -> set[str]:
    """The ``run_id`` values of the turn's model responses."""
    last = turn.outcomes[-1]
    assert isinstance(last, TurnCompleted)
    ids: set[str] = set()
    for message in last.new_messages:
        for item in json.loads(message.framework_item):
            if item.get("kind") == "response":
                ids.add(item["run_id"])
    return ids


async def both_ways(
    agent: Agent[None, str], texts: list[str], approve: Approval = True, **runner: Any
) -> tuple[list[Turn], list[Turn]]:
    live = SessionDriver(PydanticAIRunner(agent, **runner), approve=lambda _record: approve)
    durable = SessionDriver(PydanticAIRunner(agent, live_runs=False, **runner), approve=lambda _record: approve)
    live_turns = [await live.turn(text) for text in texts]
    durable_turns = [await durable.turn(text) for text in texts]
    return live_turns, durable_turns


async def test_a_turn_of_several_tool_batches_runs_as_one_live_run_with_the_durable_outcomes() -> None:
    live, durable = await both_ways(build_agent(batches(3, 2)), ["first", "second"])

    assert [comparable(t) for t in live] == [comparable(t) for t in durable]
    assert all(len(run_ids(t)) == 1 for t in live)
    assert all(len(run_ids(t)) == 4 for t in durable)


async def test_turns_after_two_stored_requests_in_a_row_keep_every_message_of_theirs() -> None:
    # A cancelled or failed turn stores its user message and then a note: two requests in a row, which
    # Pydantic AI merges into one when it reads the history, so the run holds one message fewer than given.
    agent = build_agent(batches(1, 1))
    turns: list[list[Turn]] = []
    for runner in (PydanticAIRunner(agent), PydanticAIRunner(agent, live_runs=False)):
        driver = SessionDriver(runner)
        driver.turn_count = 1
        driver._store(runner.build_user_message("refund order 7"), "turn-1")
        driver._store(runner.build_user_message("[Dex] The user cancelled the previous turn."), "turn-1")
        turns.append([await driver.turn(text) for text in ("first", "second", "third")])
    live, durable = turns

    assert [comparable(t) for t in live] == [comparable(t) for t in durable]
    for turn in live:
        completed = turn.outcomes[-1]
        assert isinstance(completed, TurnCompleted)
        kinds = [
            [part["part_kind"] for item in json.loads(m.framework_item) for part in item["parts"]]
            for m in completed.new_messages
        ]
        # The opening request is stored too: it carried the agent's instructions.
        assert kinds == [["user-prompt"], ["tool-call"], ["tool-return"], ["text"]], turn.turn_id
        assert len(run_ids(turn)) == 1


async def test_a_turn_without_tools_completes_the_same_way() -> None:
    live, durable = await both_ways(build_agent(batches(0, 0)), ["hi"])

    assert [comparable(t) for t in live] == [comparable(t) for t in durable]


async def test_a_retry_answer_ends_the_live_run_and_the_turn_goes_on_as_a_resumed_run_would() -> None:
    # Call c0-3 raises ModelRetry in its Step (recorded failed, its retried part kept): a live run would
    # build the retry without its count, so each later model Step is a new run over the run state.
    live, durable = await both_ways(build_agent(batches(2, 4)), ["go"])

    assert any(r.status.value == "failed" for r in live[0].records)
    assert [comparable(t) for t in live] == [comparable(t) for t in durable]
    assert len(run_ids(live[0])) == 3


async def test_a_run_with_a_retry_prompt_ends_at_its_deferral_and_the_next_step_is_a_new_run() -> None:
    calls = iter([0, 1, 2, 3])

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = next(calls, 9)
        if step == 0:
            return ModelResponse(parts=[ToolCallPart("work", {"n": "not a number"}, tool_call_id="bad")])
        if step == 1:
            return ModelResponse(parts=[ToolCallPart("work", {"n": 1}, tool_call_id="good")])
        return ModelResponse(parts=[TextPart("done")])

    live_turn = await SessionDriver(PydanticAIRunner(build_agent(respond))).turn("go")
    calls = iter([0, 1, 2, 3])
    durable_turn = await SessionDriver(PydanticAIRunner(build_agent(respond), live_runs=False)).turn("go")

    assert comparable(live_turn) == comparable(durable_turn)
    assert len(run_ids(live_turn)) == 2  # the invalid call's retry stays in the first run, which then ends


async def test_an_agent_with_a_deps_factory_runs_live_and_the_factory_runs_before_every_step_as_before() -> None:
    built: dict[str, int] = {"live": 0, "durable": 0}
    counting = "live"

    def factory(_session_id: str) -> None:
        built[counting] += 1

    agent = build_agent(batches(2, 1))
    live_driver = SessionDriver(PydanticAIRunner(agent, deps_factory=factory))
    durable_driver = SessionDriver(PydanticAIRunner(agent, deps_factory=factory, live_runs=False))
    live = await live_driver.turn("go")
    counting = "durable"
    durable = await durable_driver.turn("go")

    assert comparable(live) == comparable(durable)
    assert len(run_ids(live)) == 1
    assert built == {"live": 5, "durable": 5}  # 3 model Steps and 2 tool Steps each


async def test_a_deps_factory_that_raises_in_a_continued_step_fails_it_and_ends_the_live_run() -> None:
    failing = iter([False, True])

    def factory(_session_id: str) -> None:
        if next(failing, False):
            raise ConnectionError("the deps could not be built")

    runner = PydanticAIRunner(build_agent(batches(1, 1)), deps_factory=factory)
    messages, outcome = await first_step(runner, RecordingEventSink())
    live = runner._live
    assert live is not None
    kept = live._runs[("session-1", "turn-1")][0]

    with pytest.raises(ConnectionError, match="could not be built"):
        await runner.run_model_step(second_step(messages, outcome))
    done = await runner.run_model_step(second_step(messages, outcome))

    assert kept.abandoned
    assert isinstance(done, TurnCompleted)
    assert len(run_ids_of(done)) == 2


async def test_an_agent_with_an_instructions_function_takes_the_durable_path() -> None:
    agent = build_agent(batches(2, 1))

    @agent.instructions
    def step_count() -> str:
        return "Be brief."

    live, durable = await both_ways(agent, ["go"])

    assert [comparable(t) for t in live] == [comparable(t) for t in durable]
    assert len(run_ids(live[0])) == 3


@pytest.mark.parametrize(("answer", "status"), [(True, "succeeded"), ("not today", "rejected"), (None, "expired")])
async def test_an_approval_answer_reaches_the_live_run_as_it_reaches_a_resumed_run(
    answer: Approval, status: str
) -> None:
    # The model Step defers every function tool, approval or not: the session approves between Steps.
    agent = build_agent(batches(1, 1))

    @agent.tool_plain(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if sum(isinstance(m, ModelResponse) for m in messages) == 0:
            return ModelResponse(parts=[ToolCallPart("pay", {"amount": 3}, tool_call_id="p1")])
        return ModelResponse(parts=[TextPart("paid it")])

    agent.model = FunctionModel(respond)
    live, durable = await both_ways(agent, ["pay"], approve=answer)

    assert [comparable(t) for t in live] == [comparable(t) for t in durable]
    assert live[0].records[0].status.value == status
    assert len(run_ids(live[0])) == (1 if status == "succeeded" else 2)


async def first_step(
    runner: PydanticAIRunner[None], sink: RecordingEventSink
) -> tuple[list[AgentMessage], ToolCallsRequested]:
    messages = [AgentMessage.stored(runner.build_user_message("go"), sequence=1, turn_id="turn-1")]
    outcome = await runner.run_model_step(make_turn_context(messages=messages, turn_id="turn-1", sink=sink))
    assert isinstance(outcome, ToolCallsRequested)
    return messages, outcome


def results_of(outcome: ToolCallsRequested) -> list[Any]:
    return [make_tool_call(c.tool_call_id, c.tool_name, turn_id="turn-1", output="ok") for c in outcome.tool_calls]


def second_step(messages: list[AgentMessage], outcome: ToolCallsRequested, **context: Any) -> AgentTurnContext:
    """The context of the turn's next model Step, every call answered ``ok``."""
    return make_turn_context(
        messages=messages,
        turn_id="turn-1",
        framework_run_state=outcome.framework_run_state,
        tool_calls=results_of(outcome),
        **context,
    )


async def test_the_continued_model_request_writes_its_text_to_the_events_of_the_step_it_serves() -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if sum(isinstance(m, ModelResponse) for m in messages) == 0:
            return ModelResponse(parts=[ToolCallPart("work", {"n": 1}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("the answer")])

    runner = PydanticAIRunner(build_agent(respond))
    first_sink, second_sink = RecordingEventSink(), RecordingEventSink()
    messages, outcome = await first_step(runner, first_sink)
    done = await runner.run_model_step(
        second_step(messages, outcome, step_execution_id="run-model-2", sink=second_sink)
    )

    assert isinstance(done, TurnCompleted)
    assert len(run_ids_of(done)) == 1
    assert "the answer" in "".join(
        e.payload.text for e in second_sink.events if isinstance(e.payload, TextDeltaPayload)
    )
    assert not [e for e in first_sink.events if isinstance(e.payload, TextDeltaPayload)]


def run_ids_of(done: TurnCompleted) -> set[str]:
    return {
        item["run_id"]
        for message in done.new_messages
        for item in json.loads(message.framework_item)
        if item.get("kind") == "response"
    }


async def test_a_step_with_another_run_state_abandons_the_live_run_and_resumes_durably() -> None:
    runner = PydanticAIRunner(build_agent(batches(1, 1)))
    messages, outcome = await first_step(runner, RecordingEventSink())
    live = runner._live
    assert live is not None
    assert len(live) == 1
    other = RunState.decode(outcome.framework_run_state)
    changed = RunState(messages=other.messages, tool_call_ids=other.tool_call_ids).encode() + " "

    done = await runner.run_model_step(
        make_turn_context(
            messages=messages, turn_id="turn-1", framework_run_state=changed, tool_calls=results_of(outcome)
        )
    )

    assert isinstance(done, TurnCompleted)
    assert len(live) == 0
    assert len(run_ids_of(done)) == 2


async def test_a_step_with_steered_messages_abandons_the_live_run_and_the_messages_reach_the_model() -> None:
    seen: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if sum(isinstance(m, ModelResponse) for m in messages) == 0:
            return ModelResponse(parts=[ToolCallPart("work", {"n": 1}, tool_call_id="c1")])
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        seen.extend(str(part.content) for part in last.parts if part.part_kind == "user-prompt")
        return ModelResponse(parts=[TextPart("ok")])

    runner = PydanticAIRunner(build_agent(respond))
    messages, outcome = await first_step(runner, RecordingEventSink())
    context = second_step(messages, outcome)
    steered = AgentUserMessage(text="also check order 9", client_message_id="m2")
    done = await runner.run_model_step(attrs.evolve(context, steered_messages=(steered,)))

    assert isinstance(done, TurnCompleted)
    assert seen == ["also check order 9"]
    assert len(run_ids_of(done)) == 2


async def test_a_model_error_in_a_continued_step_is_raised_and_the_retry_resumes_durably() -> None:
    failures = iter([True])

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if sum(isinstance(m, ModelResponse) for m in messages) == 0:
            return ModelResponse(parts=[ToolCallPart("work", {"n": 1}, tool_call_id="c1")])
        if next(failures, False):
            raise RuntimeError("the provider is down")
        return ModelResponse(parts=[TextPart("ok")])

    runner = PydanticAIRunner(build_agent(respond))
    messages, outcome = await first_step(runner, RecordingEventSink())
    context = second_step(messages, outcome)

    with pytest.raises(RuntimeError, match="the provider is down"):
        await runner.run_model_step(context)
    done = await runner.run_model_step(context)

    assert isinstance(done, TurnCompleted)
    assert len(run_ids_of(done)) == 2


async def test_a_cancelled_step_cancels_its_live_run() -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if sum(isinstance(m, ModelResponse) for m in messages) == 0:
            return ModelResponse(parts=[ToolCallPart("work", {"n": 1}, tool_call_id="c1")])
        started.set()
        await release.wait()
        return ModelResponse(parts=[TextPart("never")])

    runner = PydanticAIRunner(build_agent(respond))  # type: ignore[arg-type]
    messages, outcome = await first_step(runner, RecordingEventSink())
    live = runner._live
    assert live is not None
    kept = live._runs[("session-1", "turn-1")][0]
    step = asyncio.create_task(runner.run_model_step(second_step(messages, outcome)))
    await started.wait()
    step.cancel()
    with pytest.raises(asyncio.CancelledError):
        await step
    task = kept._task
    assert task is not None
    await asyncio.wait({task}, timeout=5)

    assert kept.abandoned
    assert task.cancelled()


async def test_the_registry_keeps_a_bounded_number_of_runs_and_abandons_idle_ones() -> None:
    runs = LiveRuns(limit=2, idle_seconds=0.01)
    kept = [LiveRun(("s", str(i)), None, base=0, turn_base=[]) for i in range(3)]
    for live in kept:
        runs.keep(live)

    assert [live.abandoned for live in kept] == [True, False, False]
    await asyncio.sleep(0.05)
    assert len(runs) == 0
    assert all(live.abandoned for live in kept)
    assert runs.take(("s", "1")) is None


def test_a_live_run_left_on_another_event_loop_is_not_continued() -> None:
    runner = PydanticAIRunner(build_agent(batches(1, 1)))

    async def first() -> tuple[list[AgentMessage], ToolCallsRequested]:
        return await first_step(runner, RecordingEventSink())

    messages, outcome = asyncio.run(first())

    async def second() -> TurnCompleted | ToolCallsRequested:
        return await runner.run_model_step(second_step(messages, outcome))

    done = asyncio.run(second())

    assert isinstance(done, TurnCompleted)
    assert len(run_ids_of(done)) == 2


async def test_a_step_without_the_records_of_its_calls_fails_as_the_durable_path_does_and_ends_the_live_run() -> None:
    runner = PydanticAIRunner(build_agent(batches(1, 1)))
    messages, outcome = await first_step(runner, RecordingEventSink())
    live = runner._live
    assert live is not None
    kept = live._runs[("session-1", "turn-1")][0]
    context = make_turn_context(
        messages=messages, turn_id="turn-1", framework_run_state=outcome.framework_run_state, tool_calls=[]
    )

    with pytest.raises(RunnerContractError, match="has no record"):
        await runner.run_model_step(context)
    task = kept._task
    assert task is not None
    await asyncio.wait({task}, timeout=5)

    assert kept.abandoned
    assert task.cancelled()
    with pytest.raises(RunnerContractError, match="has no record"):
        await PydanticAIRunner(build_agent(batches(1, 1)), live_runs=False).run_model_step(context)


def with_tool_prepare() -> Agent[None, str]:
    agent = build_agent(batches(2, 1))

    async def keep(ctx: RunContext[None], definition: ToolDefinition) -> ToolDefinition | None:
        return definition  # could read ctx.run_step, which a live run does not reset

    agent.tool_plain(name="spare", prepare=keep)(work_plain)
    return agent


def with_args_validator() -> Agent[None, str]:
    agent = build_agent(batches(2, 1))

    def check(ctx: RunContext[None], n: int) -> None:
        return None

    agent.tool_plain(name="checked", args_validator=check)(work_plain)
    return agent


def with_output_validator() -> Agent[None, Any]:
    agent: Agent[None, Any] = Agent(
        FunctionModel(batches(2, 1)), output_type=[str, DeferredToolRequests], instructions="Do the work."
    )
    agent.tool_plain(name="work")(work_plain)

    @agent.output_validator
    def accept(ctx: RunContext[None], output: Any) -> Any:
        return output

    return agent


def work_plain(n: int) -> str:
    """Do one piece of work."""
    return f"result {n}"


async def test_an_agent_with_a_static_system_prompt_stores_the_same_turns_both_ways() -> None:
    agent: Agent[None, str] = Agent(FunctionModel(batches(2, 2)), system_prompt="You do the work.")
    agent.tool_plain(name="work")(work_plain)

    live, durable = await both_ways(agent, ["first", "second", "third"])

    assert [comparable(t) for t in live] == [comparable(t) for t in durable]
    assert all(len(run_ids(t)) == 1 for t in live)


def with_model_settings_function() -> Agent[None, str]:
    agent = build_agent(batches(2, 1))
    agent.model_settings = lambda ctx: {"temperature": 0.0}
    return agent


def with_metadata_function() -> Agent[None, str]:
    agent: Agent[None, str] = Agent(
        FunctionModel(batches(2, 1)), instructions="Do the work.", metadata=lambda ctx: {"step": ctx.run_step}
    )
    agent.tool_plain(name="work")(work_plain)
    return agent


@pytest.mark.parametrize(
    "build",
    [
        with_tool_prepare,
        with_args_validator,
        with_output_validator,
        with_model_settings_function,
        with_metadata_function,
    ],
    ids=["prepare", "args", "output", "settings", "metadata"],
)
async def test_an_agent_whose_step_code_reads_the_run_context_takes_the_durable_path(
    build: Callable[[], Agent[None, Any]],
) -> None:
    live, durable = await both_ways(build(), ["go"])

    assert [comparable(t) for t in live] == [comparable(t) for t in durable]
    assert len(run_ids(live[0])) == 3


class CheckedEncodedMessages(EncodedMessages):
    """The run state's encode cache, checking every body and item it hands out against a fresh encode of the message."""

    def __init__(self) -> None:
        super().__init__(ENCODED_MESSAGES_CHARACTERS)
        self.checked = 0
        self.items = 0

    def bodies(self, messages: Sequence[ModelMessage]) -> list[str]:
        bodies = super().bodies(messages)
        assert bodies == EncodedMessages(0).bodies(messages)  # what a live run changed is written again
        self.checked += len(bodies)
        return bodies

    def item(self, message: ModelMessage) -> str | None:
        item = super().item(message)
        if item is not None:
            assert item == dump_message(message)
            self.items += 1
        return item


async def test_a_live_runs_run_states_reuse_only_bodies_equal_to_a_fresh_encode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked = CheckedEncodedMessages()
    monkeypatch.setattr(_history, "ENCODED_MESSAGES", checked)
    live, durable = await both_ways(build_agent(batches(4, 2)), ["go", "again"])

    assert [comparable(t) for t in live] == [comparable(t) for t in durable]
    assert all(len(run_ids(t)) == 1 for t in live)
    assert len(checked) > 0
    assert checked.checked > len(checked)
    assert checked.items > 0  # the turn's stored messages took their text from the run states
