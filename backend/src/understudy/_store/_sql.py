"""What differs between SQL engines, kept in one place: parameter style, scalar least, DDL types.

Repositories write every statement once, with named `:name` parameters and portable SQL
(`INSERT … ON CONFLICT`, `RETURNING`, no `rowid`, no scalar `MIN(a, b)`), and run it through an
`Executor`; the executor renders it for its driver with its `Dialect`. A second engine therefore
brings an executor and a dialect, not a second copy of the SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

# Tokens that can hold a `:` or `%` that is not a parameter: strings, quoted names, comments, casts.
_SQL_TOKEN = re.compile(
    r"""
      (?P<skip>'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|::)
    | :(?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<percent>%)
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE | re.DOTALL,
)


def _rewrite(
    sql: str,
    *,
    name: Callable[[str], str] | None = None,
    word: Callable[[str], str] | None = None,
    percent: str = "%",
) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group("skip") is not None:
            return match.group().replace("%", percent)
        if match.group("name") is not None:
            return name(match.group("name")) if name else match.group()
        if match.group("percent") is not None:
            return percent
        if match.group("word") is not None:
            return word(match.group("word")) if word else match.group()
        return match.group()

    return _SQL_TOKEN.sub(one, sql)


@dataclass(frozen=True)
class Dialect:
    """An engine's spelling of the few things portable SQL cannot say the same way."""

    name: str
    paramstyle: str  # "named" (`:name`, sqlite3) or "pyformat" (`%(name)s`, psycopg)
    has_least: bool  # a scalar LEAST(a, b); SQLite has none (its two-argument MIN is not portable)
    ddl_types: tuple[tuple[str, str], ...] = ()  # column type names to rewrite in migrations
    # The database server's own wall clock in unix seconds: nodes' heartbeats are compared on one
    # clock, whatever the clocks of their hosts say.
    epoch_now: str = "(julianday('now') - 2440587.5) * 86400.0"
    # Row locks: what a SELECT adds to lock its rows without waiting (or to skip locked ones).
    # SQLite has one writer at a time, so a transaction already holds every row it reads.
    lock_nowait: str = ""
    skip_locked: str = ""
    notifies: bool = False  # whether the engine has LISTEN/NOTIFY (pg_notify)

    def render(self, sql: str) -> str:
        """The statement in the driver's parameter style (named `:name` in the source).

        In pyformat every literal `%` is doubled, inside string literals too: the driver scans the
        whole text for placeholders.
        """
        if self.paramstyle == "named":
            return sql
        return _rewrite(sql, name=lambda n: f"%({n})s", percent="%%")

    def least(self, a: str, b: str) -> str:
        """The smaller of two non-NULL expressions."""
        if self.has_least:
            return f"LEAST({a}, {b})"
        return f"(CASE WHEN {a} <= {b} THEN {a} ELSE {b} END)"

    def ddl(self, statement: str) -> str:
        """A migration statement with this engine's names for the column types.

        Type names match as whole upper-case words outside literals and comments (migrations
        spell types in upper case and names in lower case), so a column `blob` stays.
        """
        if not self.ddl_types:
            return statement
        types = dict(self.ddl_types)
        return _rewrite(statement, word=lambda w: types.get(w, w))


SQLITE = Dialect(name="sqlite", paramstyle="named", has_least=False)
# Ready for a PostgreSQL executor: REAL is a 4-byte float there (epoch seconds would lose their
# fraction), BLOB does not exist.
POSTGRESQL = Dialect(
    name="postgresql",
    paramstyle="pyformat",
    has_least=True,
    ddl_types=(("REAL", "DOUBLE PRECISION"), ("BLOB", "BYTEA")),
    epoch_now="EXTRACT(EPOCH FROM clock_timestamp())::DOUBLE PRECISION",
    lock_nowait=" FOR UPDATE NOWAIT",
    skip_locked=" FOR UPDATE SKIP LOCKED",
    notifies=True,
)


class Executor(Protocol):
    """Runs portable statements inside the caller's current transaction.

    Rows come back as plain dicts. A uniqueness violation raises
    :class:`~understudy._store._ports.ConflictError`; after any error the transaction is to be
    rolled back by the caller (PostgreSQL aborts it; SQLite code must not count on less).
    """

    @property
    def dialect(self) -> Dialect: ...

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every row the statement returns (a SELECT, or a write with RETURNING)."""
        ...

    def one(self, sql: str, params: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The first row, or None."""
        ...

    def run(self, sql: str, params: Mapping[str, Any] | None = None) -> int:
        """Run a write; returns the number of rows it changed."""
        ...
