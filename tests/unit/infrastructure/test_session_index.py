"""`SessionIndex`: private files, off the event loop, a locked or deleted file handled cleanly."""

import asyncio
import os
import sqlite3
import stat
import time
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.infrastructure.dex.session_index import SessionIndex, SessionIndexError


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_index_file_is_private_to_its_user_in_a_private_folder(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "state" / "dex-agents" / "sessions.sqlite"
        index = SessionIndex(path)
        index.record("A", "s-1")
        index.close()
    finally:
        os.umask(old)
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700
    assert _mode(path.parent.parent) == 0o700


def test_an_existing_index_that_others_can_read_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite"
    sqlite3.connect(path).close()
    path.chmod(0o644)
    SessionIndex(path).close()
    assert _mode(path) == 0o600


def test_lists_all_counts_and_forgets(tmp_path: Path) -> None:
    index = SessionIndex(tmp_path / "sessions.sqlite")
    try:
        for number in range(5):
            index.record("A", f"s-{number}")
        index.record("B", "other")
        assert len(index.sessions("A", limit=2)) == 2
        assert [entry.session_id for entry in index.sessions("A", limit=None)] == [f"s-{n}" for n in range(4, -1, -1)]
        assert index.count("A") == 5
        index.forget("A", "s-3")
        index.forget("A", "never")
        assert index.count("A") == 4
        assert index.count("B") == 1
    finally:
        index.close()


async def test_a_deleted_index_file_is_recreated_and_new_rows_go_to_the_new_file(tmp_path: Path) -> None:
    path = tmp_path / "index" / "sessions.sqlite"
    index = SessionIndex(path)
    try:
        await index.arecord("A", "before")
        for leftover in path.parent.iterdir():
            leftover.unlink()
        path.parent.rmdir()
        await index.arecord("A", "after")
        assert [entry.session_id for entry in await index.asessions("A")] == ["after"]
        other = sqlite3.connect(path)
        try:
            assert other.execute("SELECT session_id FROM sessions").fetchall() == [("after",)]
        finally:
            other.close()
        assert _mode(path) == 0o600
        assert _mode(path.parent) == 0o700
    finally:
        index.close()


async def test_a_file_locked_by_another_connection_fails_cleanly_without_stalling_the_event_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.sqlite"
    index = SessionIndex(path, busy_timeout=timedelta(seconds=0.5))
    index.record("A", "listed")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        started = time.monotonic()
        with pytest.raises(SessionIndexError, match="locked"):
            await index.arecord("A", "new")
        waited = time.monotonic() - started
        ticker.cancel()
        assert waited >= 0.4
        assert ticks >= 10  # the loop kept running while the write waited for the lock
        # Readers of a WAL file do not wait for the writer.
        assert [entry.session_id for entry in await index.asessions("A")] == ["listed"]
    finally:
        other.execute("ROLLBACK")
        other.close()
        index.close()
    reopened = SessionIndex(path)
    try:
        reopened.record("A", "new")
        assert reopened.count("A") == 2
    finally:
        reopened.close()


def test_the_session_index_keeps_each_session_once_newest_first_across_reopening(tmp_path: Path) -> None:
    path = tmp_path / "state" / "sessions.sqlite"
    index = SessionIndex(path)
    index.record("OrderAgent", "a")
    index.record("OrderAgent", "b")
    index.record("OrderAgent", "a")
    index.record("Other", "c")
    index.close()
    reopened = SessionIndex(path)
    try:
        assert [entry.session_id for entry in reopened.sessions("OrderAgent")] == ["b", "a"]
        assert [entry.session_id for entry in reopened.sessions("Other")] == ["c"]
    finally:
        reopened.close()
