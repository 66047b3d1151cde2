"""Dialogs seen on a session: deduplicated by id; payloads kept for the newest 50, compact seen-id
tombstones for the rest of the session's life."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from understudy._store._seen import SeenRecords

if TYPE_CHECKING:
    from understudy._store._db import Database
    from understudy._store._sql import Executor

KEEP_PAYLOADS = 50


def repository(sql: Executor) -> SeenRecords:
    """The dialogs table as a `understudy._store._ports.SeenRecordRepository`."""
    return SeenRecords(sql, table="dialogs", key="dialog_id", keep=KEEP_PAYLOADS)


def record(
    db: Database, session_id: str, dialog_id: str, payload: dict[str, Any], now: float
) -> bool:
    """Store a dialog; False when its id was already seen (a redelivery)."""
    return db.storage.repos.dialogs.record(session_id, dialog_id, payload, now)


def newest(db: Database, session_id: str) -> list[dict[str, Any]]:
    return db.storage.repos.dialogs.newest(session_id)


def seen_count(db: Database, session_id: str) -> int:
    return db.storage.repos.dialogs.seen_count(session_id)
