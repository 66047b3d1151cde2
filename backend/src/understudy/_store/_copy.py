"""Copy an installation's SQLite database into an empty PostgreSQL database, in one transaction.

`copy_sqlite_to_postgres` is what `understudy copy-database` runs once the service is stopped:

1. The SQLite file is opened read-only and read in **one read transaction**: every table comes
   from the same snapshot, even if a CLI command writes meanwhile; the file is never written.
2. Its schema version must be this binary's (`LATEST`): an older one is migrated first with
   `understudy migrate`, a newer one is copied by the binary that made it.
3. The target is checked (no rows, no live node, not migrated by a newer binary) and migrated with
   the service's own migrations (`PostgresStorage.migrate`), so it has exactly this schema.
4. In **one PostgreSQL transaction**: the migration lock nodes take at start-up, a lock on every
   table against other writers, the emptiness check again, then every table in `COPIED_TABLES`
   order through `COPY`, values converted to the target's column types, identity sequences
   moved past the copied ids, and the row counts checked. Any failure rolls all of it back: the
   target stays migrated and empty, so the copy can simply run again.
5. After the commit the rows are counted again on a new connection, against the snapshot's
   counts (`CopyReport.tables`).

Errors:

    CopyError                   nothing was kept on the target
     ├── SchemaMismatchError    the source is not at this binary's schema, or the target is newer
     ├── TargetNotEmptyError    a table of the target holds rows (its name is in the message)
     │    └── TargetInUseError  a node serves the target, or a session keeps its tables locked
     └── CopyFailedError        a value PostgreSQL cannot hold, or a statement PostgreSQL refused
"""

# ruff: noqa: S608 - table and column names put into statements are this module's constants or
# the target's own catalogue (and quoted); every value travels as a COPY row or a parameter.
from __future__ import annotations

import math
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg import sql as pgsql

