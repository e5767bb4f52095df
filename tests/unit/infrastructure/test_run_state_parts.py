"""Run state parts: a chain rebuilds the exact state, and the common prefix is found across compared blocks."""

import base64
import random
import zlib

import pytest

from dex_agents.infrastructure.dex.run_state_parts import (
    CHAIN_MAX_CHARACTERS,
    CHAIN_SLACK,
    COMPRESS_OVER_BYTES,
    COMPRESS_UNDER_BYTES,
    INLINE_MAX_BYTES,
    ChainSize,
    PartWrites,
    _InflatedParts,
    chain_state,
    common_prefix_length,
    decode_part,
    encode_part,
    next_parts,
    part_key,
)


def test_a_part_keeps_a_prefix_of_the_state_before_it_and_adds_its_text() -> None:
    parts = [encode_part(0, "abc"), encode_part(2, "XY"), encode_part(3, "Z:1")]

    assert chain_state(parts) == "abXZ:1"


def test_a_part_may_cut_into_several_earlier_parts() -> None:
    parts = [encode_part(0, "aaaa"), encode_part(4, "bbbb"), encode_part(8, "cccc"), encode_part(2, "d")]

    assert chain_state(parts) == "aad"


def test_a_part_keeping_more_than_the_state_has_is_refused() -> None:
    with pytest.raises(ValueError, match="keeps 5 characters of a state of 3"):
        chain_state([encode_part(0, "abc"), encode_part(5, "x")])


def test_a_long_text_is_stored_deflated_and_read_back_exactly() -> None:
    text = '{"parts":[{"tool_name":"work","content":"result é ✓"}],"kind":"request"},' * 40

    value = encode_part(12, text)

    assert value.startswith("12~")
    assert len(value.encode()) <= COMPRESS_OVER_BYTES < len(text)
    assert decode_part(value) == (12, text)


@pytest.mark.parametrize("length", [1_100, 2_049, 8_000, 70_000, 300_000])
def test_texts_of_every_size_are_read_back_exactly(length: int) -> None:
    text = "".join(f"{n % 97},é" for n in range(length))[:length]

    value = encode_part(5, text)

    assert decode_part(value) == (5, text)
    # Deflated only where that can bring it under the blob threshold's reach; a longer text stays plain.
    assert value.startswith("5~" if len(text.encode()) <= COMPRESS_UNDER_BYTES else "5:")


def test_a_deflated_part_another_process_wrote_is_inflated_here() -> None:
    text = "a part written by another Worker, " * 50
    value = "7~" + base64.b64encode(zlib.compress(text.encode())).decode("ascii")

    assert decode_part(value) == (7, text)
    assert decode_part(value) == (7, text)  # and again, from what the first read kept


def test_a_text_that_does_not_deflate_shorter_is_stored_plain() -> None:
    # Base64 of random bytes: deflate saves less than its own base64 adds.
    text = base64.b64encode(random.Random(3).randbytes(1500)).decode("ascii")

    assert encode_part(0, text) == f"0:{text}"


def test_a_text_short_in_characters_but_over_the_threshold_in_bytes_is_deflated() -> None:
    text = "状态" * 200  # 400 characters, 1,200 UTF-8 bytes

    value = encode_part(0, text)

    assert value.startswith("0~")
    assert len(value.encode()) <= COMPRESS_OVER_BYTES
    assert decode_part(value) == (0, text)


def test_a_short_text_is_stored_plain() -> None:
    assert encode_part(3, "abc") == "3:abc"


@pytest.mark.parametrize("value", ["no separator", "x1:text", ":text", "12", "3~not base64!", "3~aGVsbG8="])
def test_a_value_that_is_not_a_part_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="not a run state part"):
        decode_part(value)


@pytest.mark.parametrize("shared", [0, 1, 65_535, 65_536, 65_537, 200_001])
def test_the_common_prefix_is_found_wherever_the_states_first_differ(shared: int) -> None:
    first = "m" * shared + "A" + "m" * 100
    second = "m" * shared + "B"

    assert common_prefix_length(first, second) == shared


