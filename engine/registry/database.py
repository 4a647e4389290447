"""The registry's SQLite database: its tables, and one transaction per operation.

Every operation opens its own connection and runs in one SQLite transaction (writes take
the write lock up front with ``BEGIN IMMEDIATE``), so concurrent requests, threads and
even processes sharing the database see a consistent registry. The database runs in WAL
mode with ``synchronous=FULL``: a registered schema survives a crash of the process.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from engine.registry.errors import store_error

_DDL = """
CREATE TABLE IF NOT EXISTS schemas (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    schema_type TEXT NOT NULL,
    schema TEXT NOT NULL,
    refs TEXT NOT NULL DEFAULT '[]',
    fingerprint TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS subject_versions (
    subject TEXT NOT NULL,
    version INTEGER NOT NULL,
    schema_id INTEGER NOT NULL REFERENCES schemas(id),
    deleted INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (subject, version)
);
CREATE INDEX IF NOT EXISTS subject_versions_by_schema ON subject_versions (schema_id);
CREATE TABLE IF NOT EXISTS config (
    scope TEXT PRIMARY KEY,
    compatibility TEXT NOT NULL
);
"""


class Database:
    """One SQLite database file holding the registry (created when new)."""

    def __init__(self, db_path: str | Path) -> None:
        self.path = Path(db_path)
        # Writers in this process queue here (fast hand-over) rather than in SQLite's busy
        # handler, which sleeps in growing steps; other processes still wait on SQLite's lock.
        self._write_lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_DDL)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise store_error(exc) from exc

    @contextmanager
    def transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        """One connection, one transaction opened with ``begin``: committed when the block
        ends, rolled back when it raises; SQLite errors become 50001."""
        try:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except sqlite3.Error as exc:
            raise store_error(exc) from exc
        try:
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(begin)
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise store_error(exc) from exc
        finally:
            conn.close()

    def read(self) -> AbstractContextManager[sqlite3.Connection]:
        """A read transaction (a consistent snapshot)."""
        return self.transaction("BEGIN")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction, holding SQLite's write lock from its start."""
        with self._write_lock, self.transaction("BEGIN IMMEDIATE") as conn:
            yield conn
