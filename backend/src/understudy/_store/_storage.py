"""The SQLite engine behind the storage seam: `SqliteStorage` over one `Database` connection."""

from __future__ import annotations

from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from understudy._store import _migrations
from understudy._store._ports import Storage
from understudy._store.blocked import repository as blocked_repository
from understudy._store.close_requests import SqlCloseRequests
from understudy._store.cluster import SqlActors, SqlNodes, SqlOutbox
from understudy._store.commands import SqlCommands
from understudy._store.credentials import SqlApiKeys, SqlDevices
from understudy._store.dialogs import repository as dialog_repository
from understudy._store.operators import SqlOperators
from understudy._store.quotas import SqlQuotas
from understudy._store.sessions import SqlSessions
from understudy._store.tickets import SqlTickets
from understudy._store.vault import SqlVault

if TYPE_CHECKING:
    from collections.abc import Iterator

    from understudy._store._db import Database
    from understudy._store._seen import SeenRecords
    from understudy._store._sql import Dialect, Executor


class SqlRepositories:
    """Every repository over one executor: the same classes serve every engine.

    SQLite has one connection, so one set serves all; PostgreSQL's executor runs on whichever
    pooled connection the current transaction holds.
    """

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    @cached_property
    def api_keys(self) -> SqlApiKeys:
        return SqlApiKeys(self._sql)

    @cached_property
    def devices(self) -> SqlDevices:
        return SqlDevices(self._sql)

    @cached_property
    def sessions(self) -> SqlSessions:
        return SqlSessions(self._sql)

    @cached_property
    def commands(self) -> SqlCommands:
        return SqlCommands(self._sql)

    @cached_property
    def tickets(self) -> SqlTickets:
        return SqlTickets(self._sql)

    @cached_property
    def quotas(self) -> SqlQuotas:
        return SqlQuotas(self._sql)

    @cached_property
    def vault(self) -> SqlVault:
        return SqlVault(self._sql)

    @cached_property
    def operators(self) -> SqlOperators:
        return SqlOperators(self._sql)

    @cached_property
    def close_requests(self) -> SqlCloseRequests:
        return SqlCloseRequests(self._sql)

    @cached_property
    def actors(self) -> SqlActors:
        return SqlActors(self._sql)

    @cached_property
    def outbox(self) -> SqlOutbox:
        return SqlOutbox(self._sql)

    @cached_property
    def nodes(self) -> SqlNodes:
        return SqlNodes(self._sql)

    @cached_property
    def dialogs(self) -> SeenRecords:
        return dialog_repository(self._sql)

    @cached_property
    def blocked(self) -> SeenRecords:
        return blocked_repository(self._sql)


class SqlStorage(Storage, Protocol):
    """What every engine here offers beyond `Storage`: the shared SQL repositories, the schema
    check, and what the service needs to be the one service on its database."""

    @property
    def repos(self) -> SqlRepositories: ...

    def check_supported(self) -> int:
        """The schema version, refusing a database migrated by a newer binary.

        Raises:
            SchemaTooNewError: the version is newer than this binary's last migration.
        """
        ...

    def change_marker(self) -> object:
        """A value that changes when another process (or node) may have committed a revocation
        or a close request; the revocation watch polls it once a second."""
        ...

    def service_holder(self) -> str | None:
        """Who serves the database, as far as the database itself can tell (PostgreSQL: the
        live nodes), or None (SQLite: the data directory's lock file says it instead)."""
        ...

    def claim_service(self) -> None:
        """Claim the database for this process, until `close()`.

        SQLite needs nothing more than the data directory's lock (one process per file).
        PostgreSQL registers the process as one node of several (`nodes`).

        Raises:
            StorageInUseError: the engine allows no other service and one holds the database.
        """
        ...

    def keep_claim(self) -> None:
        """Keep the claim, once a second: PostgreSQL heartbeats the node (and registers it again
        if its row was forgotten); SQLite's lock lasts as long as the process.

        Raises:
            StorageInUseError: another service took the database meanwhile; this one must stop.
        """
        ...

    def close(self) -> None: ...


class SqliteStorage:
    """`understudy._store._ports.Storage` on SQLite: the `Database`'s group commit, migrations."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.repos = SqlRepositories(db.sql)

    @property
    def dialect(self) -> Dialect:
        return self.db.sql.dialect

    @contextmanager
    def transaction(self) -> Iterator[SqlRepositories]:
        with self.db.transaction():
            yield self.repos

    @contextmanager
    def read(self) -> Iterator[SqlRepositories]:
        # One connection, autocommit between transactions: reads need no transaction of their own.
        yield self.repos

    async def durable(self) -> None:
        await self.db.durable()

    def migrate(self, now: float) -> list[int]:
        # One transaction per migration; a second process waits on SQLite's write lock.
        return _migrations.apply(self.db.sql, self.db.transaction, now, where=self.db.path)

    def schema_version(self) -> int:
        return _migrations.version_on(self.db.sql)

    def check_supported(self) -> int:
        return _migrations.refuse_newer(self.schema_version(), self.db.path)

    def change_marker(self) -> object:
        # SQLite's data_version moves on every commit of another connection; it reads only the
        # WAL index, so polling it costs no table access.
        return self.db.data_version()

    def claim_service(self) -> None:
        """The data directory's lock (`_lock.py`) already makes the service the only one."""

    def service_holder(self) -> str | None:
        return None  # the data directory's lock file names the holder

    def keep_claim(self) -> None:
        """The data directory's lock lasts as long as the process."""

    def close(self) -> None:
        self.db.close()


if TYPE_CHECKING:

    def _conforms(db: Database) -> Storage:
        """mypy proves here that the SQLite engine implements every protocol of the seam."""
        return SqliteStorage(db)

    def _conforms_here(db: Database) -> SqlStorage:
        return SqliteStorage(db)
