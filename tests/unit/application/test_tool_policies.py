"""The effect table, policy resolution, approval and the idempotency key."""

import pytest

from dex_agents.application.next import StepName
from dex_agents.application.policies import STEP_POLICIES, tool_step_name
from dex_agents.domain.tools import (
    ToolCallStatus,
    ToolEffect,
    ToolPolicy,
    default_requires_approval,
    idempotency_key,
    is_approval_required,
    is_single_attempt,
    maximum_attempts,
    resolve_tool_policy,
    status_after_exhausted_retries,
)
from dex_agents.testing import make_tool_call

# | Effect | Step | Retry | after exhausted retries | Default approval |  (the spec's effect table)
EFFECT_TABLE = [
    (ToolEffect.READ, StepName.CALL_TOOL, 3, ToolCallStatus.FAILED, False),
    (ToolEffect.IDEMPOTENT_WRITE, StepName.CALL_TOOL, 3, ToolCallStatus.OUTCOME_UNKNOWN, False),
    (ToolEffect.NON_IDEMPOTENT_WRITE, StepName.CALL_SINGLE_ATTEMPT_TOOL, 1, ToolCallStatus.OUTCOME_UNKNOWN, True),
    (ToolEffect.UNCLASSIFIED, StepName.CALL_SINGLE_ATTEMPT_TOOL, 1, ToolCallStatus.OUTCOME_UNKNOWN, True),
]


def test_the_effect_table_covers_every_effect_by_its_wire_name() -> None:
    assert [row[0] for row in EFFECT_TABLE] == list(ToolEffect)
    assert [effect.value for effect in ToolEffect] == [
        "read",
        "idempotent_write",
        "non_idempotent_write",
        "unclassified",
    ]


@pytest.mark.parametrize(("effect", "step", "attempts", "after_retries", "approval"), EFFECT_TABLE)
def test_each_effect_runs_in_its_step_with_its_attempts_outcome_and_approval(
    effect: ToolEffect, step: StepName, attempts: int, after_retries: ToolCallStatus, *, approval: bool
) -> None:
    assert tool_step_name(effect) is step
    assert is_single_attempt(effect) is (attempts == 1)
    assert maximum_attempts(effect) == attempts == STEP_POLICIES[step].maximum_attempts
    assert status_after_exhausted_retries(effect) is after_retries
    assert default_requires_approval(effect) is approval
    assert is_approval_required(ToolPolicy(effect)) is approval


@pytest.mark.parametrize("effect", list(ToolEffect))
@pytest.mark.parametrize("override", [True, False])
def test_an_explicit_approval_setting_overrides_the_effects_default(effect: ToolEffect, *, override: bool) -> None:
    assert is_approval_required(ToolPolicy(effect, requires_approval=override)) is override


@pytest.mark.parametrize(("effect", "_step", "_attempts", "after_retries", "_approval"), EFFECT_TABLE)
def test_a_record_after_exhausted_retries_is_failed_for_a_read_and_unknown_for_a_write(
    effect: ToolEffect, _step: StepName, _attempts: int, after_retries: ToolCallStatus, *, _approval: bool
) -> None:
    record = make_tool_call(policy=ToolPolicy(effect)).after_exhausted_retries("timed out")
    assert (record.status, record.error) == (after_retries, "timed out")


READ = ToolPolicy(ToolEffect.READ)
EXPLICIT = ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)


@pytest.mark.parametrize(
    ("explicit", "framework_effect", "default_effect", "expected"),
    [
        pytest.param({"t": EXPLICIT}, ToolEffect.READ, ToolEffect.UNCLASSIFIED, EXPLICIT, id="explicit-wins"),
        pytest.param({}, ToolEffect.READ, ToolEffect.UNCLASSIFIED, READ, id="framework-effect-next"),
        pytest.param(
            {"other": EXPLICIT},
            None,
            ToolEffect.IDEMPOTENT_WRITE,
            ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
            id="default",
        ),
        pytest.param({}, None, ToolEffect.UNCLASSIFIED, ToolPolicy(ToolEffect.UNCLASSIFIED), id="default-unclassified"),
    ],
)
def test_policies_resolve_explicit_then_framework_effect_then_default(
    explicit: dict[str, ToolPolicy],
    framework_effect: ToolEffect | None,
    default_effect: ToolEffect,
    expected: ToolPolicy,
) -> None:
    resolved = resolve_tool_policy(
        "t", explicit=explicit, framework_effect=framework_effect, default_effect=default_effect
    )
    assert resolved == expected


def test_the_idempotency_key_is_flow_turn_and_call_joined_by_slashes() -> None:
    assert idempotency_key("session-42", "turn-3", "call_abc") == "session-42/turn-3/call_abc"


def test_the_idempotency_key_differs_when_a_call_id_repeats_in_a_later_turn() -> None:
    assert idempotency_key("s", "turn-1", "c1") != idempotency_key("s", "turn-2", "c1")
