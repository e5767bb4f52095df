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
"""

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import attrs

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    flow_type TEXT NOT NULL,
    session_id TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (flow_type, session_id)
)
"""


@attrs.frozen(kw_only=True)
class IndexedSession:
    """One row of the index."""

    flow_type: str
    """The session's Flow type."""
    session_id: str
    """The session (its Flow ID)."""
    recorded_at: datetime
    """When it was first recorded (UTC)."""


class SessionIndex:
    """The sessions started, by Flow type, in one SQLite file (safe to share between processes)."""

    def __init__(self, path: Path | str) -> None:
        """Open (creating when missing) the index at ``path``; its directory is created too."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)

    def record(self, flow_type: str, session_id: str) -> None:
        """Add a session (a no-op when it is listed already); durable when this returns."""
        now = datetime.now(UTC).isoformat()
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO sessions (flow_type, session_id, recorded_at) VALUES (?, ?, ?)",
                (flow_type, session_id, now),
            )

    def sessions(self, flow_type: str, *, limit: int = 200) -> tuple[IndexedSession, ...]:
        """Return the newest ``limit`` sessions of ``flow_type``, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT session_id, recorded_at FROM sessions WHERE flow_type = ? "
                "ORDER BY recorded_at DESC, rowid DESC LIMIT ?",
                (flow_type, limit),
            ).fetchall()
        return tuple(
            IndexedSession(flow_type=flow_type, session_id=sid, recorded_at=datetime.fromisoformat(at))
            for sid, at in rows
        )

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()
