"""Dialogs seen on a session: deduplicated by id; payloads kept for the newest 50, compact seen-id
tombstones for the rest of the session's life."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from understudy._store._db import Database

KEEP_PAYLOADS = 50


def record(
    db: Database, session_id: str, dialog_id: str, payload: dict[str, Any], now: float
) -> bool:
    """Store a dialog; False when its id was already seen (a redelivery)."""
    inserted = (
        db.execute(
            "INSERT INTO dialogs (session_id, dialog_id, record, seen_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (session_id, dialog_id) DO NOTHING",
            (session_id, dialog_id, json.dumps(payload), now),
        )
        == 1
    )
    if inserted:
        db.execute(
            "UPDATE dialogs SET record = NULL WHERE session_id = ? AND record IS NOT NULL AND "
            "dialog_id NOT IN (SELECT dialog_id FROM dialogs WHERE session_id = ? AND record IS "
            "NOT NULL ORDER BY seen_at DESC, rowid DESC LIMIT ?)",
            (session_id, session_id, KEEP_PAYLOADS),
        )
    return inserted


def newest(db: Database, session_id: str) -> list[dict[str, Any]]:
    rows = db.query(
        "SELECT record FROM dialogs WHERE session_id = ? AND record IS NOT NULL "
        "ORDER BY seen_at DESC, rowid DESC LIMIT ?",
        (session_id, KEEP_PAYLOADS),
    )
    return [json.loads(r["record"]) for r in rows]


def seen_count(db: Database, session_id: str) -> int:
    row = db.one("SELECT COUNT(*) AS n FROM dialogs WHERE session_id = ?", (session_id,))
    return int(row["n"]) if row is not None else 0
