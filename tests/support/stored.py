"""What a backend keeps, read back on either engine, for tests that look for a secret or a token.

    assert plaintext.encode() not in stored(backend.settings)

On SQLite that is every file of the data directory read raw (the database with its WAL and shared
memory, so a deleted row's leftover bytes count too); on PostgreSQL the data directory's files
(the master key, telemetry) and every row of the backend's schema rendered as text, read on a
connection of the engine's own URL (`bytea` columns render as `\\x` and hex).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from understudy._config import Settings


def database_rows(url: str) -> list[str]:
    """Every row of every table in the PostgreSQL schema `url` uses, as text (`bytea` in hex)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        ).fetchall()
        rows: list[str] = []
        for (table,) in tables:
            query = sql.SQL("SELECT t::text FROM {} AS t").format(sql.Identifier(table))
            rows += [f"{table} {row}" for (row,) in conn.execute(query).fetchall()]
        return rows


def stored(settings: Settings) -> bytes:
    """Everything the backend with these settings keeps, as a backup would copy it."""
    files = sorted(path for path in settings.data_dir.iterdir() if path.is_file())
    kept = b"".join(path.read_bytes() for path in files)
    if settings.database_url is not None:
        kept += "\n".join(database_rows(settings.database_url)).encode()
    return kept