from understudy._store._errors import StorageUnavailableError
from understudy._store._migrations import LATEST, SchemaTooNewError
from understudy._store._postgres import (
    _MIGRATION_LOCK,
    NODE_DEAD_AFTER_S,
    PostgresStorage,
    redacted,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

# Every table of the data, parents before children. The schema declares no foreign keys (every
# reference is by value: a command names its session, a secret its tenant's data key), so any
# order would load; this one is the order a reader expects, and `_check_order` refuses to copy
# if a later migration adds a foreign key that this order would violate.
COPIED_TABLES: Final = (
    "api_keys",
    "operator_tokens",
    "tenant_settings",
    "devices",
    "vault_keys",
    "vault_secrets",
    "sessions",
    "commands",
    "dialogs",
    "blocked_navigations",
    "close_requests",
    "quota_counters",
    "ticket_jtis",
)
# Per-node state on PostgreSQL (migration 7): which node holds an actor's socket and its timer
# (`actors`), frames waiting for another node's socket (`outbox`), the nodes and their heartbeats
# (`nodes`). None of it outlives the process that wrote it: a copied row would name a node that
# never ran on the target. SQLite creates the tables but never fills them. The nodes fill them
# themselves: an actor's row is made by its first turn, and its timer re-armed at start-up from
# the data (sessions, commands), exactly as a restarted SQLite service re-arms its timers.
NODE_TABLES: Final = ("actors", "outbox", "nodes")
VERSIONS_TABLE: Final = "schema_migrations"  # the target's own: its migrations wrote it
BATCH_ROWS: Final = 1000
LOCK_WAIT: Final = "5s"  # for the migration lock and the table locks; a wait past it is refused
INT4: Final = (-(2**31), 2**31 - 1)  # PostgreSQL's INTEGER; SQLite's INTEGER is 64-bit
INT8: Final = (-(2**63), 2**63 - 1)


class CopyError(RuntimeError):
    """The copy did not happen; nothing of it was kept on the target."""


class SchemaMismatchError(CopyError):
    """The source is not at this binary's schema version, or the target is at a newer one."""


class TargetNotEmptyError(CopyError):
    """The target already holds data: the copy never merges into a live database."""


class TargetInUseError(TargetNotEmptyError):
    """A node serves the target, or another session keeps its tables locked."""


class CopyFailedError(CopyError):
    """A value the target cannot hold, or a statement PostgreSQL refused; rolled back."""


@dataclass(frozen=True)
class TableCount:
    """One table's rows in the source snapshot and on the target after the commit."""

    table: str
    source: int
    target: int

    @property
    def ok(self) -> bool:
        return self.source == self.target


@dataclass(frozen=True)
class CopyReport:
    """What was copied, and how the counts compared once it was committed."""

    source: str
    target: str  # the URL with its password masked
    schema_version: int
    tables: tuple[TableCount, ...]
    seconds: float
    # Rows the source held in the per-node tables (none, on a database only SQLite ever served).
    not_copied: tuple[TableCount, ...] = ()

    @property
    def verified(self) -> bool:
        return all(count.ok for count in self.tables)


def copy_sqlite_to_postgres(source: Path, target_url: str, *, now: float) -> CopyReport:
    """Copy the SQLite database at `source` into the empty PostgreSQL database at `target_url`.

    The caller makes sure no service writes the source meanwhile (the data directory's lock).

    Raises:
        SchemaMismatchError: the source is not at schema version `LATEST`, or the target is newer.
        TargetNotEmptyError: a table of the target holds rows (`TargetInUseError`: a node serves
            it, or its tables stay locked).
        CopyFailedError: a row could not be copied; the target was rolled back.
        StorageUnavailableError: PostgreSQL cannot be reached.
    """
    started = time.monotonic()
    where = redacted(target_url)
    with _snapshot(source) as reader:
        version = _source_version(reader, source)
        _prepare_target(target_url, where, now)
        counts = {table: _count_sqlite(reader, table) for table in COPIED_TABLES}
        not_copied = tuple(
            TableCount(table, n, 0)
            for table in NODE_TABLES
            if (n := _count_sqlite(reader, table)) > 0
        )
        with psycopg.connect(target_url, connect_timeout=10) as conn:
            _copy_in_one_transaction(conn, reader, counts, where)
    with psycopg.connect(target_url, connect_timeout=10, autocommit=True) as conn:
        tables = tuple(
            TableCount(table, counts[table], _count_pg(conn, table)) for table in COPIED_TABLES
        )
    return CopyReport(
        source=str(source),
        target=where,
        schema_version=version,
        tables=tables,
        seconds=time.monotonic() - started,
        not_copied=not_copied,
    )


# -- the source ------------------------------------------------------------------------------------


@contextmanager
def _snapshot(path: Path) -> Iterator[sqlite3.Connection]:
    """The SQLite file read-only, inside one read transaction.

    `mode=ro` never writes the database, nor checkpoints its WAL (a reader may still create the
    empty `-wal` and `-shm` files connections share). In WAL mode a read transaction sees the
    database as of its first read until it ends, whatever other connections commit meanwhile.
    """
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("BEGIN")  # deferred: the snapshot starts with the first read
        yield conn
    finally:
        conn.close()  # ends the read transaction; there is nothing to commit


def _source_version(reader: sqlite3.Connection, path: Path) -> int:
    names = {
        row[0]
        for row in reader.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    version = 0
    if VERSIONS_TABLE in names:
        row = reader.execute(f"SELECT MAX(version) FROM {VERSIONS_TABLE}").fetchone()
        version = int(row[0]) if row is not None and row[0] is not None else 0
    if version < LATEST:
        raise SchemaMismatchError(
            f"the SQLite database at {path} is at schema version {version}, this binary's is "
            f"{LATEST}: run `understudy migrate` with this binary first (the service stopped), "
            "then copy"
        )
    if version > LATEST:
        raise SchemaMismatchError(
            f"the SQLite database at {path} is at schema version {version}, but this binary "
            f"knows only up to {LATEST}: copy it with the newer Understudy that migrated it"
        )
    missing = [t for t in (*COPIED_TABLES, *NODE_TABLES) if t not in names]
    if missing:  # a version row without its tables: not a database this binary made
        raise SchemaMismatchError(
            f"the SQLite database at {path} says schema version {version} but has no table "
            f"{', '.join(missing)}; restore it from a backup"
        )
    # A table no migration of this binary makes would be left behind without a word.
    unknown = sorted(names - {*COPIED_TABLES, *NODE_TABLES, VERSIONS_TABLE})
    if unknown:
        raise SchemaMismatchError(
            f"the SQLite database at {path} has table(s) {', '.join(unknown)} that no migration "
            f"of this binary makes; nothing was copied (drop them if they are not Understudy's)"
        )
    return version


def _count_sqlite(reader: sqlite3.Connection, table: str) -> int:
    row = reader.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()
    return int(row[0])


def _sqlite_columns(reader: sqlite3.Connection, table: str) -> tuple[list[str], list[str]]:
    """The table's columns in order, and its primary key's (the order rows are read in)."""
    info = reader.execute(f'PRAGMA table_info("{table}")').fetchall()
    columns = [row[1] for row in info]
    key = [row[1] for row in sorted((r for r in info if r[5]), key=lambda r: r[5])]
    return columns, key or columns


def _rows(
    reader: sqlite3.Connection, table: str, columns: list[str], key: list[str]
) -> Iterator[tuple[Any, ...]]:
    names = ", ".join(f'"{c}"' for c in columns)
    order = ", ".join(f'"{c}"' for c in key)
    cursor = reader.execute(f'SELECT {names} FROM "{table}" ORDER BY {order}')
    while batch := cursor.fetchmany(BATCH_ROWS):
        yield from batch


# -- the target ------------------------------------------------------------------------------------


def _prepare_target(url: str, where: str, now: float) -> None:
    """Refuse a target that is newer, served or holds data; then migrate it to this schema.

    The checks come before the migration so that a database in use is never touched.
    """
    try:
        first = psycopg.connect(url, connect_timeout=10, autocommit=True)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StorageUnavailableError(
            f"cannot connect to PostgreSQL at {where}: {reason}"
        ) from None
    with first as conn:
        present = _pg_tables(conn)
        _refuse_occupied(conn, present & {*COPIED_TABLES, "actors", "outbox"}, where)
        if "nodes" in present:
            _refuse_live_nodes(conn, where)
    storage = PostgresStorage(url, max_size=1)
    try:
        storage.check_supported()
        storage.migrate(now)
    except SchemaTooNewError as exc:
        raise SchemaMismatchError(f"{exc}; copy with that newer binary instead") from None
    finally:
        storage.close()


def _copy_in_one_transaction(
    conn: psycopg.Connection[Any],
    reader: sqlite3.Connection,
    counts: dict[str, int],
    where: str,
) -> None:
    """Lock, check, copy every table and check its count, then commit; or keep nothing."""
    with conn.transaction():
        conn.execute(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
        try:
            # Nodes starting meanwhile wait at their migration, then find the copied data.
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))", (_MIGRATION_LOCK,)
            )
            locked = pgsql.SQL(", ").join(
                pgsql.Identifier(t) for t in (*COPIED_TABLES, "actors", "outbox")
            )
            # EXCLUSIVE: others may still read, nobody writes until the commit.
            conn.execute(pgsql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(locked))
        except psycopg.errors.LockNotAvailable:
            raise TargetInUseError(
                f"the PostgreSQL database at {where} is in use: another session holds its "
                f"tables (waited {LOCK_WAIT}); stop the nodes and other clients using it"
            ) from None
        # Tables of something else in the same schema are not ours to check or copy.
        missing = {*COPIED_TABLES, *NODE_TABLES, VERSIONS_TABLE} - _pg_tables(conn)
        if missing:
            raise CopyFailedError(
                f"the migrated target has no table {', '.join(sorted(missing))}; this is a bug "
                "in this Understudy build, please report it"
            )
        _check_order(conn)
        _refuse_occupied(conn, {*COPIED_TABLES, "actors", "outbox"}, where)
        _refuse_live_nodes(conn, where)
        for table in COPIED_TABLES:
            copied = _copy_table(conn, reader, table)
            if copied != counts[table]:
                raise CopyFailedError(
                    f"table {table}: read {copied} rows from the snapshot that counted "
                    f"{counts[table]}; nothing was kept"
                )
        reset_sequences(conn, COPIED_TABLES)
        for table in COPIED_TABLES:
            if (found := _count_pg(conn, table)) != counts[table]:
                raise CopyFailedError(
                    f"table {table}: {found} rows on the target before the commit, "
                    f"{counts[table]} in the source; nothing was kept"
                )