def test_a_state_that_extends_the_other_shares_all_of_the_shorter_one() -> None:
    assert common_prefix_length("abc", "abcdef") == 3
    assert common_prefix_length("", "abc") == 0


def test_a_write_over_no_chain_starts_one_and_deletes_stray_parts() -> None:
    writes = next_parts(None, (part_key(0), part_key(3)), ChainSize(20, 20), "state")

    assert writes == PartWrites(set={part_key(0): "0:state"}, delete=(part_key(3),))


def test_a_write_that_extends_the_chain_adds_the_next_part() -> None:
    writes = next_parts("prefix-and-tail", (part_key(0), part_key(1)), ChainSize(40, 40), "prefix-and-more")

    assert writes == PartWrites(set={part_key(2): "11:more"}, delete=())


def test_a_write_that_would_make_the_chain_hold_too_much_starts_a_new_one() -> None:
    state = "s" * 10_000 + "new"

    size = ChainSize(characters=2 * len(state) + CHAIN_SLACK)

    writes = next_parts("s" * 10_000 + "old", (part_key(0), part_key(1)), size, state)

    assert writes == PartWrites(set={part_key(0): encode_part(0, state)}, delete=(part_key(1),))


def test_a_write_whose_inline_parts_would_pass_their_limit_starts_a_new_chain() -> None:
    previous, state = "p" * 200_000 + "old", "p" * 200_000 + "new"
    roomy = ChainSize(characters=300_000, inline_bytes=INLINE_MAX_BYTES - 200)
    full = ChainSize(characters=300_000, inline_bytes=INLINE_MAX_BYTES - 5)

    extended = next_parts(previous, (part_key(0), part_key(1)), roomy, state)
    restarted = next_parts(previous, (part_key(0), part_key(1)), full, state)

    assert extended == PartWrites(set={part_key(2): "200000:new"}, delete=())
    assert restarted == PartWrites(set={part_key(0): encode_part(0, state)}, delete=(part_key(1),))


def test_past_its_character_limit_a_chain_is_written_whole_at_every_write() -> None:
    previous = "q" * (CHAIN_MAX_CHARACTERS + 10)
    below = next_parts(previous, (part_key(0),), ChainSize(characters=CHAIN_MAX_CHARACTERS - 100), previous + "more")
    assert below.set == {part_key(1): f"{len(previous)}:more"}

    writes = next_parts(previous, (part_key(0),), ChainSize(characters=CHAIN_MAX_CHARACTERS), previous + "more")

    assert writes.set == {part_key(0): encode_part(0, previous + "more")}
    assert len(writes.set[part_key(0)]) > CHAIN_MAX_CHARACTERS  # the whole state, plain: the write limit applies


def test_a_part_over_the_blob_threshold_is_not_counted_as_inline() -> None:
    assert ChainSize().plus("x" * 900) == ChainSize(900, 900)
    assert ChainSize().plus("x" * 1100) == ChainSize(1100, 0)
    assert ChainSize().plus("é" * 600) == ChainSize(600, 0)  # 1,200 UTF-8 bytes: a blob


def test_a_state_sharing_nothing_with_the_last_one_starts_a_new_chain() -> None:
    writes = next_parts("abc", (part_key(0),), ChainSize(5, 5), "xyz")

    assert writes == PartWrites(set={part_key(0): "0:xyz"}, delete=())


def test_the_inflated_parts_a_worker_keeps_are_bounded_by_characters_least_recently_used_out_first() -> None:
    kept = _InflatedParts(max_characters=160)
    kept.keep("a" * 4, "A" * 6)
    kept.keep("b" * 4, "B" * 6)
    assert kept.get("a" * 4) == "A" * 6  # now the most recently used
    for n in range(15):  # 150 characters more: one entry must go
        kept.keep(f"k{n:02d}", "x" * 7)

    assert kept.get("b" * 4) is None
    assert kept.get("a" * 4) == "A" * 6
    kept.keep("k15", "x" * 7)  # and now the least recently used one, k00
    assert kept.get("k00") is None
    assert kept.get("k15") == "x" * 7
    kept.keep("huge", "y" * 40)  # over a sixteenth of the budget: not kept
    assert kept.get("huge") is None
