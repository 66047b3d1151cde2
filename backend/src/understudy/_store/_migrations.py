"""Numbered, additive schema migrations.

Rules (see docs/operations.md): a migration is never edited or removed once released; new columns
and tables only; a binary refuses a database whose version is newer than the last migration it
knows, because it would not understand the data.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from understudy._store._db import Database
    from understudy._store._sql import Executor

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "control plane: keys, devices, sessions, tickets, quotas",
        """
        CREATE TABLE api_keys (
            digest TEXT PRIMARY KEY,
            key_id TEXT NOT NULL UNIQUE,
            tenant TEXT NOT NULL,
            actor TEXT NOT NULL,
            created_at REAL NOT NULL,
            revoked_at REAL
        );
        CREATE TABLE devices (
            tenant TEXT NOT NULL,
            device_id TEXT NOT NULL,
            credential_digest TEXT NOT NULL UNIQUE,
            enrolled_at REAL NOT NULL,
            revoked_at REAL,
            online INTEGER NOT NULL DEFAULT 0,
            last_seen_at REAL,
            last_assigned_at REAL NOT NULL DEFAULT 0,
            browser_epoch TEXT,
            connection_epoch INTEGER NOT NULL DEFAULT 0,
            protocol_versions TEXT NOT NULL DEFAULT '[]',
            capabilities TEXT NOT NULL DEFAULT '[]',
            local_policy TEXT,
            PRIMARY KEY (tenant, device_id)
        );
        CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            actor TEXT NOT NULL,
            mode TEXT NOT NULL,
            status TEXT NOT NULL,
            end_intent TEXT,
            device_id TEXT,
            lease_id TEXT,
            lease_epoch INTEGER NOT NULL DEFAULT 0,
            browser_epoch TEXT,
            tab_id INTEGER,
            allowed_origins TEXT NOT NULL,
            profile_hash TEXT,
            idempotency_key TEXT,
            fingerprint TEXT,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            idle_expires_at REAL NOT NULL,
            last_command_at REAL,
            command_count INTEGER NOT NULL DEFAULT 0,
            writes_blocked_reason TEXT,
            writes_blocked_command TEXT,
            provision_deadline REAL,
            grace_deadline REAL,
            capacity_held INTEGER NOT NULL DEFAULT 0,
            ended_at REAL,
            end_reason TEXT
        );
        CREATE UNIQUE INDEX sessions_idempotency ON sessions (tenant, idempotency_key)
            WHERE idempotency_key IS NOT NULL;
        CREATE INDEX sessions_by_device ON sessions (tenant, device_id) WHERE capacity_held = 1;
        CREATE INDEX sessions_live ON sessions (tenant, status);
        CREATE TABLE ticket_jtis (
            jti TEXT PRIMARY KEY,
            expires_at REAL NOT NULL
        );
        CREATE TABLE quota_counters (
            scope TEXT NOT NULL,
            subject TEXT NOT NULL,
            window_start INTEGER NOT NULL,
            count INTEGER NOT NULL,
            PRIMARY KEY (scope, subject, window_start)
        );
        """,
    ),
    (
        2,
        "command plane: command journal, dialogs, vault",
        """
        CREATE TABLE commands (
            session_id TEXT NOT NULL,
            command_id TEXT NOT NULL,
            tenant TEXT NOT NULL,
            actor TEXT NOT NULL,
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            dry_run INTEGER NOT NULL,
            fingerprint TEXT NOT NULL,
            request TEXT,
            state TEXT NOT NULL,
            attempt INTEGER NOT NULL DEFAULT 1,
            lease_epoch INTEGER NOT NULL,
            browser_epoch TEXT,
            admitted_at REAL NOT NULL,
            ready_deadline REAL,
            deadline REAL NOT NULL,
            result TEXT,
            error_code TEXT,
            error_message TEXT,
            completed_at REAL,
            PRIMARY KEY (session_id, command_id)
        );
        CREATE INDEX commands_open ON commands (session_id, state);
        CREATE TABLE dialogs (
            session_id TEXT NOT NULL,
            dialog_id TEXT NOT NULL,
            record TEXT,
            seen_at REAL NOT NULL,
            PRIMARY KEY (session_id, dialog_id)
        );
        CREATE TABLE vault_keys (
            tenant TEXT PRIMARY KEY,
            wrapped_key BLOB NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE TABLE vault_secrets (
            tenant TEXT NOT NULL,
            name TEXT NOT NULL,
            sealed BLOB NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (tenant, name)
        );
        """,
    ),
    (
        3,
        "blocked navigations and popups per session",
        """
        CREATE TABLE blocked_navigations (
            session_id TEXT NOT NULL,
            blocked_id TEXT NOT NULL,
            record TEXT,
            seen_at REAL NOT NULL,
            PRIMARY KEY (session_id, blocked_id)
        );
        """,
    ),
    (
        4,
        "operator close requests: `understudy sessions close` asks the service to close",
        """
        CREATE TABLE close_requests (
            session_id TEXT PRIMARY KEY,
            requested_at REAL NOT NULL,
            done_at REAL,
            outcome TEXT
        );
        """,
    ),
    (
        5,
        "operator API: operator tokens and the durable per-tenant unattended flag",
        """
        CREATE TABLE operator_tokens (
            digest TEXT PRIMARY KEY,
            token_id TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL,
            created_at REAL NOT NULL,
            revoked_at REAL
        );
        CREATE TABLE tenant_settings (
            tenant TEXT PRIMARY KEY,
            unattended_enabled INTEGER NOT NULL DEFAULT 0,
            updated_at REAL NOT NULL
        );
        """,
    ),
    (
        6,
        "insertion order for dialogs and blocked navigations, without relying on SQLite's rowid",
        """
        -- Ties on seen_at were broken by rowid, which PostgreSQL has no equivalent of; a
        -- per-session sequence number keeps "newest first" exact. Existing rows are numbered by
        -- (seen_at, id).
        ALTER TABLE dialogs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
        UPDATE dialogs SET seq = (
            SELECT COUNT(*) FROM dialogs AS earlier
             WHERE earlier.session_id = dialogs.session_id
               AND (earlier.seen_at < dialogs.seen_at
                    OR (earlier.seen_at = dialogs.seen_at
                        AND earlier.dialog_id <= dialogs.dialog_id))
        );
        ALTER TABLE blocked_navigations ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
        UPDATE blocked_navigations SET seq = (
            SELECT COUNT(*) FROM blocked_navigations AS earlier
             WHERE earlier.session_id = blocked_navigations.session_id
               AND (earlier.seen_at < blocked_navigations.seen_at
                    OR (earlier.seen_at = blocked_navigations.seen_at
                        AND earlier.blocked_id <= blocked_navigations.blocked_id))
        );
        """,
    ),
    (
        7,
        "nodes: actor rows (turn lock, socket authority, timer), the outbox, the node registry",
        """
        CREATE TABLE actors (
            actor_key TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            tenant TEXT NOT NULL DEFAULT '',
            ident TEXT NOT NULL DEFAULT '',
            due_at REAL,
            sock_node TEXT,
            sock_serial INTEGER NOT NULL DEFAULT 0,
            browser_epoch TEXT,
            lease_epoch INTEGER,
            hello TEXT,
            hello_serial INTEGER NOT NULL DEFAULT 0,
            outbox_seq INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX actors_due ON actors (due_at);
        CREATE INDEX actors_sock_node ON actors (sock_node);
        CREATE TABLE outbox (
            actor_key TEXT NOT NULL,
            seq INTEGER NOT NULL,
            node_id TEXT NOT NULL,
            serial INTEGER NOT NULL,
            frames TEXT NOT NULL,
            close_code INTEGER,
            close_reason TEXT,
            created_at REAL NOT NULL,
            PRIMARY KEY (actor_key, seq)
        );
        CREATE INDEX outbox_node ON outbox (node_id, actor_key, seq);
        CREATE TABLE nodes (
            node_id TEXT PRIMARY KEY,
            started_at REAL NOT NULL,
            heartbeat_at REAL NOT NULL,
            stopped_at REAL
        );
        """,
    ),
)

LATEST = MIGRATIONS[-1][0]


class SchemaTooNewError(RuntimeError):
    """The database was migrated by a newer binary."""


class MigrationSyntaxError(ValueError):
    """A migration's text does not end where it should (an unclosed string, comment or block)."""


# One token each: a quoted string or identifier, a comment, a dollar-quoted body, a word, or any
# other single character. Statement ends (`;`) are only ever looked for among the last kind.
_TOKEN = re.compile(
    r"""
      (?P<quoted>'(?:[^']|'')*'|"(?:[^"]|"")*"|`[^`]*`|\[[^\]]*\])
    | (?P<line_comment>--[^\n]*)
    | (?P<block_comment>/\*.*?\*/)
    | (?P<dollar>\$(?P<tag>[A-Za-z_][A-Za-z0-9_]*)?\$.*?\$(?P=tag)\$)
    | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_OPENERS = frozenset({"'", '"', "`", "["})
_DOLLAR_OPEN = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")


def split_statements(script: str) -> list[str]:
    """Split a migration script into statements at each top-level `;`.

    A `;` inside a string literal, a quoted identifier, a comment, a dollar-quoted body
    (PostgreSQL) or a trigger's `BEGIN … END` body does not end a statement; `CASE … END` inside
    a trigger body is counted so that its `END` does not close the body. Comments stay in the
    statement text (both engines accept them); statements that hold only comments are dropped.

    Raises:
        MigrationSyntaxError: a string, comment or trigger body is still open at the end.
    """
    statements: list[str] = []
    start = 0
    depth = 0  # open BEGIN/CASE blocks inside a CREATE TRIGGER
    words: list[str] = []  # the statement's leading words, to recognise CREATE [TEMP] TRIGGER
    meaningful = False
    pos = 0
    while pos < len(script):
        match = _TOKEN.match(script, pos)
        assert match is not None  # noqa: S101 - `other` matches any character
        pos = match.end()
        kind = match.lastgroup
        if kind == "other":
            char = match.group()
            if (
                char in _OPENERS
                or script.startswith("/*", match.start())
                or _DOLLAR_OPEN.match(script, match.start())
            ):
                raise MigrationSyntaxError(
                    f"unterminated quote or comment at offset {match.start()}: "
                    f"{script[match.start() : match.start() + 40]!r}"
                )
            if char == ";" and depth == 0:
                if meaningful:
                    statements.append(script[start : match.start()].strip())
                start, words, meaningful = pos, [], False
                continue
            if not char.isspace():
                meaningful = True
        elif kind == "word":
            meaningful = True
            word = match.group().upper()
            if len(words) < 4:
                words.append(word)
            if _is_trigger(words):
                if word in ("BEGIN", "CASE"):
                    depth += 1
                elif word == "END" and depth:
                    depth -= 1
        elif kind in ("quoted", "dollar"):
            meaningful = True
    if depth:
        raise MigrationSyntaxError("a trigger body is not closed by END")
    if meaningful:
        statements.append(script[start:].strip())
    return statements


def _is_trigger(words: list[str]) -> bool:
    return words[:1] == ["CREATE"] and "TRIGGER" in words[1:4]


_VERSIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
    "description TEXT NOT NULL, applied_at REAL NOT NULL)"
)


def version_on(sql: Executor) -> int:
    """The schema version of the database `sql` runs on (0 when never migrated).

    Creates the (empty) versions table when it is missing, so run it in a transaction where two
    processes may start at once (PostgreSQL serialises them with a lock first).
    """
    sql.run(sql.dialect.ddl(_VERSIONS_TABLE))
    row = sql.one("SELECT MAX(version) AS v FROM schema_migrations")
    return int(row["v"]) if row is not None and row["v"] is not None else 0


def refuse_newer(version: int, where: str) -> int:
    """`version`, unless it is newer than :data:`LATEST`.

    Raises:
        SchemaTooNewError: the database was migrated by a newer binary.
    """
    if version > LATEST:
        raise SchemaTooNewError(
            f"the database at {where} is at schema version {version}, but this binary knows "
            f"only up to {LATEST}; run a newer Understudy (never downgrade past a migration)"
        )
    return version


def apply(
    sql: Executor,
    transaction: Callable[[], AbstractContextManager[object]],
    now: float,
    *,
    where: str,
) -> list[int]:
    """Apply every pending migration on any engine; the versions applied.

    Each migration runs in one `transaction()` (an engine that wraps the whole run in an outer
    transaction, as PostgreSQL does, makes them one). Each statement passes through the
    executor's `dialect.ddl` first, so an engine maps the column types of released migrations
    (which are never edited) to its own.
    """
    version = refuse_newer(version_on(sql), where)
    applied = []
    for number, description, script in MIGRATIONS:
        if number <= version:
            continue
        with transaction():
            for statement in split_statements(script):
                sql.run(sql.dialect.ddl(statement))
            sql.run(
                "INSERT INTO schema_migrations (version, description, applied_at) "
                "VALUES (:version, :description, :now)",
                {"version": number, "description": description, "now": now},
            )
        applied.append(number)
    return applied


# The `Database` spellings, used by the service, the CLI and tests: each engine's storage decides
# how (PostgreSQL migrates in one transaction under a lock).


def current_version(db: Database) -> int:
    return db.storage.schema_version()


def check_supported(db: Database) -> int:
    """Return the schema version, refusing a database migrated by a newer binary.

    Raises:
        SchemaTooNewError: the version is newer than :data:`LATEST`.
    """
    return db.storage.check_supported()


def migrate(db: Database, now: float) -> list[int]:
    """Apply every pending migration, each in one transaction; returns the versions applied."""
    return db.storage.migrate(now)
