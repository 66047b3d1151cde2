"""A migrated database per test, and rows built with every required column."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

from understudy._store import Database, migrate
from understudy._store.sessions import NewSession

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "store.db", group_commit=False)
    migrate(database, now=0.0)
    yield database
    database.close()


def add_session(db: Database, **values: Any) -> str:
    """Insert a session row (connected, unattended, created at 0 s) and return its id."""
    row: dict[str, Any] = {
        "session_id": str(uuid.uuid4()),
        "tenant": "acme",
        "actor": "agent",
        "mode": "unattended",
        "status": "connected",
        "allowed_origins": ["https://a.example"],
        "created_at": 0.0,
        "expires_at": 86_400.0,
        "idle_expires_at": 7_200.0,
        **values,
    }
    # A grace deadline is set by a change, never at creation (NewSession has no such field).
    grace = row.pop("grace_deadline", None)
    sessions = db.storage.repos.sessions
    sessions.insert(NewSession(**row))
    if grace is not None:
        sessions.start_grace(str(row["session_id"]), grace_deadline=grace)
    return str(row["session_id"])


def add_device(db: Database, device_id: str = "laptop-1", tenant: str = "acme") -> str:
    db.storage.repos.devices.add(
        tenant=tenant, device_id=device_id, digest=uuid.uuid4().hex, now=0.0
    )
    return device_id
