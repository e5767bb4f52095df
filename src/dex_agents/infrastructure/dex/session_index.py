"""`SessionIndex`: a durable list of the sessions started, by Flow type, for the web console.

Dex 1.23's Client can search Flow runs only with a visibility query
(``search_flows``), which the dev server does not serve and whose query language
this package does not rely on; so the sessions of a Flow type are listed from
this index instead. It is one SQLite file (standard library, WAL journal, one
row per session), written by `AgentSessionClient.start_session` when the
client was given an index, and by the console when it starts or opens a
session. A session is recorded *before* it is started: a crash between the
two leaves a row whose session does not exist, which a reader shows as
unavailable, never a session missing from the list. Recording a session that
is already listed keeps its first row.

Off the event loop: every call runs on one of the index's own two threads (one
writes, one reads), so a file another process holds locked never stalls an
event loop, and a write stuck behind that lock never delays a read (readers of
a WAL file do not wait for writers). The ``a``-prefixed methods (`arecord`,
`asessions`, ...) are the coroutines to call from async code; the plain ones
block their caller. A call that still finds the file locked after
`BUSY_TIMEOUT` raises `SessionIndexError`.

Private to its user: the file (and SQLite's ``-wal`` and ``-shm`` beside it,
which SQLite creates with the file's mode) is created ``0600``; a folder the
index creates is ``0700``; an existing index file of this user that others
may read is made ``0600`` when opened. Deleted while in use: before each call
the index checks that its path is still the file it opened; when the file is
gone (or replaced), it opens the path again, creating an empty index there,
so new rows never go to a deleted file. When that fails (the folder cannot be
created, say), the call raises `SessionIndexError`.
"""

import asyncio
import contextlib
import os
import sqlite3
import stat
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import attrs

from dex_agents.domain.errors import DexAgentsError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    flow_type TEXT NOT NULL,
    session_id TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (flow_type, session_id)
)
"""

BUSY_TIMEOUT = timedelta(seconds=3)
"""How long a call waits for a lock another connection holds on the file before it raises `SessionIndexError`."""

FILE_MODE = 0o600
"""The index file's permissions: its user only."""

FOLDER_MODE = 0o700
"""The permissions of a folder the index creates for its file."""

T = TypeVar("T")


class SessionIndexError(DexAgentsError):
    """The session index cannot be read or written now (locked by another process for too long, or unopenable)."""


@attrs.frozen(kw_only=True)
class IndexedSession:
    """One row of the index."""

    flow_type: str
    """The session's Flow type."""
    session_id: str
    """The session (its Flow ID)."""
    recorded_at: datetime
    """When it was first recorded (UTC)."""


class _Connection:
    """One SQLite connection to the index path, used by one thread only, reopened when the file goes away."""

    def __init__(self, path: Path, opening: threading.Lock, busy_timeout: timedelta) -> None:
        self.path = path
        self._opening = opening
        self._busy_timeout = busy_timeout
        self._db: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None

    def get(self) -> sqlite3.Connection:
        if self._db is not None and self._identity == _identity(self.path):
            return self._db
        self.close()
        with self._opening:
            try:
                if _identity(self.path) is None:
                    # What SQLite left beside a deleted file belongs to it: a new file must not take it as its own.
                    for suffix in ("-wal", "-shm"):
                        Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                _prepare(self.path)
                db = sqlite3.connect(self.path, isolation_level=None, timeout=self._busy_timeout.total_seconds())
            except OSError as error:
                raise SessionIndexError(f"the session index {self.path} cannot be opened: {error}") from error
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(_SCHEMA)
        except sqlite3.Error:
            db.close()
            raise
        self._db, self._identity = db, _identity(self.path)
        return db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
        self._db = None
        self._identity = None


