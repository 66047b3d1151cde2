"""The PostgreSQL engine behind the storage seam: `PostgresStorage` over a psycopg 3 pool.

The repositories are the same classes as SQLite's (`_storage.SqlRepositories`), written once in
portable SQL; here they run on `PostgresExecutor`, which renders each statement with the
`POSTGRESQL` dialect (`:name` → `%(name)s`) and executes it on the connection of the current
transaction.

**A turn is one PostgreSQL transaction.** Calls stay synchronous on the event-loop thread, as on
SQLite, so a transaction never spans an `await` (actor rule 3): `transaction()` takes a connection
from the pool, runs `BEGIN`, yields, and `COMMIT`s when the block ends, before the turn's frames
or replies can leave. A nested `transaction()` joins the outer one. There is no group commit
across turns: every turn pays one commit round trip (the server's WAL flush with
`synchronous_commit=on`), so `durable()` has nothing left to wait for. Isolation is PostgreSQL's
default, READ COMMITTED: each repository change is one statement that is atomic on its own
(`INSERT … ON CONFLICT`, `UPDATE … RETURNING`; the quota upsert re-checks its `WHERE` against the
row as a concurrent writer left it), and turns of one actor are one at a time across nodes
because each locks its actor's row first (`cluster.SqlActors.lock`, see `_turns.py`).

**Nodes.** Several processes may serve one database: `claim_service` registers this one as a
node (`nodes`, see `_node.py`) and `keep_claim` heartbeats it; nothing is refused.

Errors: a unique violation raises `ConflictError`, as on SQLite; a serialization failure, a
deadlock or a lock wait past `LOCK_TIMEOUT_MS` raises `RetryableConflictError` (a
`ConflictError`): the whole transaction lost a race and may be retried. Either way the
transaction is rolled back when the error leaves the block.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import socket
import threading
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.adapt import Dumper
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from understudy._store import _migrations
from understudy._store._db import Database
from understudy._store._errors import (
    ConflictError,
    RetryableConflictError,
    StorageUnavailableError,
)
from understudy._store._sql import POSTGRESQL, Dialect
from understudy._store._storage import SqlRepositories

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from contextlib import AbstractContextManager

    from understudy._store._db import Row
    from understudy._store._ports import Storage
    from understudy._store._storage import SqlStorage

Connection = psycopg.Connection[dict[str, Any]]

# Advisory lock keys: (a fixed number per purpose, a hash of the schema), so two installations
# in two schemas of one database do not block each other.
_MIGRATION_LOCK: Final = 0x5573_0001
log = logging.getLogger(__name__)
# A node whose heartbeat is older than this is gone: other nodes take its sockets and timers.
NODE_DEAD_AFTER_S: Final = 5.0
# A node that finds its own previous heartbeat older than this may have been taken for gone
# meanwhile (the others' reads and turns trail their decision): it checks its sockets' rows.
LATE_HEARTBEAT_S: Final = NODE_DEAD_AFTER_S / 2
POOL_MAX_SIZE: Final = 4
POOL_TIMEOUT_S: Final = 10.0  # waiting for a free connection (or for the server at start-up)
# A statement waits at most this long for a row lock another process holds: the wait blocks the
# event-loop thread (every actor of the process), so a stuck lock fails the one turn instead.
LOCK_TIMEOUT_MS = 5000


class _BoolAsInteger(Dumper):
    """Booleans go out as 0/1: flag columns are INTEGER in the shared migrations, as in SQLite."""

    oid = psycopg.adapters.types["int4"].oid

    def dump(self, obj: bool) -> bytes:
        return b"1" if obj else b"0"


def _configure(conn: Connection) -> None:
    conn.adapters.register_dumper(bool, _BoolAsInteger)
    conn.execute(f"SET lock_timeout = {int(LOCK_TIMEOUT_MS)}")


def generated_node_id() -> str:
    """A node id for a process that was given none: its host, its pid and a random suffix."""
    host = "".join(c if c.isalnum() or c in "-_." else "-" for c in socket.gethostname())
    return f"{host[:40] or 'node'}-{os.getpid()}-{secrets.token_hex(3)}"


def redacted(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _probe(url: str, where: str) -> None:
    """Connect once, so that an unreachable server fails start-up with libpq's reason."""
    try:
        psycopg.connect(url, connect_timeout=int(POOL_TIMEOUT_S)).close()
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        message = f"cannot connect to PostgreSQL at {where}: {reason}"
        raise StorageUnavailableError(message) from None


