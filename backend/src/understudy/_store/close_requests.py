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
    from understudy._store._sql import Executor


@dataclass(frozen=True)
class CloseRequest:
    session_id: str
    requested_at: float
    done_at: float | None
    outcome: str | None  # the session's status once the close began, or "not_found"


class SqlCloseRequests:
    """`understudy._store._ports.CloseRequestRepository` in portable SQL."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    def request(self, session_id: str, now: float) -> None:
        """Ask for a close; asking again re-opens a request that was already applied."""
        self._sql.run(
            "INSERT INTO close_requests (session_id, requested_at) VALUES (:sid, :now) "
            "ON CONFLICT (session_id) DO UPDATE SET requested_at = excluded.requested_at, "
            "done_at = NULL, outcome = NULL",
            {"sid": session_id, "now": now},
        )

    def pending(self) -> list[str]:
        """Sessions with a close not yet applied, oldest request first."""
        rows = self._sql.rows(
            "SELECT session_id FROM close_requests WHERE done_at IS NULL "
            "ORDER BY requested_at, session_id"
        )
        return [r["session_id"] for r in rows]

    def get(self, session_id: str) -> CloseRequest | None:
        row = self._sql.one(
            "SELECT session_id, requested_at, done_at, outcome FROM close_requests "
            "WHERE session_id = :sid",
            {"sid": session_id},
        )
        return CloseRequest(**row) if row is not None else None

    def done(self, session_id: str, outcome: str, now: float) -> bool:
        """Record that the close was applied; False when nothing was requested."""
        changed = self._sql.run(
            "UPDATE close_requests SET done_at = :now, outcome = :outcome WHERE session_id = :sid",
            {"now": now, "outcome": outcome, "sid": session_id},
        )
        return changed == 1
