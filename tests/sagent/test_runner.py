"""`SagentRunner` through whole sessions on the engine-free host: effects, waves, tool state, errors, usage."""

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sagent.agent.agent import Agent
from sagent.agent.runtime import EXCLUSIVE_KEY, AgentRuntime
from sagent.agent.state import ToolState, get_tool_state
from sagent.testing import _NullModel
from sagent.tools import AgentSpawn, Bash, Read
from sagent.types.runtime import ToolCall, ToolResult, UserMessage

from dex_agents import AgentSessionOptions, MessageRole, ToolCallStatus, ToolEffect, ToolPolicy
from dex_agents.adapters.sagent import SagentRunner, _codec, sagent_session_flow
from dex_agents.adapters.sagent._effects import framework_effect, merge_tool_states, serialize_key, waves
from dex_agents.application.next import GoTo, StepName
from dex_agents.domain.events import ReasoningDeltaPayload, TextDeltaPayload, ToolCallDeferredPayload
from dex_agents.domain.snapshot import AgentSnapshot
from dex_agents.testing.memory import InMemorySessionHost
from tests.sagent.order_agent import STATE_ENV, TOOL_POLICIES, build_agent, invocations, notes_file
from tests.sagent.scripted_model import ScriptedModel, call, script


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(STATE_ENV, str(tmp_path))
    return tmp_path


class Session:
    """One session on the engine-free host, and the Steps it left waiting."""

    def __init__(self, policies: dict[str, ToolPolicy] | None = None, **options: object) -> None:
        chosen = AgentSessionOptions(
            tool_policies=TOOL_POLICIES if policies is None else policies,
            **options,  # type: ignore[arg-type]
        )
        self.host = InMemorySessionHost(SagentRunner(build_agent), options=chosen)
        self.waiting: tuple[GoTo, ...] = ()

    async def turn(self, text: str, *, approve: bool = True) -> AgentSnapshot:
        """Run one turn to its end, answering every approval."""
        host = self.host
        if not host.executed:
            waiting = await host.drive(await host.start(text))
        else:
            await host.send_user_message(text)
            waiting = await host.drive(*self.waiting)
        while True:
            snapshot = await host.get_agent_snapshot()
            if not snapshot.pending_interrupts:
                self.waiting = waiting
                return snapshot
            for interrupt in snapshot.pending_interrupts:
                await host.resolve_interrupt(interrupt.interrupt_id, approved=approve, rejection_message="no")
            waiting = await host.drive(*waiting)


def answer(snapshot: AgentSnapshot) -> str:
    text = snapshot.messages[-1].text
    assert text is not None
    return text


def steps(session: Session) -> list[str]:
    return [step.value for step, _, _ in session.host.executed]


# -- effects ---------------------------------------------------------------------------------------------------------


def test_sagents_bash_classifier_gives_read_for_a_read_only_command_and_nothing_for_a_writer() -> None:
    bash, state = Bash(), ToolState()

    ls = ToolCall(id="a", name="Bash", args={"command": "ls -la /tmp | head"})
    rm = ToolCall(id="b", name="Bash", args={"command": "rm -rf /tmp/x"})
    assert framework_effect(bash, serialize_key(bash, ls, state)) is ToolEffect.READ
    assert framework_effect(bash, serialize_key(bash, rm, state)) is None
    read = Read()
    cat = ToolCall(id="c", name="Read", args={"file_path": "/tmp/x"})
    assert framework_effect(read, serialize_key(read, cat, state)) is None
    assert framework_effect(None, None) is None


async def effects_of(host: Session) -> dict[str, tuple[str, bool]]:
    return {
        e.payload.tool_name + ":" + e.payload.tool_call_id: (e.payload.effect.value, e.payload.requires_approval)
        for e in host.host.sink.events
        if isinstance(e.payload, ToolCallDeferredPayload)
    }


