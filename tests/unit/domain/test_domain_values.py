"""Domain values: frozen attrs classes, sequences, turn IDs, usage, start input, interrupts."""

import importlib
import inspect
import pkgutil
from datetime import UTC, datetime, timedelta

import attrs
import pytest

import dex_agents.domain
from dex_agents.application.options import DEFAULT_EVENT_STREAM_CAPACITY_BYTES, AgentSessionOptions
from dex_agents.domain.errors import (
    DexAgentsError,
    InvalidTransitionError,
    RunnerContractError,
    ToolExecutionError,
)
from dex_agents.domain.interrupts import (
    AgentInterruptResolution,
    ResolveInterruptRequest,
    interrupt_id_for,
)
from dex_agents.domain.messages import (
    MESSAGE_SEQUENCE_KEY_DIGITS,
    FrameworkMessage,
    MessageRole,
    message_sequence_key,
)
from dex_agents.domain.session import AgentState, AgentStatus, turn_id_for
from dex_agents.domain.start import AgentSessionStartInput
from dex_agents.domain.tools import ToolEffect, ToolPolicy
from dex_agents.domain.turns import DeferredToolCall, ToolCallsRequested, TurnCompleted
from dex_agents.domain.usage import AgentUsage
from tests.builders import make_interrupt

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@attrs.frozen
class _FrozenProbe:
    pass


def _domain_attrs_classes() -> list[type]:
    classes: list[type] = []
    for info in pkgutil.walk_packages(dex_agents.domain.__path__, prefix="dex_agents.domain."):
        module = importlib.import_module(info.name)
        classes.extend(
            cls
            for _, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and attrs.has(cls)
        )
    return classes


DOMAIN_ATTRS_CLASSES = _domain_attrs_classes()


def test_the_domain_walk_finds_the_known_value_classes() -> None:
    names = {cls.__name__ for cls in DOMAIN_ATTRS_CLASSES}
    assert {"AgentState", "AgentToolCall", "ToolPolicy", "AgentEvent", "AgentSnapshot", "AgentUsage"} <= names


@pytest.mark.parametrize("cls", DOMAIN_ATTRS_CLASSES, ids=lambda cls: cls.__name__)
def test_every_domain_attrs_class_is_frozen(cls: type) -> None:
    frozen_setattr: object = _FrozenProbe.__setattr__
    assert cls.__setattr__ is frozen_setattr, f"{cls.__name__} is not frozen"


SPEC_POSITIONAL_FIELDS: dict[type, list[str]] = {
    ToolPolicy: ["effect", "requires_approval"],
    DeferredToolCall: ["tool_call_id", "tool_name", "arguments", "policy"],
    TurnCompleted: ["new_messages", "usage"],
    ToolCallsRequested: ["framework_run_state", "tool_calls", "usage"],
}
"""The values a runner written from the spec builds positionally, with the spec's field order."""


@pytest.mark.parametrize(
    "cls", [cls for cls in DOMAIN_ATTRS_CLASSES if cls not in SPEC_POSITIONAL_FIELDS], ids=lambda cls: cls.__name__
)
def test_every_domain_attrs_class_is_keyword_only(cls: type) -> None:
    positional = [field.name for field in attrs.fields(cls) if not field.kw_only]
    assert positional == [], f"{cls.__name__} takes {positional} positionally"


@pytest.mark.parametrize("cls", SPEC_POSITIONAL_FIELDS, ids=lambda cls: cls.__name__)
def test_the_runner_values_take_the_spec_fields_positionally_in_the_spec_order(cls: type) -> None:
    positional = [field.name for field in attrs.fields(cls) if not field.kw_only]
    assert positional == SPEC_POSITIONAL_FIELDS[cls]


def test_tool_policy_takes_effect_and_requires_approval_positionally() -> None:
    assert ToolPolicy(ToolEffect.READ) == ToolPolicy(effect=ToolEffect.READ, requires_approval=None)
    assert ToolPolicy(ToolEffect.READ, True) == ToolPolicy(effect=ToolEffect.READ, requires_approval=True)