class SessionIndex:
    """The sessions started, by Flow type, in one SQLite file (safe to share between processes)."""

    def __init__(self, path: Path | str, *, busy_timeout: timedelta = BUSY_TIMEOUT) -> None:
        """Open (creating when missing) the index at ``path``; a missing folder is created too (``0700``).

        ``busy_timeout``: how long a call waits for another connection's lock before it fails.

        Raises:
            SessionIndexError: the file cannot be opened or created.
        """
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="session-index-write")
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="session-index-read")
        opening = threading.Lock()
        self._write_connection = _Connection(self.path, opening, busy_timeout)
        self._read_connection = _Connection(self.path, opening, busy_timeout)
        self._run(self._writer, self._open)

    # -- blocking calls ---------------------------------------------------------------------------------------------

    def record(self, flow_type: str, session_id: str) -> None:
        """Add a session (a no-op when it is listed already); durable when this returns.

        Raises:
            SessionIndexError: the file stayed locked for `BUSY_TIMEOUT`, or cannot be opened.
        """
        self._run(self._writer, lambda: self._record(flow_type, session_id))

    def forget(self, flow_type: str, session_id: str) -> None:
        """Remove a session's row (a no-op when it is not listed)."""
        self._run(self._writer, lambda: self._forget(flow_type, session_id))

    def sessions(self, flow_type: str, *, limit: int | None = 200) -> tuple[IndexedSession, ...]:
        """Return the newest ``limit`` sessions of ``flow_type`` (``None``: all of them), newest first."""
        return self._run(self._reader, lambda: self._sessions(flow_type, limit))

    def count(self, flow_type: str) -> int:
        """Return how many sessions of ``flow_type`` are listed."""
        return self._run(self._reader, lambda: self._count(flow_type))

    # -- the same, for async code -----------------------------------------------------------------------------------

    async def arecord(self, flow_type: str, session_id: str) -> None:
        """`record`, on the index's writer thread."""
        await self._arun(self._writer, lambda: self._record(flow_type, session_id))

    async def aforget(self, flow_type: str, session_id: str) -> None:
        """`forget`, on the index's writer thread."""
        await self._arun(self._writer, lambda: self._forget(flow_type, session_id))

    async def asessions(self, flow_type: str, *, limit: int | None = 200) -> tuple[IndexedSession, ...]:
        """`sessions`, on the index's reader thread."""
        return await self._arun(self._reader, lambda: self._sessions(flow_type, limit))

    async def acount(self, flow_type: str) -> int:
        """`count`, on the index's reader thread."""
        return await self._arun(self._reader, lambda: self._count(flow_type))

    def close(self) -> None:
        """Close the file (calls waiting for a lock finish first)."""
        for executor, connection in ((self._writer, self._write_connection), (self._reader, self._read_connection)):
            with contextlib.suppress(RuntimeError):  # closed already
                executor.submit(connection.close).result()
            executor.shutdown(wait=True)

    # -- on the index's threads -------------------------------------------------------------------------------------

    def _open(self) -> None:
        self._write_connection.get()

    def _record(self, flow_type: str, session_id: str) -> None:
        now = datetime.now(UTC).isoformat()
        self._write_connection.get().execute(
            "INSERT OR IGNORE INTO sessions (flow_type, session_id, recorded_at) VALUES (?, ?, ?)",
            (flow_type, session_id, now),
        )

    def _forget(self, flow_type: str, session_id: str) -> None:
        self._write_connection.get().execute(
            "DELETE FROM sessions WHERE flow_type = ? AND session_id = ?", (flow_type, session_id)
        )

    def _sessions(self, flow_type: str, limit: int | None) -> tuple[IndexedSession, ...]:
        rows = (
            self._read_connection.get()
            .execute(
                "SELECT session_id, recorded_at FROM sessions WHERE flow_type = ? "
                "ORDER BY recorded_at DESC, rowid DESC LIMIT ?",
                (flow_type, -1 if limit is None else limit),
            )
            .fetchall()
        )
        return tuple(
            IndexedSession(flow_type=flow_type, session_id=sid, recorded_at=datetime.fromisoformat(at))
            for sid, at in rows
        )

    def _count(self, flow_type: str) -> int:
        row = (
            self._read_connection.get()
            .execute("SELECT count(*) FROM sessions WHERE flow_type = ?", (flow_type,))
            .fetchone()
        )
        return int(row[0])

    # -- plumbing ---------------------------------------------------------------------------------------------------

    def _run(self, executor: ThreadPoolExecutor, call: Callable[[], T]) -> T:
        return executor.submit(self._guarded, call).result()

    async def _arun(self, executor: ThreadPoolExecutor, call: Callable[[], T]) -> T:
        return await asyncio.wrap_future(executor.submit(self._guarded, call))

    def _guarded(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except sqlite3.OperationalError as error:
            if "locked" in str(error) or "busy" in str(error):
                raise SessionIndexError(
                    f"the session index {self.path} stayed locked by another connection for "
                    f"{self.busy_timeout.total_seconds():g} s: try again"
                ) from error
            raise SessionIndexError(f"the session index {self.path} failed: {error}") from error
        except sqlite3.Error as error:
            raise SessionIndexError(f"the session index {self.path} failed: {error}") from error


def _identity(path: Path) -> tuple[int, int] | None:
    """The file at ``path`` (device and inode), or ``None`` when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _prepare(path: Path) -> None:
    """Create the index's folder (``0700``) and file (``0600``) when missing; make this user's file private."""
    missing: list[Path] = []
    folder = path.parent
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        try:
            created.mkdir(mode=FOLDER_MODE)
        except FileExistsError:
            continue
        os.chmod(created, FOLDER_MODE)  # the umask may have taken bits away; never more than the mode
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        found = os.fstat(descriptor)
        if found.st_uid == os.geteuid() and stat.S_IMODE(found.st_mode) & 0o077:
            os.fchmod(descriptor, FILE_MODE)
    finally:
        os.close(descriptor)
