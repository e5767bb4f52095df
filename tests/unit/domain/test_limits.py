"""Input checks, output bounds and event fitting: the pure rules behind the session's size limits."""

import json
from datetime import UTC, datetime

import pytest

from dex_agents import (
    AgentMessage,
    AgentSessionOptions,
    AgentState,
    InputProblem,
    InvalidInputError,
    MessageRole,
)
from dex_agents.application.inputs import id_refusal, text_refusal
from dex_agents.domain import events as ev
from dex_agents.domain.events import (
    AgentEventBody,
    InterruptRaisedPayload,
    TextDeltaPayload,
    TurnFailedPayload,
    fit_event_body,
)
from dex_agents.domain.limits import cap_text, check_input_text, json_text_size, sanitize_output_text, utf8_size
from dex_agents.domain.messages import stored_size
from dex_agents.domain.snapshot import page_sequences, snapshot_sequences
from dex_agents.infrastructure.dex.codec import to_json_data

DEADLINE = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)
KIB = 1024


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", InputProblem.BLANK),
        ("  \n\t", InputProblem.BLANK),
        ("a\ud800b", InputProblem.LONE_SURROGATE),
        ("\udfff", InputProblem.LONE_SURROGATE),
        ("a\x00b", InputProblem.NUL_CHARACTER),
        ("x" * (KIB + 1), InputProblem.TOO_LARGE),
        ("é" * (KIB // 2 + 1), InputProblem.TOO_LARGE),  # 2 bytes each: over by UTF-8 size, not by length
    ],
)
def test_a_client_text_is_refused_for_the_first_problem_it_has(text: str, problem: InputProblem) -> None:
    assert check_input_text(text, max_bytes=KIB) is problem