async def test_policies_come_first_then_the_bash_classifier_then_the_default_effect(state_dir: Path) -> None:
    host = Session({"find_order": ToolPolicy(ToolEffect.READ)}, default_tool_effect=ToolEffect.IDEMPOTENT_WRITE)
    await host.turn(
        script(
            [
                call("f1", "find_order", order_id="7"),
                call("b1", "Bash", command="echo hi"),
                call("b2", "Bash", command=f"touch {state_dir / 'written.txt'}"),
                call("w1", "write"),
            ]
        ),
    )
    assert await effects_of(host) == {
        "find_order:f1": ("read", False),
        "Bash:b1": ("read", False),
        "Bash:b2": ("idempotent_write", False),
        "write:w1": ("idempotent_write", False),
    }
    explicit = Session({"Bash": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)})
    await explicit.turn(script([call("b1", "Bash", command="echo hi")]))
    assert await effects_of(explicit) == {"Bash:b1": ("non_idempotent_write", False)}


def test_waves_follow_sagents_grouping_by_serialize_key() -> None:
    calls = [ToolCall(id=i, name="t", args={}) for i in "abcdef"]
    assert waves(calls, [None, "f", None, "g", "f", "f"]) == [["a", "b", "c", "d"], ["e"], ["f"]]
    assert waves(calls, [None, "f", EXCLUSIVE_KEY, "g", None, "f"]) == [["a", "b", "e"], ["c"], ["d"], ["f"]]
    assert waves(calls, [None] * 6) == [list("abcdef")]


def test_tool_states_merge_in_call_order_keeping_what_each_call_changed() -> None:
    base = {"bash_cwd": "/a", "read_cache": [{"path": "/x", "mtime": 1.0}], "recent_files": ["/x"]}
    one = {"bash_cwd": "/a", "read_cache": [{"path": "/x", "mtime": 1.0}, {"path": "/y"}], "recent_files": ["/x", "/y"]}
    two = {"bash_cwd": "/b", "read_cache": [], "recent_files": ["/z"]}
    merged = merge_tool_states(base, [one, two])
    assert merged["bash_cwd"] == "/b"
    assert merged["read_cache"] == [{"path": "/y"}]
    assert merged["recent_files"] == ["/x", "/y", "/z"]


# -- sessions --------------------------------------------------------------------------------------------------------


async def test_a_multi_turn_session_with_read_write_and_approval_tools(state_dir: Path) -> None:
    host = Session()
    first = await host.turn(
        script(
            [call("f1", "find_order", order_id="7")],
            [call("r1", "refund_order", order_id="7")],
            [call("e1", "email_customer", order_id="7", text="on its way")],
            "Order 7 is refunded.",
            name="order",
        ),
    )
    assert answer(first) == "Order 7 is refunded."
    assert [(m.role, m.tool_call_id, m.tool_name) for m in first.messages] == [
        (MessageRole.USER, None, None),
        (MessageRole.ASSISTANT, "f1", "find_order"),
        (MessageRole.TOOL, "f1", "find_order"),
        (MessageRole.ASSISTANT, "r1", "refund_order"),
        (MessageRole.TOOL, "r1", "refund_order"),
        (MessageRole.ASSISTANT, "e1", "email_customer"),
        (MessageRole.TOOL, "e1", "email_customer"),
        (MessageRole.ASSISTANT, None, None),
    ]
    refund = _codec.decode_entry(first.messages[4].framework_item)
    assert isinstance(refund, ToolResult)
    assert refund.content == "refund of 7 with key session-1/turn-1/r1"
    assert StepName.AWAIT_TOOL_APPROVAL in [step for step, _, _ in host.host.executed]
    second = await host.turn(script("@context", name="two"))
    seen = answer(second)
    assert SYSTEM_PROMPT in seen
    assert '"users": ["{' in seen  # both turns' user messages reached the model
    assert second.usage.model_calls == 5
    assert [e["name"] for e in invocations().entries() if e["kind"] == "tool"] == [
        "find_order",
        "refund_order",
        "email_customer",
    ]


SYSTEM_PROMPT = "You help customers with their orders."


async def test_a_rejected_approval_reaches_the_model_as_a_tool_error_and_nothing_runs() -> None:
    host = Session()
    snapshot = await host.turn(script([call("r1", "refund_order", order_id="7")]), approve=False)
    assert answer(snapshot).startswith("refund_order[error]=")
    assert "no" in answer(snapshot)
    assert invocations().count("tool") == 0


