"""The in-memory host refuses what a Step or RPC did not declare, and the Dex binding loads what each declares."""

from collections.abc import Callable
from typing import Any

import attrs
import dex
import pytest

from dex_agents import AgentSessionFlow
from dex_agents.application.declarations import RPC_DECLARATIONS, STEP_DECLARATIONS, Load, RpcName, Wait
from dex_agents.application.next import GoTo, StepName
from dex_agents.domain.history import ModelWindow
from dex_agents.domain.tools import ToolEffect, ToolPolicy
from dex_agents.domain.turns import TurnCompleted
from dex_agents.infrastructure.dex.options import dex_loads
from dex_agents.infrastructure.dex.persistence import (
    AGENT_TOOL_CALLS,
    FRAMEWORK_RUN_STATES,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TURN_CANCEL_REQUEST,
)
from dex_agents.infrastructure.dex.steps import STEP_CLASSES
from dex_agents.testing import (
    InMemorySessionHost,
    ScriptedRunner,
    assistant_message,
    deferred_tool_call,
    tool_calls_requested,
)
from dex_agents.testing.memory._loads import NotLoadedError

WINDOW = ModelWindow(first_sequence=1, last_sequence=2, summary_number=1)


async def test_a_step_reading_every_tool_call_record_without_declaring_it_fails_on_the_in_memory_host() -> None:
    host = InMemorySessionHost()
    call = host.step_call(StepName.CALL_TOOL)
    with host.attempt(StepName.CALL_TOOL, call, "call-1"), pytest.raises(NotLoadedError, match="CallTool"):
        host.tool_calls.all()


async def test_a_step_reading_the_run_state_or_another_calls_record_without_declaring_it_fails() -> None:
    host = InMemorySessionHost()
    call = host.step_call(StepName.RECORD_TOOL_FAILURE)
    with host.attempt(StepName.RECORD_TOOL_FAILURE, call, "call-1"):
        assert host.tool_calls.get("call-1") is None  # its own record: declared
        with pytest.raises(NotLoadedError):
            host.run_state.get()
        with pytest.raises(NotLoadedError):
            host.tool_calls.get("call-2")
        with pytest.raises(NotLoadedError):
            host.messages.read([1])


async def test_a_window_step_reads_only_the_window_of_its_movement() -> None:
    host = InMemorySessionHost()
    with host.moving(GoTo(step=StepName.RUN_MODEL, window=WINDOW)):
        call = host.step_call(StepName.RUN_MODEL)
        with host.attempt(StepName.RUN_MODEL, call, None):
            host.messages.read([1, 2])
            host.summaries.get(1)
            host.run_state.get()
            host.tool_calls.all()
            with pytest.raises(NotLoadedError):
                host.messages.read([3])
            with pytest.raises(NotLoadedError):
                host.summaries.get(2)


async def test_a_step_reads_back_what_it_wrote_itself_as_on_dex() -> None:
    host = InMemorySessionHost()
    call = host.step_call(StepName.RECORD_TOOL_FAILURE)
    with host.attempt(StepName.RECORD_TOOL_FAILURE, call, "call-1"):
        host.run_state.set("state")
        assert host.run_state.get() == "state"


async def test_an_rpc_reads_only_what_it_declares() -> None:
    host = InMemorySessionHost()
    with host.rpc(RpcName.RESOLVE_INTERRUPT):
        with pytest.raises(NotLoadedError, match="resolve_interrupt"):
            host.tool_calls.all()
        assert host.queue.pending() == ()  # Dex reads unloaded Channel messages as none
        with pytest.raises(NotLoadedError):
            host.queue.withdraw("m-1")
    with host.rpc(RpcName.GET_AGENT_SNAPSHOT):
        host.tool_calls.all()


async def test_outside_any_step_a_test_reads_everything() -> None:
    host = InMemorySessionHost()
    assert host.tool_calls.all() == ()
    assert host.run_state.get() is None


def _one_tool_call_runner() -> ScriptedRunner:
    return ScriptedRunner(
        [
            tool_calls_requested(deferred_tool_call("c1", "lookup", "{}", policy=ToolPolicy(ToolEffect.READ))),
            TurnCompleted(new_messages=[assistant_message("done")]),
        ],
        tool_replies={"lookup": "found"},
    )


def _two_tool_calls_runner() -> ScriptedRunner:
    read = ToolPolicy(ToolEffect.READ)
    return ScriptedRunner(
        [
            tool_calls_requested(
                deferred_tool_call("c1", "lookup", "{}", policy=read),
                deferred_tool_call("c2", "lookup", "{}", policy=read),
            ),
            TurnCompleted(new_messages=[assistant_message("done")]),
        ],
        tool_replies={"lookup": "found"},
    )


