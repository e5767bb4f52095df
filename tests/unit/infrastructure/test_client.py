"""`AgentSessionClient` against a dev server client: retries, message loads, snapshot refresh."""

from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

import dex
import grpc  # type: ignore[import-untyped]
import pytest

from dex_agents import (
    AGENT_MESSAGES,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSnapshot,
    AgentState,
    AgentUsage,
    DexAgentsError,
    InputProblem,
    InvalidInputError,
    ListAgentMessagesRequest,
    NotAwaitingToolResultError,
    ResolveInterruptRequest,
    SessionUnavailableError,
    message_sequence_key,
)
from dex_agents.domain.snapshot import MessageIndex
from dex_agents.testing import ScriptedRunner


def lock_conflict() -> dex.RpcLockConflictError:
    return dex.RpcLockConflictError(
        grpc.StatusCode.ABORTED, dex.ErrorSubStatus.WORKER_API_ERROR, "locked", "InvokeRPC", "s"
    )


NO_OPTIONS = dex.RPCInvokeOptions()


class FakeDexClient:
    """Answers RPCs from handlers keyed by RPC name and records what it was asked."""

    def __init__(self, handlers: dict[str, Callable[..., object]]) -> None:
        self.handlers = handlers
        self.calls: list[tuple[str, object, dex.RPCInvokeOptions]] = []

    async def invoke_rpc(
        self, rpc_method: Any, flow_id: str, *args: object, options: dex.RPCInvokeOptions = NO_OPTIONS
    ) -> object:
        name = rpc_method.__name__
        payload = args[0] if args else None
        self.calls.append((name, payload, options))
        return self.handlers[name](payload, options)


def sessions_with(fake: FakeDexClient) -> AgentSessionClient:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="ClientTest")
    return AgentSessionClient(cast(dex.AsyncClient, fake), flow)


def snapshot(message_count: int) -> AgentSnapshot:
    return AgentSnapshot(
        state=AgentState(message_count=message_count),
        messages=(),
        pending_interrupts=(),
        tool_calls=(),
        usage=AgentUsage(),
        queued_message_count=0,
    )


async def test_resolve_interrupt_retries_lock_conflicts_until_the_rpc_goes_through() -> None:
    conflicts = iter([lock_conflict(), lock_conflict()])

    def resolve(request: object, _options: dex.RPCInvokeOptions) -> bool:
        error = next(conflicts, None)
        if error is not None:
            raise error
        assert request == ResolveInterruptRequest(interrupt_id="i", approved=True)
        return True

    fake = FakeDexClient({"resolve_interrupt": resolve})
    assert await sessions_with(fake).resolve_interrupt("s", "i", approved=True)
    assert len(fake.calls) == 3


async def test_resolve_interrupt_gives_up_on_a_lock_conflict_after_its_retry_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dex_agents.infrastructure.dex import _client_rpc as client_module

    monkeypatch.setattr(client_module, "LOCK_CONFLICT_RETRY", timedelta(0))

    def always_locked(_request: object, _options: dex.RPCInvokeOptions) -> bool:
        raise lock_conflict()

    with pytest.raises(dex.RpcLockConflictError):
        await sessions_with(FakeDexClient({"resolve_interrupt": always_locked})).resolve_interrupt(
            "s", "i", approved=False, rejection_message="no"
        )


async def test_submit_tool_result_asks_again_while_the_call_is_about_to_wait() -> None:
    answers = iter(["not_yet_waiting", "not_yet_waiting", "accepted"])

    def submit(_request: object, _options: dex.RPCInvokeOptions) -> str:
        return next(answers)

    fake = FakeDexClient({"submit_tool_result": submit})
    await sessions_with(fake).submit_tool_result("s", "call-1", result={"ok": True})
    assert len(fake.calls) == 3


async def test_submit_tool_result_stops_asking_once_the_retry_window_has_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dex_agents.infrastructure.dex import _client_rpc as client_module

    monkeypatch.setattr(client_module, "LOCK_CONFLICT_RETRY", timedelta(0))
    fake = FakeDexClient({"submit_tool_result": lambda _request, _options: "not_yet_waiting"})
    with pytest.raises(NotAwaitingToolResultError):
        await sessions_with(fake).submit_tool_result("s", "call-1", result={"ok": True})
    assert len(fake.calls) == 1


def test_the_lock_conflict_window_outlasts_the_back_off_of_the_step_holding_the_lock() -> None:
    from dex_agents.application.next import StepName
    from dex_agents.application.policies import STEP_POLICIES
    from dex_agents.infrastructure.dex.client import LOCK_CONFLICT_RETRY

    attempts = STEP_POLICIES[StepName.AWAIT_TOOL_APPROVAL].maximum_attempts
    assert attempts is not None
    # Dex's default back-off (1 s doubling, at most 100 s) between the attempts; the lock is held throughout.
    back_off = sum(min(2.0 ** (n - 1), 100.0) for n in range(1, attempts))
    assert back_off < LOCK_CONFLICT_RETRY.total_seconds() / 1.5


