"""Dialogs seen on a session: deduplicated by id; payloads kept for the newest 50, compact seen-id
tombstones for the rest of the session's life."""

from __future__ import annotations

from typing import TYPE_CHECKING

from understudy._store._seen import SeenRecords

if TYPE_CHECKING:
    from understudy._store._sql import Executor

KEEP_PAYLOADS = 50


def repository(sql: Executor) -> SeenRecords:
    """The dialogs table as a `understudy._store._ports.SeenRecordRepository`."""
    return SeenRecords(sql, table="dialogs", key="dialog_id", keep=KEEP_PAYLOADS)
