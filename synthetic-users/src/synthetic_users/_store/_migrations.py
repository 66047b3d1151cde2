"""Numbered, additive schema migrations of the Synthetic Users database.

Rules: a migration is never edited or removed once released; new columns and tables only; the
service refuses a database whose version is newer than the last migration it knows, because it
would not understand the data. `PRAGMA user_version` holds the version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from synthetic_users._store._db import Database

MIGRATIONS: Final[tuple[tuple[int, str, str], ...]] = (
    (
        1,
        "customers, API keys, personas, runs, persona sessions, turns, reactions",
        """
        CREATE TABLE customers (
            customer_id TEXT PRIMARY KEY,
            created_at REAL NOT NULL
        );
        CREATE TABLE api_keys (
            digest TEXT PRIMARY KEY,
            key_id TEXT NOT NULL UNIQUE,
            customer_id TEXT NOT NULL REFERENCES customers (customer_id),
            created_at REAL NOT NULL,
            revoked_at REAL
        );
        CREATE TABLE personas (
            persona_id TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL REFERENCES customers (customer_id),
            body TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX personas_newest ON personas (customer_id, created_at DESC, persona_id DESC);
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL REFERENCES customers (customer_id),
            status TEXT NOT NULL,
            target_url TEXT NOT NULL,
            task TEXT NOT NULL,
            turn_budget INTEGER NOT NULL,
            model TEXT NOT NULL,
            credential_id TEXT,
            idempotency_key TEXT,
            request_hash TEXT NOT NULL,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            failure_reason TEXT,
            created_at REAL NOT NULL,
            started_at REAL,
            ended_at REAL
        );
        CREATE UNIQUE INDEX runs_idempotency ON runs (customer_id, idempotency_key)
            WHERE idempotency_key IS NOT NULL;
        CREATE INDEX runs_newest ON runs (customer_id, created_at DESC, run_id DESC);
        CREATE INDEX runs_live ON runs (status) WHERE status IN ('queued', 'running');
        CREATE TABLE persona_sessions (
            session_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs (run_id),
            position INTEGER NOT NULL,
            persona TEXT NOT NULL,
            status TEXT NOT NULL,
            generation INTEGER NOT NULL DEFAULT 1,
            turn INTEGER NOT NULL DEFAULT 0,
            understudy_session_id TEXT,
            device_id TEXT,
            failure_reason TEXT,
            started_at REAL,
            ended_at REAL,
            UNIQUE (run_id, position)
        );
        CREATE TABLE turns (
            session_id TEXT NOT NULL REFERENCES persona_sessions (session_id),
            turn INTEGER NOT NULL,
            generation INTEGER NOT NULL,
            body TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (session_id, turn)
        );
        CREATE TABLE reactions (
            reaction_id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES persona_sessions (session_id),
            run_id TEXT NOT NULL REFERENCES runs (run_id),
            generation INTEGER NOT NULL,
            step INTEGER NOT NULL,
            sentiment TEXT NOT NULL,
            note TEXT NOT NULL,
            url TEXT NOT NULL,
            ref TEXT,
            screenshot TEXT,
            created_at REAL NOT NULL
        );
        -- A reaction recorded live and again inside its turn is one reaction.
        CREATE UNIQUE INDEX reactions_once
            ON reactions (session_id, generation, step, sentiment, note);
        CREATE INDEX reactions_by_run ON reactions (run_id, reaction_id);
        """,
    ),
    (
        2,
        "reactions name their kind and the element they are about",
        """
        ALTER TABLE reactions ADD COLUMN kind TEXT;
        ALTER TABLE reactions ADD COLUMN element TEXT;
        """,
    ),
    (
        3,
        "dashboard sign-ins (the dashboard's server-side sessions)",
        """
        -- One row per signed-in browser. The cookie carries a random id; only its SHA-256 digest
        -- is stored, like API keys. key_digest is the API key signed in with, so revoking the key
        -- ends its dashboard sessions too.
        CREATE TABLE dashboard_sessions (
            digest TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL REFERENCES customers (customer_id),
            key_digest TEXT NOT NULL REFERENCES api_keys (digest),
            csrf_token TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL
        );
        CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);
        """,
    ),
    # -- webhooks and usage (issue 17, items 3 and 4) --------------------------------------
    (
        4,
        "webhooks with their outbox, deliveries and attempts; usage events and Stripe postings",
        """
        CREATE TABLE webhooks (
            webhook_id TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL REFERENCES customers (customer_id),
            url TEXT NOT NULL,
            events TEXT NOT NULL,
            secret TEXT NOT NULL,
            status TEXT NOT NULL,
            disabled_reason TEXT,
            created_at REAL NOT NULL,
            deleted_at REAL
        );
        CREATE INDEX webhooks_newest ON webhooks (customer_id, created_at DESC, webhook_id DESC);
        -- The outbox: one event per (type, subject), written with the state change it reports.
        CREATE TABLE webhook_events (
            event_id TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL REFERENCES customers (customer_id),
            type TEXT NOT NULL,
            subject_id TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE (type, subject_id)
        );
        CREATE TABLE webhook_deliveries (
            delivery_id TEXT PRIMARY KEY,
            event_id TEXT NOT NULL REFERENCES webhook_events (event_id),
            webhook_id TEXT NOT NULL REFERENCES webhooks (webhook_id),
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL,
            created_at REAL NOT NULL,
            ended_at REAL,
            UNIQUE (event_id, webhook_id)
        );
        CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
            WHERE status = 'pending';
        CREATE INDEX webhook_deliveries_newest
            ON webhook_deliveries (webhook_id, created_at DESC, delivery_id DESC);
        CREATE TABLE webhook_attempts (
            delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (delivery_id),
            attempt INTEGER NOT NULL,
            attempted_at REAL NOT NULL,
            status_code INTEGER,
            error TEXT,
            duration_ms REAL NOT NULL,
            next_retry_at REAL,
            PRIMARY KEY (delivery_id, attempt)
        );
        CREATE TABLE usage_events (
            usage_id TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL REFERENCES customers (customer_id),
            run_id TEXT NOT NULL REFERENCES runs (run_id),
            session_id TEXT NOT NULL UNIQUE REFERENCES persona_sessions (session_id),
            browser_seconds REAL NOT NULL,
            turns INTEGER NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX usage_newest ON usage_events (customer_id, created_at DESC, usage_id DESC);
        CREATE TABLE billing_customers (
            customer_id TEXT PRIMARY KEY REFERENCES customers (customer_id),
            stripe_customer_id TEXT NOT NULL,
            updated_at REAL NOT NULL
        );
        -- One Stripe meter event per (usage event, meter): the durable "posted" flag.
        CREATE TABLE stripe_meter_events (
            identifier TEXT PRIMARY KEY,
            usage_id TEXT NOT NULL REFERENCES usage_events (usage_id),
            event_name TEXT NOT NULL,
            value INTEGER NOT NULL,
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL,
            last_error TEXT,
            posted_at REAL,
            UNIQUE (usage_id, event_name)
        );
        CREATE INDEX stripe_meter_events_due ON stripe_meter_events (next_attempt_at)
            WHERE status = 'pending';
        """,
    ),
    # -- inbox per session (issue 17 item 2) --------------------------------------------------
    (
        5,
        "each persona session's inbox address, and the mail it received",
        """
        ALTER TABLE persona_sessions ADD COLUMN inbox_address TEXT;
        CREATE UNIQUE INDEX persona_sessions_inbox ON persona_sessions (inbox_address)
            WHERE inbox_address IS NOT NULL;
        CREATE TABLE inbox_messages (
            message_id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES persona_sessions (session_id),
            received_at REAL NOT NULL,
            mail_from TEXT NOT NULL,
            subject TEXT NOT NULL,
            body TEXT NOT NULL,
            links TEXT NOT NULL,
            size INTEGER NOT NULL
        );
        CREATE INDEX inbox_messages_by_session ON inbox_messages (session_id, message_id);
        """,
    ),
    # -- retention (issue 17 item 5) ------------------------------------------------------------
    (
        6,
        "retention: per-customer settings, tombstones of expired runs",
        """
        CREATE TABLE customer_settings (
            customer_id TEXT PRIMARY KEY REFERENCES customers (customer_id),
            retention_days INTEGER,
            updated_at REAL NOT NULL
        );
        CREATE TABLE expired_runs (
            run_id TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL,
            ended_at REAL,
            expired_at REAL NOT NULL
        );
        CREATE INDEX runs_ended ON runs (ended_at)
            WHERE status IN ('completed', 'failed', 'cancelled');
        """,
    ),
    # -- credentials for the target site (issue 17, item 5) ------------------------------------
    (
        7,
        "credentials for the target site, sealed under per-customer data keys",
        """
        -- A customer's data key, wrapped (AES-256-GCM) by the service's master key.
        CREATE TABLE customer_keys (
            customer_id TEXT PRIMARY KEY REFERENCES customers (customer_id),
            wrapped_key BLOB NOT NULL,
            created_at REAL NOT NULL
        );
        -- The password is only ever here sealed with the customer's data key.
        CREATE TABLE credentials (
            credential_id TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL REFERENCES customers (customer_id),
            name TEXT NOT NULL,
            username TEXT NOT NULL,
            origin TEXT,
            sealed_password BLOB NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX credentials_newest
            ON credentials (customer_id, created_at DESC, credential_id DESC);
        """,
    ),
)
SCHEMA_VERSION: Final = MIGRATIONS[-1][0]


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer release; this one would not understand it."""


def schema_version(db: Database) -> int:
    row = db.one("PRAGMA user_version")
    return int(row[0]) if row else 0


def migrate(db: Database) -> list[int]:
    """Apply every migration the database lacks, each in its own transaction; the ones applied.

    Raises:
        SchemaTooNewError: the database is newer than this release.
    """
    current = schema_version(db)
    if current > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"the database is at schema version {current}, newer than this release knows "
            f"({SCHEMA_VERSION}); upgrade synthetic-users"
        )
    applied = []
    for version, _title, sql in MIGRATIONS:
        if version <= current:
            continue
        with db.transaction() as conn:
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {int(version)}")
        applied.append(version)
    return applied


def _statements(sql: str) -> list[str]:
    # executescript() would COMMIT the open transaction first; split instead (no ';' in strings).
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
