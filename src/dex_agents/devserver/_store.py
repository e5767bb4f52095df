"""The dev server's writer: one thread commits the engine's changes to the data dir's SQLite file, with group commit.

The engine keeps its working state in memory and journals every change here as a
keyed row operation (an upsert or a delete). Operations of one engine step (a Step
completion with the state it commits and the executions it schedules, a Client's
write) are queued together with no ``await`` in between, and the writer thread
commits everything sealed so far (below) as one transaction: concurrent sessions share
a commit (group commit), and two writes of the same row in one commit become one.
Each commit is one fsync of the WAL (``synchronous=FULL``; the file, its settings
and why that level are ``_data_dir``'s): what this module cuts is the number of commits.

Two kinds of operations: *urgent* ones (a Step completion, a Client's write) wake
the writer at once; *deferred* ones (an attempt's start, heartbeats, a Step's
Stream writes) ride with the next commit, or are committed `DEFERRED_FLUSH_SECONDS`
after the first of them was queued (a loop timer asks for that commit: the writer
thread wakes only to commit).

The loop thread *seals* what is queued when it asks for a commit (`Store.flush`, an
urgent operation, the deadline's timer): only then are a row's column values made
(an operation may give a function that makes them, so a row changed several times
before a commit, an execution's state, is encoded once), and the writer commits
sealed rows only. So a commit never holds part of an engine step: the loop thread
seals between steps' operations, never while another thread could run the writer
in the middle of one. Rows queued while a commit is being written are sealed into
the next one. Nothing leaves the server before it is on disk:
a Client answer or a Worker task waits (`Store.durable`) until the operations it
depends on are committed, which costs nothing when they already are. A write's
answer or a Worker task that waits asks for a commit now; a *read* that waits (a
Stream message, a run's summary) never causes a commit of its own: it takes the
next one, which comes within `READ_COMMIT_SECONDS` (a Step completion usually
comes first), so the live events a Step writes share the commits of the Steps
instead of paying an fsync each.

A failed commit (disk full, I/O error) rolls back whole; the store then refuses
every later operation until the engine reloads from the file (`Store.reset`).
"""

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dex_agents.devserver._data_dir import (
    DATABASE_FILE,
    TABLE_COLUMNS,
    TABLE_KEYS,
    DataDirLock,
    StoreError,
    open_database,
)

DEFERRED_FLUSH_SECONDS = 0.1
"""The longest a deferred operation (heartbeat, attempt start, Step Stream write) waits for a commit."""

READ_COMMIT_SECONDS = 0.01
"""The longest a read waits for the commit of what it returns (`Store.durable` with ``sync=False``)."""

_DELETES = {
    table: f"DELETE FROM {table} WHERE " + " AND ".join(f"{name} = ?" for name in names)
    for table, names in TABLE_KEYS.items()
}
_UPSERTS: dict[tuple[str, int], str] = {}


def _upsert(table: str, columns: int) -> str:
    statement = _UPSERTS.get((table, columns))
    if statement is None:
        # An upsert updates the row where it is. ``INSERT OR REPLACE`` deletes and inserts it again, which in a rowid
        # table (``runs``) moves the row and rewrites both of its indexes: three more pages in every commit's WAL.
        keys = TABLE_KEYS[table]
        updated = [name for name in TABLE_COLUMNS[table][:columns] if name not in keys]
        sets = ", ".join(f"{name} = excluded.{name}" for name in updated)
        action = f"DO UPDATE SET {sets}" if updated else "DO NOTHING"
        statement = _UPSERTS[table, columns] = (
            f"INSERT INTO {table} VALUES ({', '.join('?' * columns)}) ON CONFLICT ({', '.join(keys)}) {action}"
        )
    return statement


DROPPED_SEQUENCE = -1
"""The sequence of a change made on state a reload dropped: `Store.durable` refuses it (nothing keeps it)."""


class StoreWriteError(StoreError):
    """A commit failed (disk full, I/O error): nothing of it was written."""


@dataclass(frozen=True)
class CommitStats:
    """What the writer did so far: commits, rows and the time spent in them (for benchmarks)."""

    commits: int
    rows: int
    seconds: float


_UNCHANGED = -1

Row = tuple[str, tuple[Any, ...], tuple[Any, ...] | None]
"""(table, key values, column values or ``None`` for a delete)."""

Values = tuple[Any, ...] | Callable[[], tuple[Any, ...]] | None
"""What `Store.put` takes: column values, a function that makes them when the row is sealed, or ``None``."""


