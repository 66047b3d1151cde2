"""The SQLite connection of the service: WAL, `synchronous=FULL`, one transaction at a time.

Calls are synchronous, on whichever thread makes them (the event loop's, in the service): SQLite
statements on a local file take microseconds, and a transaction can then never span an `await`.
A lock serialises transactions, so a helper thread (a CLI command, a test) may share the
connection safely.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

Row = sqlite3.Row


class Database:
    """One connection to the service's database file."""

    def __init__(
        self, path: Path | str, *, synchronous: Literal["FULL", "NORMAL"] = "FULL"
    ) -> None:
        self.path = str(path)
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={synchronous}")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._lock = threading.RLock()
        self._depth = 0

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic unit (`BEGIN IMMEDIATE` … `COMMIT`); nested uses join the outer one."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self._conn
                finally:
                    self._depth -= 1
                return
            self._conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield self._conn
            except BaseException:
                self._depth = 0
                self._conn.execute("ROLLBACK")
                raise
            self._depth = 0
            self._conn.execute("COMMIT")

    def data_version(self) -> int:
        """A number that changes whenever another connection (another process) has committed."""
        with self._lock:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[Row]:
        with self._lock:
            return list(self._conn.execute(sql, params).fetchall())

    def one(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> Row | None:
        with self._lock:
            row: Row | None = self._conn.execute(sql, params).fetchone()
            return row

    def execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> int:
        """Run one statement (in its own transaction unless inside one); rows changed."""
        with self._lock:
            return self._conn.execute(sql, params).rowcount

    def close(self) -> None:
        with self._lock:
            self._conn.close()