def test_deferred_tool_call_takes_id_name_arguments_and_policy_positionally() -> None:
    policy = ToolPolicy(ToolEffect.READ)
    assert DeferredToolCall("c1", "find_order", '{"order_id":"7"}', policy) == DeferredToolCall(
        tool_call_id="c1", tool_name="find_order", arguments='{"order_id":"7"}', policy=policy
    )


def test_turn_completed_takes_new_messages_and_usage_positionally() -> None:
    message = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item="{}", text="Done.")
    usage = AgentUsage(model_calls=1)
    completed = TurnCompleted([message], usage)
    assert completed == TurnCompleted(new_messages=(message,), usage=usage)
    assert TurnCompleted([message]).usage == AgentUsage()


def test_tool_calls_requested_takes_run_state_calls_and_usage_positionally() -> None:
    call = DeferredToolCall("c1", "find_order", "{}", ToolPolicy(ToolEffect.READ))
    usage = AgentUsage(model_calls=1)
    requested = ToolCallsRequested("state", [call], usage)
    assert requested == ToolCallsRequested(framework_run_state="state", tool_calls=(call,), usage=usage)
    assert ToolCallsRequested("state", [call]).usage == AgentUsage()


def test_a_frozen_value_refuses_assignment() -> None:
    usage = AgentUsage()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        usage.model_calls = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("sequence", "key"),
    [(1, "000000000001"), (42, "000000000042"), (10**12 - 1, "999999999999")],
)
def test_message_sequence_key_is_twelve_zero_padded_digits(sequence: int, key: str) -> None:
    assert message_sequence_key(sequence) == key
    assert len(key) == MESSAGE_SEQUENCE_KEY_DIGITS == 12


def test_message_sequence_keys_sort_like_their_numbers() -> None:
    sequences = [1, 9, 10, 99, 100, 12345]
    assert sorted(message_sequence_key(s) for s in sequences) == [message_sequence_key(s) for s in sequences]


@pytest.mark.parametrize("sequence", [0, -1, 10**12])
def test_message_sequence_key_refuses_sequences_outside_twelve_digits(sequence: int) -> None:
    with pytest.raises(ValueError, match="message sequence"):
        message_sequence_key(sequence)


def test_message_roles_travel_as_plain_strings() -> None:
    assert [role.value for role in MessageRole] == ["user", "assistant", "tool", "system"]
    assert str(MessageRole.USER) == "user"
    assert MessageRole("assistant") is MessageRole.ASSISTANT


def test_turn_ids_are_turn_dash_number_from_one() -> None:
    assert turn_id_for(1) == "turn-1"
    assert turn_id_for(12) == "turn-12"
    with pytest.raises(ValueError, match="start at 1"):
        turn_id_for(0)


def test_a_new_session_waits_for_a_user_message_with_nothing_stored() -> None:
    state = AgentState()
    assert state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
    assert (state.turn_count, state.active_turn_id, state.message_count, state.last_turn_error) == (0, None, 0, None)
    assert state.next_sequence == 1


def test_starting_turns_numbers_them_from_one() -> None:
    first = AgentState().start_turn()
    second = first.complete_turn().start_turn()
    assert (first.active_turn_id, first.turn_count) == ("turn-1", 1)
    assert (second.active_turn_id, second.turn_count) == ("turn-2", 2)


def test_last_turn_error_stays_until_a_later_turn_completes() -> None:
    failed = AgentState().start_turn().fail_turn("model down")
    assert failed.last_turn_error == "model down"
    assert failed.active_turn_id is None
    restarted = failed.start_turn()
    assert restarted.last_turn_error == "model down"
    assert restarted.complete_turn().last_turn_error is None