def _copy_table(conn: psycopg.Connection[Any], reader: sqlite3.Connection, table: str) -> int:
    columns, key = _sqlite_columns(reader, table)
    types = _pg_column_types(conn, table)
    if set(columns) != set(types):
        raise CopyFailedError(
            f"table {table}: the source's columns ({', '.join(columns)}) are not the target's "
            f"({', '.join(types)}) at the same schema version; restore the source from a backup"
        )
    converters = [_converter(types[c]) for c in columns]
    statement = pgsql.SQL("COPY {} ({}) FROM STDIN").format(
        pgsql.Identifier(table), pgsql.SQL(", ").join(map(pgsql.Identifier, columns))
    )
    copied = 0
    try:
        with conn.cursor() as cursor, cursor.copy(statement) as copy:
            for row in _rows(reader, table, columns, key):
                converted = []
                for column, convert, value in zip(columns, converters, row, strict=True):
                    try:
                        converted.append(convert(value))
                    except _BadValue as exc:
                        position = ", ".join(f"{k}={row[columns.index(k)]!r}" for k in key)
                        raise CopyFailedError(
                            f"table {table}, row {position}, column {column}: {exc}; nothing "
                            "was kept on the target"
                        ) from None
                copy.write_row(converted)
                copied += 1
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CopyFailedError(
            f"table {table}: PostgreSQL refused the copy ({reason}); nothing was kept on the target"
        ) from None
    return copied


