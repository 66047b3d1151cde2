"""Navigations and popups the extension stopped on a session: deduplicated by id; payloads kept
for the newest 50, compact seen-id rows for the rest of the session's life (as for dialogs).

A record holds an origin and a cause, never a full URL; it is shown only to the tenant's consumer
in the session status and never reaches logs or telemetry.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from understudy._store._db import Database

KEEP_PAYLOADS = 50


def record(
    db: Database, session_id: str, blocked_id: str, payload: dict[str, Any], now: float
) -> bool:
    """Store a record; False when its id was already seen (a redelivery)."""
    inserted = (
        db.execute(
            "INSERT INTO blocked_navigations (session_id, blocked_id, record, seen_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (session_id, blocked_id) DO NOTHING",
            (session_id, blocked_id, json.dumps(payload), now),
        )
        == 1
    )
    if inserted:
        db.execute(
            "UPDATE blocked_navigations SET record = NULL WHERE session_id = ? AND record IS NOT "
            "NULL AND blocked_id NOT IN (SELECT blocked_id FROM blocked_navigations WHERE "
            "session_id = ? AND record IS NOT NULL ORDER BY seen_at DESC, rowid DESC LIMIT ?)",
            (session_id, session_id, KEEP_PAYLOADS),
        )
    return inserted


def newest(db: Database, session_id: str) -> list[dict[str, Any]]:
    """The newest records with a payload, newest first."""
    rows = db.query(
        "SELECT record FROM blocked_navigations WHERE session_id = ? AND record IS NOT NULL "
        "ORDER BY seen_at DESC, rowid DESC LIMIT ?",
        (session_id, KEEP_PAYLOADS),
    )
    return [json.loads(r["record"]) for r in rows]