def test_appending_messages_moves_the_next_sequence() -> None:
    state = AgentState().with_messages_appended(3)
    assert (state.message_count, state.next_sequence) == (3, 4)
    with pytest.raises(ValueError, match="cannot append"):
        state.with_messages_appended(-1)


def test_usage_sums_field_by_field() -> None:
    first = AgentUsage(model_calls=1, input_tokens=10, output_tokens=5, cached_input_tokens=2, reasoning_tokens=1)
    second = AgentUsage(model_calls=2, input_tokens=7, output_tokens=3, cached_input_tokens=4, reasoning_tokens=2)
    assert first + second == AgentUsage(
        model_calls=3, input_tokens=17, output_tokens=8, cached_input_tokens=6, reasoning_tokens=3
    )
    assert (first + second).total_tokens == 25
    assert AgentUsage() + first == first


@pytest.mark.parametrize(
    ("initial_message", "starts_a_turn"),
    [(None, False), ("", False), ("   \n\t", False), ("hi", True), ("  hi  ", True)],
)
def test_only_a_non_blank_initial_message_starts_a_turn(initial_message: str | None, *, starts_a_turn: bool) -> None:
    assert AgentSessionStartInput(initial_message=initial_message).starts_a_turn is starts_a_turn


def test_interrupt_ids_differ_across_turns_even_when_call_ids_repeat() -> None:
    assert interrupt_id_for("turn-1", "call-1") != interrupt_id_for("turn-2", "call-1")


def test_an_interrupt_expires_at_its_deadline_and_never_without_one() -> None:
    interrupt = make_interrupt(raised_at=NOW, deadline=NOW + timedelta(seconds=30))
    assert not interrupt.is_expired(NOW + timedelta(seconds=29, microseconds=999999))
    assert interrupt.is_expired(NOW + timedelta(seconds=30))
    assert not attrs.evolve(interrupt, deadline=None).is_expired(NOW + timedelta(days=365))


def test_an_approval_drops_its_rejection_message() -> None:
    approved = ResolveInterruptRequest(interrupt_id="i", approved=True, rejection_message="ignored")
    rejected = ResolveInterruptRequest(interrupt_id="i", approved=False, rejection_message="too costly")
    assert AgentInterruptResolution.from_request(approved).rejection_message is None
    assert AgentInterruptResolution.from_request(rejected).rejection_message == "too costly"


def test_every_error_dex_agents_raises_has_one_root() -> None:
    for error in (InvalidTransitionError, RunnerContractError, ToolExecutionError):
        assert issubclass(error, DexAgentsError)
    assert ToolExecutionError("no such order").message == "no such order"


def test_session_options_default_to_unclassified_tools_and_a_ten_mebibyte_stream() -> None:
    options = AgentSessionOptions()
    assert options.default_tool_effect is ToolEffect.UNCLASSIFIED
    assert options.event_stream_capacity_bytes == DEFAULT_EVENT_STREAM_CAPACITY_BYTES == 10 * 1024 * 1024
    assert options.interrupt_deadline is None
    assert dict(options.tool_policies) == {}


def test_session_options_keep_a_read_only_copy_of_the_policies() -> None:
    policies = {"search": ToolPolicy(ToolEffect.READ)}
    options = AgentSessionOptions(tool_policies=policies)
    policies["refund"] = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)
    assert set(options.tool_policies) == {"search"}
    with pytest.raises(TypeError):
        options.tool_policies["x"] = ToolPolicy(ToolEffect.READ)  # type: ignore[index]


@pytest.mark.parametrize("deadline", [timedelta(0), timedelta(seconds=-1)])
def test_session_options_refuse_a_deadline_that_is_not_positive(deadline: timedelta) -> None:
    with pytest.raises(ValueError, match="interrupt_deadline"):
        AgentSessionOptions(interrupt_deadline=deadline)


def test_session_options_refuse_an_empty_stream() -> None:
    with pytest.raises(ValueError, match="event_stream_capacity_bytes"):
        AgentSessionOptions(event_stream_capacity_bytes=0)
