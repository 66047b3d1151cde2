"""The storage layer: all SQL lives here, a module per aggregate; callers use typed functions.

The SQL stays portable to PostgreSQL (`INSERT … ON CONFLICT`, no SQLite-only functions in logic),
so a second implementation can be added behind the same functions.
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
from understudy._store._migrations import (
    LATEST,
    SchemaTooNewError,
    check_supported,
    current_version,
    migrate,
)

__all__ = [
    "LATEST",
    "Database",
    "SchemaTooNewError",
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