@pytest.mark.parametrize("text", ["hello", "x" * KIB, "é" * (KIB // 2), "emoji 😀 and tabs\t\r\n", "\x01\x7f"])
def test_valid_unicode_within_the_limit_is_accepted_unchanged(text: str) -> None:
    assert check_input_text(text, max_bytes=KIB) is None


def test_a_blank_text_may_be_allowed_where_blank_means_no_turn() -> None:
    assert check_input_text(" ", max_bytes=KIB, allow_blank=True) is None


def test_the_refusal_names_the_field_the_problem_and_the_sizes() -> None:
    refused = text_refusal("x" * 2000, options=AgentSessionOptions(max_input_text_bytes=KIB), field="text", what="it")
    assert isinstance(refused, InvalidInputError)
    assert isinstance(refused, ValueError)
    assert (refused.problem, refused.field) == (InputProblem.TOO_LARGE, "text")
    assert str(refused) == "refused: it has 2,000 bytes of UTF-8; the limit is 1,024"


def test_something_that_is_not_text_is_refused_as_such() -> None:
    refused = text_refusal(42, options=AgentSessionOptions(), field="text", what="the user message")
    assert refused is not None
    assert refused.problem is InputProblem.NOT_TEXT


@pytest.mark.parametrize("value", ["", "a/b", "x" * 513, "a\x00", "\ud800"])
def test_a_malformed_interrupt_id_is_refused(value: str) -> None:
    refused = id_refusal(value, field="interrupt_id", what="the interrupt ID", allow_slash=False)
    assert refused is not None
    assert refused.problem is InputProblem.INVALID_ID


def test_a_session_id_may_hold_a_slash() -> None:
    assert id_refusal("tenant/42", field="session_id", what="the session ID") is None


def test_options_refuse_limits_too_small_for_a_truncation_notice() -> None:
    with pytest.raises(ValueError, match="max_tool_output_bytes must be at least 1024"):
        AgentSessionOptions(max_tool_output_bytes=10)


def test_sanitizing_replaces_only_lone_surrogates_and_nul() -> None:
    assert sanitize_output_text("ok 😀") == "ok 😀"
    assert sanitize_output_text("a\ud800b\x00c") == "a\ufffdb\ufffdc"


@pytest.mark.parametrize("text", ["x" * 100_000, "é" * 50_000, "😀" * 30_000, "ab" * 10])
@pytest.mark.parametrize("limit", [1024, 4096, 65_536])
def test_a_capped_text_fits_its_limit_keeps_its_start_and_says_how_much_was_cut(text: str, limit: int) -> None:
    capped = cap_text(text, limit, what="the tool's output")
    assert utf8_size(capped) <= limit
    if utf8_size(text) <= limit:
        assert capped == text
        return
    kept, notice = capped.split("\n[dex-agents: ", 1)
    assert text.startswith(kept)
    assert (
        notice
        == f"the tool's output was {utf8_size(text):,} bytes; only its first {utf8_size(kept):,} bytes are shown.]"
    )


def _json_size(body: AgentEventBody) -> int:
    return len(json.dumps(to_json_data(body, type(body))))


@pytest.mark.parametrize("text", ["x" * 300_000, "é" * 100_000, "😀\n" * 40_000])
def test_a_long_text_delta_is_split_into_deltas_that_each_fit_and_add_up_to_it(text: str) -> None:
    pieces = fit_event_body(ev.text_delta(text), 16 * KIB)
    assert len(pieces) > 1
    deltas = [piece for piece in pieces if isinstance(piece, TextDeltaPayload)]
    assert len(deltas) == len(pieces)
    assert "".join(piece.text for piece in deltas) == text
    assert all(json_text_size(piece.text) <= 16 * KIB for piece in deltas)


def test_a_short_delta_is_written_as_it_is() -> None:
    body = ev.reasoning_delta("thinking")
    assert fit_event_body(body, 16 * KIB) == (body,)


def test_a_long_text_in_another_event_is_cut_with_a_marker_and_the_event_keeps_its_keys() -> None:
    body = ev.turn_failed("boom " * 50_000)
    (fitted,) = fit_event_body(body, 16 * KIB)
    assert isinstance(fitted, TurnFailedPayload)
    assert _json_size(fitted) <= 16 * KIB
    assert fitted.error.startswith("boom boom")
    assert "[dex-agents: this event text was 250,000 bytes" in fitted.error


def test_an_event_with_several_long_texts_has_each_cut_and_the_rest_kept() -> None:
    short = ev.interrupt_raised("i", "c1", "refund", None)
    assert fit_event_body(short, 2 * KIB) == (short,)
    body = ev.interrupt_raised("i" * 10_000, "c" * 10_000, "refund", DEADLINE)
    (fitted,) = fit_event_body(body, 4 * KIB)
    assert isinstance(fitted, InterruptRaisedPayload)
    assert _json_size(fitted) <= 4 * KIB
    assert fitted.interrupt_id.startswith("iii")
    assert fitted.tool_call_id.startswith("ccc")
    assert (fitted.tool_name, fitted.deadline) == ("refund", DEADLINE)


def test_storing_messages_indexes_each_one_over_8_kib_with_its_size() -> None:
    small = AgentMessage(sequence=1, turn_id="turn-1", role=MessageRole.USER, framework_item="{}", text="hi")
    large = AgentMessage(sequence=2, turn_id="turn-1", role=MessageRole.USER, framework_item="x" * 9000, text="é" * 10)
    state = AgentState().with_messages_stored([small, large])
    assert state.message_count == 2
    assert state.large_messages == ((2, stored_size(large)),)
    assert stored_size(large) == 256 + 9002 + 62  # escaped texts with their quotes, plus the overhead
    assert AgentState().with_messages_stored([small]).large_messages == ()


def test_a_snapshot_keeps_the_latest_200_messages_while_they_fit_in_2_mib() -> None:
    assert snapshot_sequences(450) == range(251, 451)
    # 8 KiB for 450, 1.5 MB for 449, then 71 more of 8 KiB fit in 2 MiB
    assert snapshot_sequences(450, large_messages=[(449, 1_500_000)]) == range(378, 451)
    assert snapshot_sequences(3, large_messages=[(3, 3_000_000)]) == range(3, 4)  # always the newest one


def test_a_page_stops_before_2_mib_and_its_cursor_continues_from_there() -> None:
    large = [(5, 1_000_000), (6, 1_500_000)]
    # 4 small, 1 MB: 1,032,768 bytes; the next 1.5 MB would pass 2 MiB
    assert page_sequences(after_sequence=0, limit=200, message_count=300, large_messages=large) == (range(1, 6), 5)
    # 1.5 MB, then 72 small (8 KiB each) fit
    assert page_sequences(after_sequence=5, limit=200, message_count=300, large_messages=large) == (range(6, 79), 78)