def _mapped(exc: psycopg.Error) -> Exception:
    """The engine-neutral error for a driver error (or the error itself)."""
    if isinstance(exc, pg_errors.UniqueViolation):
        return ConflictError(str(exc))
    if isinstance(
        exc,
        (pg_errors.SerializationFailure, pg_errors.DeadlockDetected, pg_errors.LockNotAvailable),
    ):
        return RetryableConflictError(str(exc))
    return exc


class _Current(threading.local):
    """The connection this thread's transaction (or read) holds, and how deeply it is nested."""

    conn: Connection | None = None
    depth: int = 0  # open transaction() blocks; 0 inside a plain read()


class PostgresExecutor:
    """The PostgreSQL side of `understudy._store._sql.Executor`: statements rendered once per
    text, run on the current transaction's connection.

    Outside any transaction a statement borrows a pooled connection and commits on its own, as
    SQLite's connection does between transactions (the module functions' plain reads do this).
    """

    def __init__(
        self, current: _Current, borrow: Callable[[], AbstractContextManager[Connection]]
    ) -> None:
        self._current = current
        self._borrow = borrow
        self._rendered: dict[str, str] = {}

    @property
    def dialect(self) -> Dialect:
        return POSTGRESQL

    def rendered(self, sql: str) -> str:
        text = self._rendered.get(sql)
        if text is None:
            text = self._rendered[sql] = POSTGRESQL.render(sql)
        return text

    def execute(
        self, text: str, params: Mapping[str, Any] | Sequence[Any] | None
    ) -> tuple[list[dict[str, Any]], int]:
        """Run driver-ready `text`: (rows it returned, rows it changed)."""
        conn = self._current.conn
        if conn is not None:
            return self._on(conn, text, params)
        with self._borrow() as borrowed:
            return self._on(borrowed, text, params)

    @staticmethod
    def _on(
        conn: Connection, text: str, params: Mapping[str, Any] | Sequence[Any] | None
    ) -> tuple[list[dict[str, Any]], int]:
        try:
            cursor = conn.execute(text, params)
            rows = cursor.fetchall() if cursor.description is not None else []
        except psycopg.Error as exc:
            mapped = _mapped(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        return rows, cursor.rowcount

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return self.execute(self.rendered(sql), params)[0]

    def one(self, sql: str, params: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def run(self, sql: str, params: Mapping[str, Any] | None = None) -> int:
        return self.execute(self.rendered(sql), params)[1]


class PostgresStorage:
    """`understudy._store._ports.Storage` on PostgreSQL: a pool, one transaction per turn.

    Args:
        url: A libpq URL (`postgresql://user:password@host:5432/dbname`).
        max_size: Connections the pool may open. The event-loop thread holds one at a time (a
            transaction never spans an await); more serve other threads (the CLI, tests).
    """

    def __init__(
        self, url: str, *, max_size: int = POOL_MAX_SIZE, node_id: str | None = None
    ) -> None:
        self._url = url
        self.where = redacted(url)
        self.url = url
        self.node_id = node_id or generated_node_id()
        self._claimed = False  # claim_service() registered the node: keep_claim() heartbeats
        self.heartbeat_ok = False  # the last heartbeat reached the database
        self._registered = False  # the node's row was written once
        # Heartbeats that found this node's row late, stopped or gone: other nodes may have taken
        # its sockets over meanwhile (`SharedNode` then checks them against their rows).
        self.late_heartbeats = 0
        # The heartbeat's own connection, outside the pool: turns and polls that keep every pooled
        # connection busy (a loaded node) must not make the node look gone.
        self._beat_conn: Connection | None = None
        self._beat_lock = threading.Lock()
        self._current = _Current()
        self.turns = 0  # transactions taken
        self.commits = 0  # transactions committed
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            kwargs={"autocommit": True, "row_factory": dict_row},
            configure=_configure,
            min_size=1,
            max_size=max_size,
            timeout=POOL_TIMEOUT_S,
            name="understudy",
            open=False,
        )
        self.sql = PostgresExecutor(self._current, self._pool.connection)
        self.repos = SqlRepositories(self.sql)
        _probe(url, self.where)  # the server's own reason, not the pool's timeout, when it fails
        self._pool.open(wait=True, timeout=POOL_TIMEOUT_S)

    @property
    def dialect(self) -> Dialect:
        return POSTGRESQL

    @contextmanager
    def transaction(self) -> Iterator[SqlRepositories]:
        current = self._current
        if current.depth:
            current.depth += 1
            try:
                yield self.repos
            finally:
                current.depth -= 1
            return
        if current.conn is not None:  # inside read(): the same connection begins a transaction
            yield from self._begin(current.conn)
            return
        with self._pool.connection() as conn:
            current.conn = conn
            try:
                yield from self._begin(conn)
            finally:
                current.conn = None

    def _begin(self, conn: Connection) -> Iterator[SqlRepositories]:
        current = self._current
        self.turns += 1
        current.depth = 1
        try:
            with conn.transaction():
                yield self.repos
        except psycopg.Error as exc:  # COMMIT itself failed, or a statement not run by the executor
            mapped = _mapped(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        finally:
            current.depth = 0
        self.commits += 1

    @contextmanager
    def read(self) -> Iterator[SqlRepositories]:
        current = self._current
        if current.conn is not None:  # inside a transaction: read its own changes
            yield self.repos
            return
        # Autocommit: each statement sees what was committed when it started.
        with self._pool.connection() as conn:
            current.conn = conn
            try:
                yield self.repos
            finally:
                current.conn = None

    async def durable(self) -> None:
        """Every transaction committed when its block ended; nothing is pending."""

    def migrate(self, now: float) -> list[int]:
        """Apply pending migrations in one transaction (DDL is transactional on PostgreSQL),
        under an advisory lock, so nodes starting together migrate once."""
        with self.transaction():
            # Another node's migration may take longer than a turn's lock wait: wait it out.
            self.sql.run("SET LOCAL lock_timeout = 0")
            self._lock_schema()
            return _migrations.apply(self.sql, self.transaction, now, where=self.where)

    def schema_version(self) -> int:
        # A plain read (readiness asks on every probe): no DDL, no lock; 0 before any migration.
        with self.read():
            row = self.sql.one("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
            if row is None or not row["present"]:
                return 0
            found = self.sql.one("SELECT MAX(version) AS v FROM schema_migrations")
        return int(found["v"]) if found is not None and found["v"] is not None else 0

    def check_supported(self) -> int:
        """The schema version, refusing a database migrated by a newer binary.

        Raises:
            SchemaTooNewError: the version is newer than this binary's last migration.
        """
        return _migrations.refuse_newer(self.schema_version(), self.where)

    def _lock_schema(self) -> None:
        self.sql.one(
            "SELECT pg_advisory_xact_lock(:purpose, hashtext(current_schema()))",
            {"purpose": _MIGRATION_LOCK},
        )

    def change_marker(self) -> object:
        """A value that moves when a revocation or close request may have been committed.

        PostgreSQL has no counterpart of SQLite's `data_version`; this reads the few columns the
        revocation watch reacts to (small tables: keys, devices, pending close requests).
        """
        with self.read():
            return self.sql.one(_CHANGE_MARKER)

    def claim_service(self) -> None:
        """Register this process as a node (`nodes`): several nodes share one database.

        Turns lock their actor's row in the database itself (`cluster.SqlActors.lock`), so a
        second `understudy serve` on the same database is another node, not a conflict.
        """
        self._claimed = True
        # Before the first migration there is no `nodes` table yet: the service registers once
        # it migrated (its first `keep_claim`), before it accepts any socket.
        self.keep_claim()

    def keep_claim(self) -> None:
        """Heartbeat this node once a second (`nodes.heartbeat_at`, on the server's clock).

        It runs on a connection of its own, outside the pool, so a node whose turns and polls
        keep every pooled connection busy still heartbeats. While PostgreSQL is unreachable the
        heartbeat fails (readiness and `/metrics` report it, and other nodes take this one's
        sockets over once it is older than `NODE_DEAD_AFTER_S`); once it is back, the node row
        is written again. A heartbeat that finds the previous one older than `LATE_HEARTBEAT_S`,
        or the row stopped or forgotten, counts it in `late_heartbeats` and logs it: the node
        then closes the sockets other nodes took over meanwhile (`_node.SharedNode`).
        """
        if not self._claimed:
            return
        try:
            with self._beat_lock:
                age = self._beat()
        except (psycopg.Error, PoolTimeout):
            if self.heartbeat_ok:
                log.warning("node %s: the heartbeat failed", self.node_id, exc_info=True)
            self.heartbeat_ok = False
            return
        self.heartbeat_ok = True
        if age is None and self._registered:
            self.late_heartbeats += 1
            log.warning(
                "node %s was taken for gone (its row was stopped or forgotten); registered "
                "again, closing the sockets other nodes took over",
                self.node_id,
            )
        elif age is not None and age > LATE_HEARTBEAT_S and self._registered:
            self.late_heartbeats += 1
            log.warning(
                "node %s: its previous heartbeat was %.1f s old (a pause or an overloaded "
                "process; other nodes take a node's sockets after %.0f s): checking its sockets "
                "against their rows",
                self.node_id,
                age,
                NODE_DEAD_AFTER_S,
            )
        self._registered = True

    def _beat(self) -> float | None:
        """One heartbeat on the heartbeat's own connection (opened again after a failure)."""
        conn = self._beat_conn
        if conn is None or conn.closed or conn.broken:
            conn = self._beat_conn = psycopg.connect(
                self._url, autocommit=True, row_factory=dict_row, connect_timeout=5
            )
            _configure(conn)
        current = self._current
        outer, current.conn = current.conn, conn
        try:
            with self.transaction() as repos:
                age = repos.nodes.heartbeat(self.node_id)
                if age is None:
                    # The first heartbeat registers; a later one finds the row stopped or gone
                    # only when this node was taken for gone (and forgotten): it comes back.
                    repos.nodes.register(self.node_id)
            return age
        except psycopg.Error:
            self._beat_conn = None
            with suppress(psycopg.Error):
                conn.close()
            raise
        finally:
            current.conn = outer

    def service_holder(self) -> str | None:
        """The live nodes on this database (`nodes a, b`), or None when none heartbeats."""
        with self.read() as repos:
            alive = repos.nodes.alive(NODE_DEAD_AFTER_S)
        return f"nodes {', '.join(alive)}" if alive else None

    def close(self) -> None:
        if self._claimed:
            self._claimed = False
            # Other nodes take this node's sockets over at once, not a heartbeat timeout later.
            with suppress(psycopg.Error, PoolTimeout), self.transaction() as repos:
                repos.nodes.stopped(self.node_id)
        with self._beat_lock:
            if self._beat_conn is not None:
                with suppress(psycopg.Error):
                    self._beat_conn.close()
                self._beat_conn = None
        self._pool.close()


_CHANGE_MARKER: Final = (
    "SELECT (SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NOT NULL) AS keys_revoked, "
    "(SELECT COUNT(*) FROM devices WHERE revoked_at IS NOT NULL) AS devices_revoked, "
    "(SELECT COUNT(*) FROM devices) AS devices, "
    "(SELECT MAX(requested_at) FROM close_requests WHERE done_at IS NULL) AS close_requested, "
    "(SELECT COUNT(*) FROM close_requests WHERE done_at IS NULL) AS close_pending"
)


# Legacy statements with `?` markers: strings and quoted names are skipped, a `%` is doubled.
_POSITIONAL = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|(?P<mark>\?)|(?P<percent>%)""")


def _positional(sql: str) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group("mark"):
            return "%s"
        if match.group("percent"):
            return "%%"
        return match.group().replace("%", "%%")

    return _POSITIONAL.sub(one, sql)


class PostgresDatabase(Database):
    """The `Database` the service and the CLI hold, on PostgreSQL.

    Callers still hold a `Database`: its `transaction()` and `durable()`, and the module functions
    of `_store`, which reach the repositories through `storage`. This gives all of them PostgreSQL
    without an engine test in any of them; it goes once every caller holds a `Storage`. The few
    legacy statements still written for sqlite3 (`?` markers) run through `query`/`one`/`execute`.
    """

    def __init__(
        self, url: str, *, max_size: int = POOL_MAX_SIZE, node_id: str | None = None
    ) -> None:
        # No Database.__init__: there is no SQLite file. Everything it would set that callers
        # read is set here.
        self._pg = PostgresStorage(url, max_size=max_size, node_id=node_id)
        self.path = self._pg.where
        self.synchronous = "FULL"
        self.group_commit = False
        self.commits = 0
        self.turns = 0
        self.sql = self._pg.sql

    @property
    def storage(self) -> SqlStorage:
        return self._pg

    def data_version(self) -> int:
        raise NotImplementedError("PostgreSQL has no data_version; use storage.change_marker()")

    @contextmanager
    def transaction(self) -> Iterator[object]:
        try:
            with self._pg.transaction():
                yield None
        finally:
            self.turns, self.commits = self._pg.turns, self._pg.commits

    async def durable(self) -> None:
        await self._pg.durable()

    def _legacy(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any]
    ) -> tuple[list[dict[str, Any]], int]:
        if isinstance(params, dict):
            return self._pg.sql.execute(self._pg.sql.rendered(sql), params)
        return self._pg.sql.execute(_positional(sql), tuple(params))

    def query(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[Row]:
        # dict rows: every legacy caller reads columns by name (`row["x"]`, `dict(row)`).
        return cast("list[Row]", self._legacy(sql, params)[0])

    def one(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> Row | None:
        found = self.query(sql, params)
        return found[0] if found else None

    def execute(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> int:
        return self._legacy(sql, params)[1]

    def close(self) -> None:
        self._pg.close()


if TYPE_CHECKING:

    def _conforms(url: str) -> Storage:
        """mypy proves here that the PostgreSQL engine implements every protocol of the seam."""
        return PostgresStorage(url)

    def _conforms_here(url: str) -> SqlStorage:
        return PostgresStorage(url)
