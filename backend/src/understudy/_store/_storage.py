"""The SQLite engine behind the storage seam: `SqliteStorage` over one `Database` connection."""

from __future__ import annotations

from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING

from understudy._store import _migrations
from understudy._store.blocked import repository as blocked_repository
from understudy._store.close_requests import SqlCloseRequests
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
    from understudy._store._ports import Storage
    from understudy._store._seen import SeenRecords
    from understudy._store._sql import Dialect


class SqlRepositories:
    """Every repository over one `Database` (SQLite has one connection, so one set serves all)."""

    def __init__(self, db: Database) -> None:
        self._sql = db.sql

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
    def dialogs(self) -> SeenRecords:
        return dialog_repository(self._sql)

    @cached_property
    def blocked(self) -> SeenRecords:
        return blocked_repository(self._sql)


class SqliteStorage:
    """`understudy._store._ports.Storage` on SQLite: the `Database`'s group commit, migrations."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.repos = SqlRepositories(db)

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
        return _migrations.migrate(self.db, now, dialect=self.dialect)

    def schema_version(self) -> int:
        return _migrations.current_version(self.db)

    def close(self) -> None:
        self.db.close()


if TYPE_CHECKING:

    def _conforms(db: Database) -> Storage:
        """mypy proves here that the SQLite engine implements every protocol of the seam."""
        return SqliteStorage(db)
