"""The SQLite connection: WAL, `synchronous=FULL` by default, group commit across actor turns.

Calls are synchronous on the event-loop thread. That is deliberate: a transaction can then never
span an `await` (actor rule 3), and SQLite statements on a local file take microseconds.

**Group commit.** Inside a running event loop, `transaction()` does not commit on its own. The
first turn of a loop iteration opens one SQLite transaction (`BEGIN IMMEDIATE`) and schedules its
`COMMIT` with `call_soon`; every turn that runs before then joins it as a `SAVEPOINT`, so a turn
that raises rolls back alone while the others stay. The group's first turn needs no savepoint:
when it raises, nothing else is in the transaction yet, so the transaction rolls back whole and
the group is gone (the next turn opens a new one). One fsync then covers every turn of the
iteration, whichever actor took it.

Nothing that depends on a turn may leave the process before it is durable: the actors await
`durable()` after each turn, then send its frames; every HTTP response and every other socket
frame waits for it too (`http/`). Each waiter has its own future, resolved by the COMMIT (an
exception when it failed): a waiter that is cancelled (a request that went away) takes only its
own future with it, so the group needs no `asyncio.shield` per waiter (a future and a callback
each). Outside a loop (the CLI, migrations at start-up) each transaction commits when its block
ends.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from contextlib import contextmanager, suppress
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from understudy._store._errors import ConflictError
from understudy._store._sql import SQLITE, Dialect, Executor

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path

    from understudy._store._storage import SqlStorage

Row = sqlite3.Row
log = logging.getLogger(__name__)


class DurabilityError(RuntimeError):
    """A group's COMMIT failed: none of its turns is durable (they were rolled back)."""


class _Group:
    """The open group: the waiters for its COMMIT, each on a future of its own."""

    __slots__ = ("waiters",)

    def __init__(self) -> None:
        self.waiters: list[asyncio.Future[None]] = []


class Database:
    # A class default, so an engine that reuses this class without its SQLite connection (the
    # PostgreSQL one) never has a group open.
    _group: _Group | None = None

    def __init__(
        self,
        path: Path | str,
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        group_commit: bool = True,
    ) -> None:
        self.path = str(path)
        self.synchronous = synchronous
        self.group_commit = group_commit
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={synchronous}")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._depth = 0
        self._group: _Group | None = None  # the open group: a transaction awaiting its COMMIT
        self.commits = 0  # COMMITs issued (each one fsync under FULL), for tests and benchmarks
        self.turns = 0  # transactions taken
        self.sql: Executor = SqliteExecutor(self._conn)  # what repositories run statements on

    @cached_property
    def storage(self) -> SqlStorage:
        """This database behind the storage seam (`understudy._store._ports.Storage`)."""
        from understudy._store._storage import SqliteStorage  # a cycle at import time

        return SqliteStorage(self)

    def data_version(self) -> int:
        """A number that changes whenever another connection (another process) has committed.

        SQLite reads it from the WAL index without touching a table, so polling it is cheap.
        """
        row = self._conn.execute("PRAGMA data_version").fetchone()
        return int(row[0])

    @contextmanager
    def transaction(self) -> Iterator[object]:
        """One atomic unit; nested uses join the outer one. Durable after `durable()` returns."""
        if self._depth:
            self._depth += 1
            try:
                yield self._conn
            finally:
                self._depth -= 1
            return
        self.turns += 1
        group = self._group
        if group is None:
            group = self._open_group()
            if group is None:
                yield from self._single()
                return
            self._depth = 1
            try:
                yield self._conn
            except BaseException:
                self._depth = 0
                # The group's first turn: nothing else is in the transaction yet.
                self._group = None
                self._conn.execute("ROLLBACK")
                raise
            self._depth = 0
            return
        self._conn.execute("SAVEPOINT turn")
        self._depth = 1
        try:
            yield self._conn
        except BaseException:
            self._depth = 0
            self._conn.execute("ROLLBACK TO turn")
            self._conn.execute("RELEASE turn")
            raise
        self._depth = 0
        self._conn.execute("RELEASE turn")

    def _single(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self._conn
        except BaseException:
            self._depth = 0
            self._conn.execute("ROLLBACK")
            raise
        self._depth = 0
        self._commit()

    def _open_group(self) -> _Group | None:
        """Open a group for this loop iteration; None outside a loop or when disabled."""
        if not self.group_commit:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        self._conn.execute("BEGIN IMMEDIATE")
        group = self._group = _Group()
        loop.call_soon(self._commit_group, group)
        return group

    def _commit_group(self, group: _Group | None) -> None:
        if group is None or group is not self._group:
            return  # its only turn rolled it back, or close() committed it
        self._group = None
        try:
            self._commit()
        except sqlite3.Error as exc:
            log.exception("group commit failed; its turns are rolled back")
            with suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            failed = DurabilityError(str(exc))
            for waiter in group.waiters:
                if not waiter.done():
                    waiter.set_exception(failed)
                    waiter.exception()  # retrieved here too: a waiter gone is not an error
            return
        for waiter in group.waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _commit(self) -> None:
        self._conn.execute("COMMIT")
        self.commits += 1

    async def durable(self) -> None:
        """Return once every turn taken so far is committed (at once when none is pending).

        Raises:
            DurabilityError: the open group's COMMIT failed.
        """
        group = self._group
        if group is not None:
            waiter = asyncio.get_running_loop().create_future()
            group.waiters.append(waiter)
            await waiter

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[Row]:
        return list(self._conn.execute(sql, params).fetchall())

    def one(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> Row | None:
        row: Row | None = self._conn.execute(sql, params).fetchone()
        return row

    def execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> int:
        """Run one statement; returns the number of rows changed."""
        return self._conn.execute(sql, params).rowcount

    def close(self) -> None:
        self._commit_group(self._group)  # a group still open is committed, not lost
        self._conn.close()


# The extended result codes of a taken key (a primary key or a unique index). NOT NULL, CHECK and
# FOREIGN KEY failures are programming errors, not conflicts, and stay sqlite3 errors.
_CONFLICTS = frozenset({"SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE"})


class SqliteExecutor:
    """The SQLite side of `understudy._store._sql.Executor`, on the process's one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.statements = 0  # statements run (not BEGIN/SAVEPOINT/COMMIT), for /metrics

    @property
    def dialect(self) -> Dialect:
        return SQLITE

    def _cursor(self, sql: str, params: Mapping[str, Any] | None) -> sqlite3.Cursor:
        # Plain tuples: the rows become dicts below, which is about twice as fast from a tuple
        # and the column names (read once per statement) as through `sqlite3.Row`.
        cursor = self._conn.cursor()
        cursor.row_factory = None
        self.statements += 1
        try:
            return cursor.execute(sql, params if params is not None else {})
        except sqlite3.IntegrityError as exc:
            if exc.sqlite_errorname in _CONFLICTS:
                raise ConflictError(str(exc)) from exc
            raise

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        cursor = self._cursor(sql, params)
        # fetchall() also steps a RETURNING statement to its end, so its changes are complete.
        found = cursor.fetchall()
        if not found:
            return []
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in found]

    def one(self, sql: str, params: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def run(self, sql: str, params: Mapping[str, Any] | None = None) -> int:
        return self._cursor(sql, params).rowcount