@pytest.mark.parametrize("runner", [_one_tool_call_runner, _two_tool_calls_runner], ids=["alone", "joined"])
async def test_a_session_runs_within_its_declared_loads(runner: Callable[[], ScriptedRunner]) -> None:
    host = InMemorySessionHost(runner())
    await host.drive(await host.start("look it up"))
    assert host.state.current.last_turn_error is None
    assert host.messages.texts[-1] == "done"


async def test_a_step_whose_use_case_reads_what_it_does_not_declare_fails_its_turn_on_the_in_memory_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resume = STEP_DECLARATIONS[StepName.RESUME_TURN]
    undeclared = attrs.evolve(resume, loads=frozenset())
    monkeypatch.setitem(STEP_DECLARATIONS, StepName.RESUME_TURN, undeclared)
    host = InMemorySessionHost(_two_tool_calls_runner())
    await host.drive(await host.start("look it up"))
    error = host.state.current.last_turn_error
    assert error is not None
    assert "NotLoadedError" in error
    assert "ResumeTurn read every tool call" in error


@pytest.mark.parametrize("name", list(StepName))
def test_every_step_has_one_declaration_for_its_use_case(name: StepName) -> None:
    declaration = STEP_DECLARATIONS[name]
    assert declaration.name is name
    assert declaration.policy is not None


def test_the_dex_steps_are_the_declared_steps_in_order_and_wait_where_declared() -> None:
    assert [cls.name for cls in STEP_CLASSES] == list(STEP_DECLARATIONS)
    for cls in STEP_CLASSES:
        waits = any("wait_for" in vars(k) for k in cls.__mro__ if k.__module__.startswith("dex_agents"))
        assert waits == (STEP_DECLARATIONS[cls.name].waits_on is not Wait.NOTHING), cls.name


@pytest.mark.parametrize("name", list(StepName))
def test_every_declared_step_load_is_a_dex_load(name: StepName) -> None:
    declaration = STEP_DECLARATIONS[name]
    for load in declaration.loads:
        loaded = declaration.loaded(window=WINDOW, step_input="call-1")
        maps, instances = dex_loads(loaded)
        assert maps or instances, f"{name} declares {load} and loads nothing on Dex"
        match load:
            case Load.TOOL_CALLS:
                assert AGENT_TOOL_CALLS in maps
            case Load.OWN_TOOL_CALL:
                assert AGENT_TOOL_CALLS.load("call-1") in instances
            case Load.RUN_STATE | Load.CALL_HISTORY | Load.WINDOW:
                assert FRAMEWORK_RUN_STATES in maps
            case _:
                pytest.fail(f"a Step declares the RPC-only {load}")


_RPC_OPTIONS: dict[RpcName, dict[str, Any]] = {
    RpcName.SEND_USER_MESSAGE: {"is_transactional": True},
    RpcName.WITHDRAW_USER_MESSAGE: {
        "is_transactional": True,
        "load_channels": (QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES),
    },
    RpcName.CANCEL_TURN: {"lock_attributes": (PENDING_INTERRUPTS.lock(), TURN_CANCEL_REQUEST.lock())},
    RpcName.RESOLVE_INTERRUPT: {"lock_attributes": (PENDING_INTERRUPTS.lock(),)},
    RpcName.SUBMIT_TOOL_RESULT: {
        "lock_attributes": (PENDING_INTERRUPTS.lock(),),
        "load_attribute_maps": (AGENT_TOOL_CALLS,),
    },
    RpcName.GET_AGENT_SNAPSHOT: {
        "load_attribute_maps": (AGENT_TOOL_CALLS,),
        "load_channels": (QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES),
    },
    RpcName.LIST_AGENT_MESSAGES: {},
    RpcName.GET_AGENT_MESSAGE_INDEX: {},
    RpcName.GET_AGENT_MESSAGE_COUNT: {},
}


@pytest.mark.parametrize("name", list(RpcName))
def test_every_rpc_is_a_flow_method_decorated_from_its_declaration(name: RpcName) -> None:
    assert RPC_DECLARATIONS[name].name is name
    method = getattr(AgentSessionFlow, name.value)
    options = method.__dex_rpc_options__

    def handler() -> None:
        """What the RPC's old decorator said, kept as the reference."""

    expected = getattr(dex.rpc(name=name.value, **_RPC_OPTIONS[name])(handler), "__dex_rpc_options__")  # noqa: B009
    assert options == expected