def reset_sequences(conn: psycopg.Connection[Any], tables: tuple[str, ...]) -> None:
    """Move every identity or serial sequence of `tables` past the largest copied value.

    `COPY` writes the ids as they were and leaves the sequences where they were, so the next
    generated id would collide with a copied one. Today's schema generates no id (they are
    random, or numbered by their aggregate), so this finds nothing; it keeps a later migration
    with an identity column correct.
    """
    found = conn.execute(
        "SELECT table_name, column_name, "
        "pg_get_serial_sequence(quote_ident(table_name), column_name) AS seq "
        "FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = ANY(%s) AND (is_identity = 'YES' OR column_default LIKE 'nextval(%%')",
        (list(tables),),
    ).fetchall()
    for table, column, sequence in found:
        if sequence is None:
            continue
        largest = conn.execute(
            pgsql.SQL("SELECT MAX({}) FROM {}").format(
                pgsql.Identifier(column), pgsql.Identifier(table)
            )
        ).fetchone()
        if largest is not None and largest[0] is not None:
            conn.execute("SELECT setval(%s, %s, true)", (sequence, largest[0]))


def _pg_tables(conn: psycopg.Connection[Any]) -> set[str]:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
    ).fetchall()
    return {row[0] for row in rows}


def _pg_column_types(conn: psycopg.Connection[Any], table: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return {row[0]: row[1] for row in rows}


def _count_pg(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(pgsql.SQL("SELECT COUNT(*) FROM {}").format(pgsql.Identifier(table)))
    found = row.fetchone()
    return int(found[0]) if found is not None else 0


def _refuse_occupied(conn: psycopg.Connection[Any], tables: set[str], where: str) -> None:
    for table in [t for t in (*COPIED_TABLES, *NODE_TABLES) if t in tables]:
        if (rows := _count_pg(conn, table)) > 0:
            raise TargetNotEmptyError(
                f"the PostgreSQL database at {where} is not empty: table {table} holds {rows} "
                "row(s); copy only into a new, empty database (createdb, or a new schema), "
                "never into one in use"
            )


def _refuse_live_nodes(conn: psycopg.Connection[Any], where: str) -> None:
    rows = conn.execute(
        "SELECT node_id FROM nodes WHERE stopped_at IS NULL AND heartbeat_at >= "
        "EXTRACT(EPOCH FROM clock_timestamp())::DOUBLE PRECISION - %s ORDER BY node_id",
        (NODE_DEAD_AFTER_S,),
    ).fetchall()
    if rows:
        names = ", ".join(row[0] for row in rows)
        raise TargetInUseError(
            f"the PostgreSQL database at {where} is served by running nodes ({names}); stop "
            "them, and copy only into a new, empty database"
        )


def _check_order(conn: psycopg.Connection[Any]) -> None:
    """Refuse an order in which a table would be loaded before a table it references."""
    rank = {table: n for n, table in enumerate(COPIED_TABLES)}
    rows = conn.execute(
        "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint AS c "
        "JOIN pg_namespace AS n ON n.oid = c.connamespace "
        "WHERE c.contype = 'f' AND n.nspname = current_schema()"
    ).fetchall()
    for child, parent in rows:
        child, parent = child.strip('"'), parent.strip('"')
        if child in rank and parent in rank and rank[parent] > rank[child]:
            raise CopyFailedError(
                f"table {child} references {parent}, which this copy loads later; this is a bug "
                "in this Understudy build, please report it"
            )


# -- values ----------------------------------------------------------------------------------------


class _BadValue(ValueError):
    """A source value the target column cannot hold."""


def _converter(data_type: str) -> Callable[[Any], Any]:
    """The conversion of a SQLite value to the target column's type (`information_schema`).

    The migrations are shared, with `Dialect.ddl` renaming two types: REAL is DOUBLE PRECISION
    (epoch-second timestamps keep their fraction) and BLOB is BYTEA (sealed vault keys and
    secrets, copied as stored: ciphertext). Flags are INTEGER 0/1 on both engines, and JSON is
    TEXT on both, so neither changes. SQLite's columns accept any value, though, and its INTEGER
    is 64-bit where PostgreSQL's is 32: each value is checked rather than left to fail as a
    server error without its row.
    """
    if data_type == "double precision":
        return _real
    if data_type == "integer":
        return lambda value: _integer(value, INT4)
    if data_type == "bigint":
        return lambda value: _integer(value, INT8)
    if data_type == "bytea":
        return _blob
    if data_type == "text":
        return _text
    raise CopyFailedError(f"no conversion to the target's column type {data_type!r}")


def _real(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        if math.isfinite(number):
            return number
        raise _BadValue(f"{value!r} is not a finite number")
    raise _BadValue(f"a {type(value).__name__} where a number belongs")


def _integer(value: Any, bounds: tuple[int, int]) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise _BadValue(f"a {type(value).__name__} where an integer belongs")
    if not bounds[0] <= value <= bounds[1]:
        raise _BadValue(
            f"{value} is outside PostgreSQL's {'INTEGER' if bounds == INT4 else 'BIGINT'} range "
            f"({bounds[0]} to {bounds[1]})"
        )
    return int(value)


def _blob(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    raise _BadValue(f"a {type(value).__name__} where bytes belong")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _BadValue(f"a {type(value).__name__} where text belongs")
    if "\x00" in value:
        raise _BadValue("text with a NUL character, which PostgreSQL's text cannot hold")
    return value