async def test_an_error_result_is_a_failed_call_the_model_sees_and_an_exception_is_a_retried_step_failure() -> None:
    host = Session()
    snapshot = await host.turn(
        script([call("a", "fail_me"), call("b", "crash"), call("c", "find_order"), call("d", "no_such_tool")]),
    )
    text = answer(snapshot)
    assert "fail_me[error]=the order is locked" in text
    assert "crash[error]=" in text
    assert "disk full" in text
    assert "find_order[error]=InputValidationError" in text  # sagent's validation: order_id is required
    assert "no_such_tool[error]=Unknown tool 'no_such_tool'" in text
    assert invocations().count("tool", "fail_me") == 1
    assert invocations().count("tool", "crash") == 3  # a read: three attempts, then failed
    assert invocations().count("tool", "find_order") == 0
    (outcomes,) = [m.tool_outcomes for m in snapshot.messages if m.tool_outcomes and m.tool_call_id == "a"]
    assert outcomes[0].status is ToolCallStatus.FAILED


async def test_calls_sharing_a_serialize_key_run_in_waves_and_each_sees_the_tool_state_the_last_left(
    state_dir: Path,
) -> None:
    target = notes_file(state_dir)
    host = Session()
    snapshot = await host.turn(
        script(
            [
                call("r1", "Read", file_path=str(target)),
                call("e1", "Write", file_path=str(target), content="bye world\n"),
                call("f1", "find_order", order_id="7"),
            ],
            name="waves",
        ),
    )
    assert target.read_text() == "bye world\n"
    assert "Write[ok]=" in answer(snapshot)
    # One model call asked for all three; the Write's wave came from a RunModel without a model call.
    assert snapshot.usage.model_calls == 2
    assert steps(host) == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "CallTool",
        "ResumeTurn",
        "RunModel",
        "CallTool",  # the wave's one call: its tool Step resumes the turn
        "RunModel",
    ]


async def test_a_write_over_a_file_read_in_another_session_is_refused_so_the_read_cache_is_per_session(
    state_dir: Path,
) -> None:
    target = notes_file(state_dir)
    reader = Session()
    await reader.turn(script([call("r1", "Read", file_path=str(target))]))
    other = Session()
    snapshot = await other.turn(script([call("e1", "Write", file_path=str(target), content="bye world\n")]))
    assert answer(snapshot).startswith("Write[error]=File not yet read")
    assert target.read_text() == "hello world\n"
    assert get_tool_state().read_cache == {}  # sagent's process-global fallback was never used


async def test_the_tool_state_carries_to_later_turns_through_the_stored_messages(state_dir: Path) -> None:
    target = notes_file(state_dir)
    host = Session()
    await host.turn(script([call("r1", "Read", file_path=str(target))], "read it"))
    snapshot = await host.turn(script([call("e1", "Write", file_path=str(target), content="bye world\n")]))
    assert answer(snapshot).startswith("Write[ok]=")
    assert target.read_text() == "bye world\n"
    stored = _codec.latest_tool_state(snapshot.messages)
    assert stored is not None
    assert str(target.resolve()) in json.dumps(stored["read_cache"])


async def test_usage_counts_tokens_and_cost_and_text_and_thinking_stream_as_events() -> None:
    host = Session()
    snapshot = await host.turn(
        script(
            {"think": "Let me check.", "text": "Checking.", "calls": [call("f1", "find_order", order_id="7")]}, "ok"
        ),
    )
    usage = snapshot.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (2, 260, 40, 60)
    assert usage.cost_usd == pytest.approx(0.006)
    pieces = [
        (e.type.value, e.payload.text)
        for e in host.host.sink.events
        if isinstance(e.payload, TextDeltaPayload | ReasoningDeltaPayload)
    ]
    assert pieces == [
        ("reasoning_delta", "Let me"),
        ("reasoning_delta", " check."),
        ("text_delta", "Chec"),
        ("text_delta", "king."),
        ("text_delta", "o"),
        ("text_delta", "k"),
    ]
    assistant = _codec.decode_entry(snapshot.messages[1].framework_item)
    assert assistant.thinking_blocks[0]["thinking"] == "Let me check."  # type: ignore[union-attr]


