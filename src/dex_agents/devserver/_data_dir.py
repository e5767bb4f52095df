"""The dev server's data dir: ``dev.sqlite3`` (its schema and SQLite settings) and the ``LOCK`` one server holds.

The data dir holds ``dev.sqlite3`` (with its ``-wal``/``-shm`` files) and ``LOCK``,
which one server at a time holds (``fcntl.flock``): a second one is refused. The
file's layout is `SCHEMA_VERSION` (``PRAGMA user_version``); a file of another
version, or one SQLite cannot read, is refused with what to do (`StoreError`).

Durability: ``journal_mode=WAL`` with ``synchronous=FULL``, the WAL fsynced on every
commit. FULL is SQLite's own default, and the level DBOS runs its SQLite system
database at: DBOS sets only ``busy_timeout``, ``foreign_keys`` and ``IMMEDIATE``
transactions (``dbos/_sys_db_sqlite.py``, ``SQLiteSystemDatabase._create_engine``), so
its ``synchronous`` stays at FULL. (NORMAL in WAL mode would survive a process kill
too, but could lose the last commits on a power cut.) ``dexcli dev`` keeps its data
in the Temporal dev server's SQLite file with SQLite's defaults, so FULL there too:
it runs ``temporal server start-dev --db-filename FILE`` with no ``--sqlite-pragma``
(superdurable/dex ``cli/internal/dev/temporal_process.go:40-51``), which sets only
``mode=rwc`` (temporalio/cli ``internal/devserver/server.go:331``) and passes no
other pragma (temporalio/temporal ``common/persistence/sql/sqlplugin/sqlite/plugin.go``,
``buildDSNAttr``). So each commit stays one fsync; what the writer (``_store``) cuts
is the number of commits.
"""

import fcntl
import os
import sqlite3
from pathlib import Path
from typing import IO

SCHEMA_VERSION = 1
"""The layout of ``dev.sqlite3`` this code reads and writes (``PRAGMA user_version``)."""

DATABASE_FILE = "dev.sqlite3"
LOCK_FILE = "LOCK"


_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE runs (run_id TEXT PRIMARY KEY, flow_id TEXT NOT NULL, position INTEGER NOT NULL, state TEXT NOT NULL);
CREATE INDEX runs_by_flow ON runs (flow_id, position);
CREATE TABLE attributes (run_id TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
  PRIMARY KEY (run_id, key)) WITHOUT ROWID;
CREATE TABLE channel_messages (run_id TEXT NOT NULL, position INTEGER NOT NULL, message BLOB NOT NULL,
  PRIMARY KEY (run_id, position)) WITHOUT ROWID;
CREATE TABLE executions (run_id TEXT NOT NULL, execution_id TEXT NOT NULL, state TEXT NOT NULL,
  PRIMARY KEY (run_id, execution_id)) WITHOUT ROWID;
CREATE TABLE results (run_id TEXT NOT NULL, position INTEGER NOT NULL, output BLOB NOT NULL,
  PRIMARY KEY (run_id, position)) WITHOUT ROWID;
CREATE TABLE history (run_id TEXT NOT NULL, event_id INTEGER NOT NULL, event BLOB NOT NULL,
  PRIMARY KEY (run_id, event_id)) WITHOUT ROWID;
CREATE TABLE stream_messages (sequence INTEGER PRIMARY KEY, flow_type TEXT NOT NULL, name TEXT NOT NULL,
  flow_id TEXT NOT NULL, source TEXT NOT NULL, created_at REAL NOT NULL, size INTEGER NOT NULL, value BLOB NOT NULL);
CREATE TABLE blobs (blob_id TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE attempts (id INTEGER PRIMARY KEY, flow_id TEXT NOT NULL, record TEXT NOT NULL);
"""

TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "runs": ("run_id", "flow_id", "position", "state"),
    "attributes": ("run_id", "key", "value"),
    "channel_messages": ("run_id", "position", "message"),
    "executions": ("run_id", "execution_id", "state"),
    "results": ("run_id", "position", "output"),
    "history": ("run_id", "event_id", "event"),
    "stream_messages": ("sequence", "flow_type", "name", "flow_id", "source", "created_at", "size", "value"),
    "blobs": ("blob_id", "value"),
    "attempts": ("id", "flow_id", "record"),
}
"""Every table's columns in schema order (the store's rows give them in this order, keys first)."""

TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "meta": ("key",),
    "runs": ("run_id",),
    "attributes": ("run_id", "key"),
    "channel_messages": ("run_id", "position"),
    "executions": ("run_id", "execution_id"),
    "results": ("run_id", "position"),
    "history": ("run_id", "event_id"),
    "stream_messages": ("sequence",),
    "blobs": ("blob_id",),
    "attempts": ("id",),
}


class StoreError(Exception):
    """The data dir cannot be used: its message says why and what to do."""


class DataDirLock:
    """``LOCK`` in the data dir, held with ``flock`` while a server uses the dir."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / LOCK_FILE
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        handle = self._path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise StoreError(
                f"another dev server uses the data dir {self._path.parent} (pid {holder}); "
                "stop it, or start this one with another --data DIR (or --in-memory)"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._file = handle

    def release(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()


def connect(path: Path) -> sqlite3.Connection:
    # synchronous=FULL: no less durable than `dexcli dev` (SQLite's default there; see the module docstring).
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA busy_timeout = 5000")
    mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StoreError(f"{path} cannot use SQLite's WAL journal (journal_mode stays {mode})")
    connection.execute("PRAGMA synchronous = FULL")
    return connection


def open_database(directory: Path) -> sqlite3.Connection:
    path = directory / DATABASE_FILE
    try:
        connection = connect(path)
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        tables = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.DatabaseError as error:
        raise StoreError(
            f"{path} is not a readable dev server database ({error}); move it away or delete the data dir "
            f"{directory} to start empty (its sessions are lost), or use another --data DIR"
        ) from error
    if version == 0 and tables == 0:
        connection.executescript(f"BEGIN; {_SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
    elif version != SCHEMA_VERSION:
        connection.close()
        raise StoreError(
            f"the data dir {directory} holds dev server data of schema version {version}; this dex-agents "
            f"reads version {SCHEMA_VERSION}. Run the dex-agents release that wrote it, or throw the data away "
            f"(delete {directory}) or start with another --data DIR (or --in-memory)"
        )
    return connection
