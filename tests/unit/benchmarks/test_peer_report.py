"""The peer benchmark's README summary: what it reads from a run's results and what it leaves out."""

from typing import Any

import pytest
from benchmarks.peers.report import (
    SUMMARY_BEGIN,
    SUMMARY_END,
    additive_floor,
    render_summary,
    replace_readme_block,
)


def _row(wall_ms: float, worker_ms: float | None = None) -> dict[str, Any]:
    worker = None if worker_ms is None else worker_ms / 1000
    return {"wall": {"median": wall_ms / 1000}, "cpu_per_step": {"worker": worker}}


def _results() -> dict[str, Any]:
    head = {
        "dex": _row(200.0, 6.0),
        "dbos": _row(250.0),
        "temporal": _row(700.0),
        "temporal-tuned-nosandbox": _row(560.0),
        "plain": _row(30.0),
        "sdk-floor": _row(120.0, 2.0),
        "sdk-floor-store": _row(150.0, 2.5),
        "sdk-floor-agent": _row(150.0, 3.5),
    }
    return {
        "date": "2026-12-02 04:00 UTC",
        "source": "commit abc1234",
        "machine": {"cpus": 2},
        "load_during": [1.0, 1.5, 2.5],
        "summary": {"shapes": {"5x4": head, "1x1": {"dex": _row(40.0), "plain": _row(10.0)}}},
    }


def test_the_additive_floor_adds_what_storing_and_the_agent_add_to_the_sdk_floor() -> None:
    assert additive_floor(_results()["summary"]["shapes"]["5x4"]) == pytest.approx(0.004)


def test_the_additive_floor_is_unknown_when_a_floor_was_not_run() -> None:
    assert additive_floor({"sdk-floor": _row(1.0, 2.0)}) is None


def test_the_summary_shows_each_shape_with_the_best_temporal_set_up_and_a_dash_for_what_did_not_run() -> None:
    text = render_summary(_results(), [(5, 4), (1, 1)])

    assert "| 5x4 (26 steps) | 200.0 | 250.0 | 560.0 | 30.0 |" in text
    assert "| 1x1 (3 steps) | 40.0 | - | - | 10.0 |" in text
    assert "load average median 1.50, max 2.50" in text
    assert "commit abc1234" in text
    assert "6.00 ms, 1.50x the SDK's additive floor of the same run (4.00 ms)" in text


def test_the_summary_goes_between_its_markers_and_replaces_the_last_one() -> None:
    page = f"intro\n{SUMMARY_BEGIN}\nold table\n{SUMMARY_END}\nrest\n"

    updated = replace_readme_block(page, "new table", markers=(SUMMARY_BEGIN, SUMMARY_END))

    assert updated == f"intro\n{SUMMARY_BEGIN}\nnew table\n{SUMMARY_END}\nrest\n"


def test_a_page_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="markers"):
        replace_readme_block("no markers here", "table", markers=(SUMMARY_BEGIN, SUMMARY_END))