async def test_a_failed_model_request_fails_the_attempt_with_sagents_classification() -> None:
    host = Session()
    snapshot = await host.turn(script({"fail": "the model is down"}))
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is not None
    assert "RuntimeError: the model is down" in snapshot.state.last_turn_error
    assert "[sagent: not retryable]" in snapshot.state.last_turn_error
    assert invocations().count("model") == 3  # Dex retried the Step; sagent's own retry loop never ran


async def test_a_cut_stream_is_a_retryable_model_failure() -> None:
    host = Session()
    snapshot = await host.turn(script({"text": "half an ans", "stop": "model_unknown"}))
    assert snapshot.state is not None
    assert snapshot.state.last_turn_error is not None
    assert "the model's stream was cut" in snapshot.state.last_turn_error
    assert "[sagent: retryable]" in snapshot.state.last_turn_error
    assert invocations().count("model") == 3


def test_in_process_tools_and_a_session_dir_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="AgentSpawn"):
        sagent_session_flow(lambda: Agent(model=ScriptedModel(), tools=[AgentSpawn()]), flow_type="x")
    with pytest.raises(ValueError, match="session_dir"):
        sagent_session_flow(lambda: Agent(model=ScriptedModel(), session_dir=tmp_path), flow_type="x")


async def test_every_step_gets_a_fresh_agent_that_offers_no_background_calls() -> None:
    built: list[Agent] = []

    def factory() -> Agent:
        agent = build_agent()
        built.append(agent)
        return agent

    host = InMemorySessionHost(SagentRunner(factory), options=AgentSessionOptions(tool_policies=TOOL_POLICIES))
    assert len(built) == 1  # the check at construction
    await host.drive(await host.start(script([call("a", "read_tool"), call("b", "read_tool")], "done")))
    assert len(built) == 1 + 2 + 2  # two model Steps, two tool Steps
    assert len({id(agent) for agent in built}) == len(built)
    assert all(agent.allow_background is False for agent in built)
    offered = [str(tool.directive_schema) for tool in built[-1].live_tools()]
    assert offered
    assert all("background" not in schema and "delay" not in schema for schema in offered)
    assert isinstance(_codec.decode_entry(SagentRunner(factory).build_user_message("x").framework_item), UserMessage)


def test_the_flow_builder_merges_tool_policies_over_the_options_and_keeps_the_rest() -> None:
    options = AgentSessionOptions(
        default_tool_effect=ToolEffect.READ,
        tool_policies={"find_order": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE), "write": ToolPolicy(ToolEffect.READ)},
    )
    flow = sagent_session_flow(
        build_agent,
        flow_type="Merged",
        tool_policies={"find_order": ToolPolicy(ToolEffect.READ)},
        options=options,
    )
    assert flow.get_flow_type() == "Merged"
    assert isinstance(flow.runner, SagentRunner)
    assert flow.options.default_tool_effect is ToolEffect.READ
    assert dict(flow.options.tool_policies) == {
        "find_order": ToolPolicy(ToolEffect.READ),
        "write": ToolPolicy(ToolEffect.READ),
    }
    assert sagent_session_flow(build_agent, flow_type="Plain").options == AgentSessionOptions()


class _KeyedTool:
    """A lean runtime tool whose ``serialize_key`` is its call's ``key`` argument."""

    name = "keyed"

    def serialize_key(self, args: Mapping[str, object]) -> str | None:
        key = args.get("key")
        return key if isinstance(key, str) else None

    async def run(self, args: Mapping[str, object]) -> ToolResult:
        return ToolResult(call_id="", content="")


@given(st.lists(st.sampled_from([None, "f", "g", "h", EXCLUSIVE_KEY]), max_size=8))
def test_waves_hand_out_exactly_the_groups_sagents_own_runtime_would_serialize(keys: list[str | None]) -> None:
    calls = [ToolCall(id=f"c{i}", name="keyed", args={"key": key}) for i, key in enumerate(keys)]
    groups = AgentRuntime(model=_NullModel(), tools=[_KeyedTool()])._partition_cohort(calls)
    handed = waves(calls, keys)
    # Every call once; wave n holds the n-th call of each group, so a group's calls run in its order, one at a time.
    assert sorted(call_id for wave in handed for call_id in wave) == sorted(call.id for call in calls)
    depth = max((len(group) for group in groups), default=0)
    assert handed == [[group[n].id for group in groups if n < len(group)] for n in range(depth)]
