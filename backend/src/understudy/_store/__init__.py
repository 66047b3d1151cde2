"""The storage layer: all SQL lives here, a module per aggregate, behind a seam.

`_ports.py` declares one repository protocol per aggregate and the `Storage` that hands them out
in transactions; `Database.storage` is the SQLite engine (`_storage.py`), and
`_postgres.PostgresStorage` the PostgreSQL one, chosen by `UNDERSTUDY_DATABASE_URL` in
`_bootstrap.open_database`. The SQL is written once and portable (named parameters rendered by a
`Dialect`, `INSERT … ON CONFLICT`, `RETURNING`, no `rowid`, no scalar `MIN(a, b)`): an engine
brings an executor and a dialect and passes the contract suite in `tests/backend/storage/`.
Callers reach rows only through the repositories (`db.storage.repos.sessions.get(…)`, an actor's
`ActorBase.repos`); no module here offers a function over the connection or an update by column
dictionary.
"""

from understudy._store import (
    blocked,
    close_requests,
    commands,
    credentials,
    dialogs,
    operators,
    quotas,
    sessions,
    tickets,
    vault,
)
from understudy._store._db import Database
from understudy._store._errors import ConflictError, StorageError
from understudy._store._migrations import (
    LATEST,
    SchemaTooNewError,
    check_supported,
    current_version,
    migrate,
)
from understudy._store._storage import SqliteStorage

__all__ = [
    "LATEST",
    "ConflictError",
    "Database",
    "SchemaTooNewError",
    "SqliteStorage",
    "StorageError",
    "blocked",
    "check_supported",
    "close_requests",
    "commands",
    "credentials",
    "current_version",
    "dialogs",
    "migrate",
    "operators",
    "quotas",
    "sessions",
    "tickets",
    "vault",
]