async def test_snapshot_loads_exactly_the_latest_two_hundred_messages() -> None:
    fake = FakeDexClient(
        {
            "get_agent_message_index": lambda _p, _o: MessageIndex(message_count=250),
            "get_agent_snapshot": lambda _p, _o: snapshot(250),
        }
    )
    await sessions_with(fake).get_agent_snapshot("s")
    name, _, options = fake.calls[-1]
    assert name == "get_agent_snapshot"
    expected = tuple(AGENT_MESSAGES.load(message_sequence_key(n)) for n in range(51, 251))
    assert options.load_attribute_map_instances == expected


async def test_snapshot_is_read_again_when_messages_arrived_in_between() -> None:
    counts = iter([5, 5])
    fake = FakeDexClient(
        {
            "get_agent_message_index": lambda _p, _o: MessageIndex(message_count=3),
            "get_agent_snapshot": lambda _p, _o: snapshot(next(counts)),
        }
    )
    result = await sessions_with(fake).get_agent_snapshot("s")
    assert result.state is not None
    assert result.state.message_count == 5
    loads = [
        len(options.load_attribute_map_instances) for name, _, options in fake.calls if name == "get_agent_snapshot"
    ]
    assert loads == [3, 5]


async def test_a_repeated_snapshot_of_an_unchanged_session_is_one_rpc_with_the_index_the_last_one_showed() -> None:
    fake = FakeDexClient(
        {
            "get_agent_message_index": lambda _p, _o: MessageIndex(message_count=4),
            "get_agent_snapshot": lambda _p, options: snapshot(len(options.load_attribute_map_instances)),
        }
    )
    sessions = sessions_with(fake)
    await sessions.get_agent_snapshot("s")
    await sessions.get_agent_snapshot("s")
    assert [name for name, _, _ in fake.calls] == [
        "get_agent_message_index",
        "get_agent_snapshot",
        "get_agent_snapshot",
    ]
    assert len(fake.calls[-1][2].load_attribute_map_instances) == 4
    await sessions.get_agent_snapshot("other")  # another session starts with its own index
    assert [name for name, _, _ in fake.calls[3:]] == ["get_agent_message_index", "get_agent_snapshot"]


async def test_a_snapshot_after_messages_arrived_reads_again_with_the_new_index() -> None:
    counts = iter([2, 6, 6])
    fake = FakeDexClient(
        {
            "get_agent_message_index": lambda _p, _o: MessageIndex(message_count=2),
            "get_agent_snapshot": lambda _p, _o: snapshot(next(counts)),
        }
    )
    sessions = sessions_with(fake)
    await sessions.get_agent_snapshot("s")
    result = await sessions.get_agent_snapshot("s")  # the kept index (2) is stale: the session has 6 now
    assert result.state is not None
    assert result.state.message_count == 6
    loads = [len(o.load_attribute_map_instances) for name, _, o in fake.calls if name == "get_agent_snapshot"]
    assert loads == [2, 2, 6]


async def test_a_page_loads_only_its_own_messages() -> None:
    fake = FakeDexClient(
        {
            "get_agent_message_index": lambda _p, _o: MessageIndex(message_count=1000),
            "list_agent_messages": lambda _p, _o: None,
        }
    )
    await sessions_with(fake).list_agent_messages("s", after_sequence=10, limit=1000)
    _, request, options = fake.calls[-1]
    assert request == ListAgentMessagesRequest(after_sequence=10, limit=200)
    assert options.load_attribute_map_instances == tuple(
        AGENT_MESSAGES.load(message_sequence_key(n)) for n in range(11, 211)
    )


async def test_a_snapshot_of_large_messages_loads_only_the_latest_that_fit_in_two_mib() -> None:
    index = MessageIndex(message_count=10, large_messages=((8, 900_000), (9, 900_000), (10, 900_000)))
    fake = FakeDexClient(
        {"get_agent_message_index": lambda _p, _o: index, "get_agent_snapshot": lambda _p, _o: snapshot(10)}
    )
    await sessions_with(fake).get_agent_snapshot("s")
    _, _, options = fake.calls[-1]
    assert options.load_attribute_map_instances == tuple(AGENT_MESSAGES.load(message_sequence_key(n)) for n in (9, 10))


async def test_a_page_of_large_messages_ends_early_and_a_single_huge_message_still_makes_a_page() -> None:
    index = MessageIndex(message_count=5, large_messages=((1, 3_000_000), (2, 1_500_000), (3, 1_000_000)))
    fake = FakeDexClient({"get_agent_message_index": lambda _p, _o: index, "list_agent_messages": lambda _p, _o: None})
    sessions = sessions_with(fake)
    loaded = []
    for after in (0, 1, 3):
        await sessions.list_agent_messages("s", after_sequence=after, limit=50)
        loaded.append(len(fake.calls[-1][2].load_attribute_map_instances))
    assert loaded == [1, 1, 2]  # 3 MB alone; 1.5 MB and 1 MB exceed 2 MiB together; two small ones


