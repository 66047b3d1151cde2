"""The durable state of Synthetic Users: SQLite (WAL), migrated at open.

Tables: customers, api_keys (SHA-256 digests only), personas, runs (with the idempotency key and
request hash per customer), persona_sessions, turns (one row per turn) and reactions. Lifecycles
are in `_states.py`.

Exceptions (all `StoreError`):

    StoreError
    ├── NotFound (LookupError)
    │   ├── RunNotFound
    │   ├── SessionNotFound
    │   └── PersonaNotFound
    ├── IdempotencyConflict     the key was used before with another request
    ├── TurnConflict            a turn number recorded twice with different bodies
    ├── IllegalTransition (ValueError)   a state change the lifecycle does not allow
    └── BadCursor (ValueError)  a pagination cursor this store did not write

    SchemaTooNewError (RuntimeError)   the database is newer than this release
"""

from __future__ import annotations

from synthetic_users._store._db import Database
from synthetic_users._store._errors import (
    BadCursor,
    IdempotencyConflict,
    IllegalTransition,
    NotFound,
    PersonaNotFound,
    RunNotFound,
    SessionNotFound,
    StoreError,
    TurnConflict,
)
from synthetic_users._store._migrations import (
    MIGRATIONS,
    SCHEMA_VERSION,
    SchemaTooNewError,
    migrate,
    schema_version,
)
from synthetic_users._store._records import (
    NewRun,
    Page,
    PersonaRecord,
    ReactionRecord,
    ResumableRun,
    RunRecord,
    SessionProgress,
    SessionRecord,
    rfc3339,
)
from synthetic_users._store._states import (
    RunState,
    SessionState,
    run_transition,
    session_transition,
)
from synthetic_users._store._store import KEY_PREFIX, Store, key_digest

__all__ = [
    "KEY_PREFIX",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "BadCursor",
    "Database",
    "IdempotencyConflict",
    "IllegalTransition",
    "NewRun",
    "NotFound",
    "Page",
    "PersonaNotFound",
    "PersonaRecord",
    "ReactionRecord",
    "ResumableRun",
    "RunNotFound",
    "RunRecord",
    "RunState",
    "SchemaTooNewError",
    "SessionNotFound",
    "SessionProgress",
    "SessionRecord",
    "SessionState",
    "Store",
    "StoreError",
    "TurnConflict",
    "key_digest",
    "migrate",
    "rfc3339",
    "run_transition",
    "schema_version",
    "session_transition",
]
