"""Durable requests from the operator CLI to close a session through the service's close path.

The CLI is another process: it must not edit session rows (the running service owns them, with
their timers, sockets and capacity), so it writes a request row instead. The service applies
pending requests when it notices another process committed (see `_revocation.py`) and at
start-up, then records the session state the close left, which the CLI waits for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from understudy._store._db import Database


@dataclass(frozen=True)
class CloseRequest:
    session_id: str
    requested_at: float
    done_at: float | None
    outcome: str | None  # the session's status once the close began, or "not_found"


def request(db: Database, session_id: str, now: float) -> None:
    """Ask for a close; asking again re-opens a request that was already applied."""
    db.execute(
        "INSERT INTO close_requests (session_id, requested_at) VALUES (?, ?) "
        "ON CONFLICT (session_id) DO UPDATE SET requested_at = excluded.requested_at, "
        "done_at = NULL, outcome = NULL",
        (session_id, now),
    )


def pending(db: Database) -> list[str]:
    rows = db.query(
        "SELECT session_id FROM close_requests WHERE done_at IS NULL ORDER BY requested_at"
    )
    return [r["session_id"] for r in rows]


def get(db: Database, session_id: str) -> CloseRequest | None:
    row = db.one("SELECT * FROM close_requests WHERE session_id = ?", (session_id,))
    return CloseRequest(**dict(row)) if row is not None else None


def done(db: Database, session_id: str, outcome: str, now: float) -> None:
    db.execute(
        "UPDATE close_requests SET done_at = ?, outcome = ? WHERE session_id = ?",
        (now, outcome, session_id),
    )