async def test_a_page_after_the_last_message_sends_no_rpc() -> None:
    fake = FakeDexClient({"get_agent_message_index": lambda _p, _o: MessageIndex(message_count=3)})
    page = await sessions_with(fake).list_agent_messages("s", after_sequence=3)
    assert (page.messages, page.next_after_sequence) == ((), None)
    assert [name for name, _, _ in fake.calls] == ["get_agent_message_index"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [("x" * 5_000_000, "too_large"), ("lone \ud800", "lone_surrogate"), ("nul \x00", "nul_character")],
)
async def test_send_user_message_refuses_a_bad_text_before_sending_anything(text: str, problem: str) -> None:
    fake = FakeDexClient({})
    with pytest.raises(InvalidInputError, match=r"^refused: the user message ") as refused:
        await sessions_with(fake).send_user_message("s", text)
    assert refused.value.problem == problem
    assert refused.value.field == "text"
    assert fake.calls == []


@pytest.mark.parametrize("text", ["", " \n "])
async def test_send_user_message_answers_false_for_blank_text_without_sending(text: str) -> None:
    fake = FakeDexClient({})
    assert await sessions_with(fake).send_user_message("s", text) is False
    assert fake.calls == []


async def test_resolve_interrupt_refuses_an_oversized_rejection_before_sending() -> None:
    fake = FakeDexClient({})
    with pytest.raises(InvalidInputError) as refused:
        await sessions_with(fake).resolve_interrupt("s", "turn-1.c1", approved=False, rejection_message="r" * 300_000)
    assert (refused.value.problem, refused.value.field) == (InputProblem.TOO_LARGE, "rejection_message")
    assert fake.calls == []


async def test_resolve_interrupt_refuses_a_malformed_interrupt_id_before_sending() -> None:
    fake = FakeDexClient({})
    with pytest.raises(InvalidInputError) as refused:
        await sessions_with(fake).resolve_interrupt("s", "", approved=True)
    assert (refused.value.problem, refused.value.field) == (InputProblem.INVALID_ID, "interrupt_id")


@pytest.mark.parametrize("session_id", ["", "a\x00", "x" * 600])
async def test_every_client_call_refuses_a_malformed_session_id(session_id: str) -> None:
    sessions = sessions_with(FakeDexClient({}))
    with pytest.raises(InvalidInputError):
        await sessions.send_user_message(session_id, "hi")
    with pytest.raises(InvalidInputError):
        await sessions.resolve_interrupt(session_id, "turn-1.c1", approved=True)
    with pytest.raises(InvalidInputError):
        await sessions.start_session(session_id, "hi")


async def test_start_session_refuses_an_oversized_first_message_and_starts_nothing() -> None:
    with pytest.raises(InvalidInputError) as refused:
        await sessions_with(FakeDexClient({})).start_session("s", "m" * 300_000)
    assert refused.value.field == "initial_message"


async def test_an_rpc_to_a_missing_session_raises_session_unavailable_which_is_still_the_sdks_error() -> None:
    def missing(_request: object, _options: dex.RPCInvokeOptions) -> object:
        raise dex.FlowNotActiveOrNotFoundError(
            grpc.StatusCode.NOT_FOUND, dex.ErrorSubStatus.FLOW_NOT_EXISTS, "flow not found", "InvokeRPC", "gone"
        )

    fake = FakeDexClient({"send_user_message": missing})
    with pytest.raises(SessionUnavailableError, match="session 'gone' does not exist or has ended") as raised:
        await sessions_with(fake).send_user_message("gone", "hi")
    assert isinstance(raised.value, dex.FlowNotActiveOrNotFoundError)
    assert isinstance(raised.value, DexAgentsError)
    assert (raised.value.flow_id, raised.value.code) == ("gone", grpc.StatusCode.NOT_FOUND)


async def test_steering_withdraw_and_cancel_refuse_bad_input_before_sending_anything() -> None:
    fake = FakeDexClient({})
    sessions = sessions_with(fake)
    with pytest.raises(ValueError, match="'sideways' is not a valid MessageDelivery"):
        await sessions.send_user_message("s", "hi", delivery="sideways")
    with pytest.raises(ValueError, match="'sideways' is not a valid MessageDelivery"):
        await sessions.submit_user_message("s", "hi", delivery="sideways")
    with pytest.raises(InvalidInputError) as refused:
        await sessions.withdraw_user_message("s", "")
    assert (refused.value.problem, refused.value.field) == (InputProblem.INVALID_ID, "message_id")
    with pytest.raises(InvalidInputError) as refused:
        await sessions.cancel_turn("s", "r" * 300_000)
    assert (refused.value.problem, refused.value.field) == (InputProblem.TOO_LARGE, "reason")
    assert fake.calls == []


def test_a_negative_no_worker_wait_is_refused_when_the_client_is_made() -> None:
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="ClientTest")
    with pytest.raises(ValueError, match="no_worker_wait must not be negative"):
        AgentSessionClient(cast(dex.AsyncClient, FakeDexClient({})), flow, no_worker_wait=timedelta(seconds=-1))
