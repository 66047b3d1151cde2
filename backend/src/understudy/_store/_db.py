"""The SQLite connection: WAL, `synchronous=FULL` by default, one transaction per actor turn.

Calls are synchronous on the event-loop thread. That is deliberate: a transaction can then never
span an `await` (actor rule 3), and SQLite statements on a local file take microseconds.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

Row = sqlite3.Row


class Database:
    def __init__(
        self, path: Path | str, *, synchronous: Literal["FULL", "NORMAL"] = "FULL"
    ) -> None:
        self.path = str(path)
        self.synchronous = synchronous
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={synchronous}")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._depth = 0

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic unit; nested uses join the outer transaction."""
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

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[Row]:
        return list(self._conn.execute(sql, params).fetchall())

    def one(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> Row | None:
        row: Row | None = self._conn.execute(sql, params).fetchone()
        return row

    def execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> int:
        """Run one statement; returns the number of rows changed."""
        return self._conn.execute(sql, params).rowcount

    def close(self) -> None:
        self._conn.close()
