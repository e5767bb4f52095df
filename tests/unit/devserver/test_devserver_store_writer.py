"""The data dir's writer (`Store`): when it commits, and what a commit holds."""

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

from dex_agents.devserver._data_dir import DATABASE_FILE, TABLE_COLUMNS, TABLE_KEYS
from dex_agents.devserver._store import Store


def _rows(directory: Path, table: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(directory / DATABASE_FILE) as connection:
        return sorted(connection.execute(f"SELECT * FROM {table}"))


async def test_a_deferred_operation_waits_for_its_deadline_on_the_loop_and_is_then_committed(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.start(asyncio.get_running_loop(), lambda error: None)
    try:
        sequence = store.put("meta", ("k",), ("v",))
        # No urgent operation and no reader: nothing asks the writer for a commit before the deadline's
        # loop timer runs, and the loop has not run since the put.
        assert store.stats().commits == 0
        await store.durable(sequence, sync=False)
        assert store.stats().commits == 1
        assert _rows(tmp_path, "meta") == [("k", "v")]
    finally:
        store.close()


async def test_a_deferred_operation_queued_before_the_writer_starts_is_committed_once_it_runs(tmp_path: Path) -> None:
    store = Store(tmp_path)
    sequence = store.put("meta", ("k",), ("v",))
    store.start(asyncio.get_running_loop(), lambda error: None)
    try:
        await store.durable(sequence, sync=False)
        assert _rows(tmp_path, "meta") == [("k", "v")]
    finally:
        store.close()


async def test_one_commit_holds_every_queued_upsert_and_delete_of_several_tables(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.start(asyncio.get_running_loop(), lambda error: None)
    try:
        store.put("meta", ("a",), ("1",))
        store.put("meta", ("b",), ("2",))
        store.put("blobs", ("x",), (b"X",))
        await store.durable()
        commits = store.stats().commits
        store.put("meta", ("a",), None)
        store.put("meta", ("c",), ("3",))
        store.put("blobs", ("y",), (b"Y",))
        store.put("blobs", ("x",), None)
        store.put("meta", ("b",), ("2b",))
        await store.durable()
        assert store.stats().commits == commits + 1
        assert _rows(tmp_path, "meta") == [("b", "2b"), ("c", "3")]
        assert _rows(tmp_path, "blobs") == [("y", b"Y")]
    finally:
        store.close()


async def test_a_row_given_as_a_function_is_made_once_when_sealed_with_the_state_of_then(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.start(asyncio.get_running_loop(), lambda error: None)
    made: list[str] = []
    state = {"value": "first"}

    def row() -> tuple[object, ...]:
        made.append(state["value"])
        return (state["value"],)

    try:
        store.put("meta", ("k",), row)
        state["value"] = "second"
        store.put("meta", ("k",), row)
        assert made == []  # nothing is encoded until the loop asks for a commit
        await store.durable()
        assert made == ["second"]
        assert _rows(tmp_path, "meta") == [("k", "second")]
    finally:
        store.close()


async def test_a_commit_holds_what_was_queued_when_it_was_asked_for_and_a_later_row_waits_for_the_next(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path)
    batches: list[list[object]] = []
    taken = threading.Event()

    def seen(batch: list[Any]) -> None:
        batches.append(sorted(key for _, key, _ in batch))
        taken.set()

    store.fail_commit = seen
    store.start(asyncio.get_running_loop(), lambda error: None)
    try:
        store.put("meta", ("a",), ("1",))
        store.put("meta", ("b",), ("2",), urgent=True)  # asks for a commit of a and b
        store.put("meta", ("c",), ("3",))  # the writer may not have taken the commit yet
        assert taken.wait(timeout=10)  # blocks the loop: no deadline timer can seal c meanwhile
        await store.durable()
        assert batches == [[("a",), ("b",)], [("c",)]]
        assert _rows(tmp_path, "meta") == [("a", "1"), ("b", "2"), ("c", "3")]
    finally:
        store.close()


def test_the_column_names_the_writer_upserts_by_are_the_schema_s(tmp_path: Path) -> None:
    Store(tmp_path).close()
    with sqlite3.connect(tmp_path / DATABASE_FILE) as connection:
        for table, columns in TABLE_COLUMNS.items():
            schema = connection.execute(f"PRAGMA table_info({table})").fetchall()
            assert tuple(row[1] for row in schema) == columns
            assert tuple(row[1] for row in schema if row[5]) == TABLE_KEYS[table]


async def test_writing_a_row_again_updates_it_in_place(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.start(asyncio.get_running_loop(), lambda error: None)
    try:
        await store.durable(store.put("runs", ("run-1",), ("flow-1", 0, "first")), sync=True)
        await store.durable(store.put("runs", ("run-1",), ("flow-1", 0, "second")), sync=True)
        with sqlite3.connect(tmp_path / DATABASE_FILE) as connection:
            rows = connection.execute("SELECT rowid, run_id, state FROM runs").fetchall()
    finally:
        store.close()

    assert [(run_id, state) for _, run_id, state in rows] == [("run-1", "second")]
    assert rows[0][0] == 1  # the row kept its place (``INSERT OR REPLACE`` would have given it rowid 2)