class Store:
    """The SQLite file of one data dir: loads it at start, then journals the engine's changes to it."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        """Lock ``directory`` (created if missing) and open or create its database.

        Raises:
            StoreError: the dir is in use, unreadable, corrupt or of another schema version.
        """
        self.directory = Path(directory).expanduser().resolve()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot create the data dir {self.directory}: {error.strerror}") from error
        self._lock = DataDirLock(self.directory)
        self._lock.acquire()
        try:
            self._connection = open_database(self.directory)
        except BaseException:
            self._lock.release()
            raise
        self._pending: dict[tuple[str, tuple[Any, ...]], tuple[str, tuple[Any, ...], Values]] = {}
        """Rows queued since the last seal (loop thread only; a row's values may still be a function)."""
        self._condition = threading.Condition()
        self._sealed: dict[tuple[str, tuple[Any, ...]], Row] = {}
        """The rows of the next commit, made (under ``_condition``: the writer takes them)."""
        self._sealed_upto = 0
        """The sequence of the last operation sealed (what the next commit makes durable)."""
        self._due: float | None = None
        """When the queued deferred operations are committed (``time.monotonic``), ``None``: none queued."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        """The loop timer that asks for the commit at ``_due`` (loop thread only): armed at or before it."""
        self._closing = False
        self._broken: BaseException | None = None
        self._enqueued = 0
        self._committed = 0
        self._dropped: list[tuple[int, int]] = []
        """The sequences each `reset` dropped, as ``(after, upto]`` ranges: `durable` refuses them."""
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._on_failure: Callable[[BaseException], None] | None = None
        self._commits = 0
        self._rows = 0
        self._seconds = 0.0
        self.fail_commit: Callable[[list[Row]], BaseException | None] | None = None
        """Fault seam for tests: called with each commit's rows; an exception it returns fails that commit."""
        self._page_limit: int | None = _UNCHANGED

    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self.directory / DATABASE_FILE

    @property
    def sequence(self) -> int:
        """The number of the last queued operation (what `durable` waits for)."""
        return self._enqueued

    def stats(self) -> CommitStats:
        """Commits, rows and seconds the writer spent so far."""
        return CommitStats(self._commits, self._rows, self._seconds)

    def data_bytes(self) -> int:
        """Bytes the data dir's database takes on disk (file, WAL and shared-memory index)."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                total += os.path.getsize(f"{self.path}{suffix}")
        return total

    # ------------------------------------------------------------------ reading (start-up only)

    def rows(self, sql: str, *parameters: Any) -> Iterator[tuple[Any, ...]]:
        """Read rows at start-up, before the writer runs.

        Raises:
            StoreError: the file cannot be read (corrupt).
        """
        try:
            yield from self._connection.execute(sql, parameters)
        except sqlite3.DatabaseError as error:
            raise StoreError(
                f"{self.path} cannot be read ({error}); move it away or delete the data dir {self.directory} "
                "to start empty (its sessions are lost), or use another --data DIR"
            ) from error

    # ------------------------------------------------------------------ writing

    def start(self, loop: asyncio.AbstractEventLoop, on_failure: Callable[[BaseException], None]) -> None:
        """Start the writer thread; ``on_failure`` runs on ``loop`` when a commit fails."""
        self._loop = loop
        self._on_failure = on_failure
        self._thread = threading.Thread(target=self._write_loop, name="devserver-store", daemon=True)
        self._thread.start()
        if self._pending and self._due is not None:
            self._wake_at(self._due)

    def put(self, table: str, key: tuple[Any, ...], values: Values, *, urgent: bool = False) -> int:
        """Queue an upsert or a delete of a row; loop thread only (it is the only one to touch what is queued).

        ``values``: every column after the key, or a function that returns them when the row
        is sealed (it sees the state of then: a later change of the same row needs no
        encoding of its own), or ``None`` for a delete.

        Returns:
            The operation's sequence number (see `durable`).
        """
        self._pending[table, key] = (table, key, values)
        self._enqueued += 1
        # The writer wakes for an urgent operation only. A deferred one sets the deadline on a loop
        # timer: waking the writer thread costs a cross-thread wake-up (a futex call, and the
        # GIL changing hands), and waking it on each would commit (and fsync) every other
        # heartbeat or Stream write on its own.
        if urgent:
            self._seal()
        elif self._due is None:
            self._due = time.monotonic() + DEFERRED_FLUSH_SECONDS
            self._wake_at(self._due)
        return self._enqueued

    def flush(self) -> None:
        """Commit what is queued now rather than with the next deferred flush."""
        if self._pending:
            self._seal()

    def _seal(self) -> None:
        """Make the queued rows and hand them to the writer for its next commit (loop thread)."""
        pending, self._pending = self._pending, {}
        self._due = None
        rows = [(table, key, values() if callable(values) else values) for table, key, values in pending.values()]
        with self._condition:
            sealed = self._sealed
            for row in rows:
                sealed[row[0], row[1]] = row
            self._sealed_upto = self._enqueued
            self._condition.notify()

    def _commit_soon(self) -> None:
        """Commit what is queued within `READ_COMMIT_SECONDS` (sooner if an urgent operation comes)."""
        soon = time.monotonic() + READ_COMMIT_SECONDS
        if not self._pending or (self._due is not None and self._due <= soon):
            return
        self._due = soon
        self._wake_at(soon)

    def _wake_at(self, due: float) -> None:
        """Have the loop ask for a commit at ``due`` (loop thread; before `start`, `start` does)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        timer = self._timer
        if timer is not None:
            if self._timer_due <= due:
                return  # it fires first, and arms itself again for what is still due
            timer.cancel()
        self._timer_due = due
        self._timer = loop.call_later(max(0.0, due - time.monotonic()), self._deadline)

    def _deadline(self) -> None:
        self._timer = None
        due = self._due
        if due is None or self._closing:
            return  # sealed already
        if due <= time.monotonic():
            self._seal()
            return
        self._wake_at(due)

    async def durable(self, sequence: int | None = None, *, sync: bool = True) -> None:
        """Wait until every operation up to ``sequence`` (default: all queued) is committed.

        ``sync=False`` (a read) asks for no commit of its own: it waits for the next one,
        at the latest `READ_COMMIT_SECONDS` from now.

        Raises:
            StoreWriteError: the commit failed; nothing of it was written.
        """
        target = self._enqueued if sequence is None else sequence
        if target == DROPPED_SEQUENCE or any(after < target <= upto for after, upto in self._dropped):
            raise StoreWriteError("the dev server dropped this change after a failed commit; it read its data again")
        if self._committed >= target:
            return
        if self._broken is not None:
            raise StoreWriteError(f"the dev server could not write its data: {self._broken}")
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((target, future))
        if target > self._sealed_upto:  # else the next commit holds it already
            if sync:
                self.flush()
            else:
                self._commit_soon()
        await future

    def reset(self) -> None:
        """Drop every queued operation and accept new ones again (after the engine reloaded the file)."""
        self._pending.clear()
        self._due = None
        with self._condition:
            self._sealed.clear()
            self._sealed_upto = self._enqueued
            self._broken = None
            if self._enqueued > self._committed:
                self._dropped.append((self._committed, self._enqueued))
            self._committed = self._enqueued

    def close(self) -> None:
        """Commit what is queued, stop the writer, close the file and release the lock."""
        self.flush()
        with self._condition:
            self._closing = True
            self._condition.notify()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with contextlib.suppress(sqlite3.Error):
            self._connection.close()
        self._lock.release()

    def _write_loop(self) -> None:
        while True:
            with self._condition:
                while not self._closing and not self._sealed:
                    self._condition.wait()
                if not self._sealed:
                    return  # closing, and everything sealed is committed
                batch = list(self._sealed.values())
                upto = self._sealed_upto
                self._sealed = {}
                broken = self._broken
            if broken is not None:
                continue  # dropped: the engine reloads from the file
            try:
                self._commit(batch)
            except BaseException as error:  # noqa: BLE001 - every failure must reach the engine
                with self._condition:
                    self._broken = error
                self._notify(self._failed, error)
                continue
            self._notify(self._succeeded, upto)

    def limit_size(self, pages: int | None) -> None:
        """Fault seam for tests: let the file grow by at most ``pages`` pages (``None``: no limit).

        Past it SQLite fails the commit with ``SQLITE_FULL`` ("database or disk is full"),
        exactly as on a full disk.
        """
        with self._condition:
            self._page_limit = pages

    def _apply_page_limit(self, connection: sqlite3.Connection) -> None:
        limit, self._page_limit = self._page_limit, _UNCHANGED
        if limit == _UNCHANGED:
            return
        if limit is None:
            connection.execute("PRAGMA max_page_count = 1073741823")
            return
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        connection.execute(f"PRAGMA max_page_count = {int(pages) + limit}")

    def _commit(self, batch: list[Row]) -> None:
        started = time.perf_counter()
        connection = self._connection
        self._apply_page_limit(connection)
        seam = self.fail_commit
        injected = None if seam is None else seam(batch)
        connection.execute("BEGIN IMMEDIATE")
        try:
            if injected is not None:
                raise injected
            # One executemany per statement: a batch holds each row once, so their order does not matter.
            statements: dict[str, list[tuple[Any, ...]]] = {}
            for table, key, values in batch:
                if values is None:
                    statements.setdefault(_DELETES[table], []).append(key)
                else:
                    statements.setdefault(_upsert(table, len(key) + len(values)), []).append(key + values)
            for statement, parameters in statements.items():
                connection.executemany(statement, parameters)
            connection.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            raise
        self._commits += 1
        self._rows += len(batch)
        self._seconds += time.perf_counter() - started

    def _notify(self, callback: Callable[[Any], None], argument: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(callback, argument)

    def _succeeded(self, upto: int) -> None:
        self._committed = max(self._committed, upto)
        timer = self._timer
        if timer is not None and self._due is None:
            # A seal took the deferred rows the timer was for: a cancelled timer wakes no idle loop.
            timer.cancel()
            self._timer = None
        ready = [(target, future) for target, future in self._waiters if target <= self._committed]
        self._waiters = [(target, future) for target, future in self._waiters if target > self._committed]
        for _, future in ready:
            if not future.done():
                future.set_result(None)

    def _failed(self, error: BaseException) -> None:
        waiters, self._waiters = self._waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_exception(StoreWriteError(f"the dev server could not write its data: {error}"))
        if self._on_failure is not None:
            self._on_failure(error)
