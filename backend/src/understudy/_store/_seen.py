"""Records seen on a session, deduplicated by id: payloads kept for the newest few, compact
seen-id rows (payload NULL) for the rest of the session's life. Dialogs and blocked navigations
share this shape.

"Newest" is `seen_at`, then `seq`: a per-session insertion number (migration 6), because ties on
`seen_at` are common (one clock reading per turn) and a row id is not portable.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from understudy._store._sql import Executor


class SeenRecords:
    """One table of seen records; `table` and `key` are fixed names, never caller input."""

    def __init__(self, sql: Executor, *, table: str, key: str, keep: int) -> None:
        self._sql = sql
        self._keep = keep
        self._insert = (
            f"INSERT INTO {table} (session_id, {key}, record, seen_at, seq) "  # noqa: S608
            f"SELECT :sid, :rid, :record, :now, COALESCE(MAX(seq), 0) + 1 FROM {table} "
            f"WHERE session_id = :sid ON CONFLICT (session_id, {key}) DO NOTHING"
        )
        self._trim = (
            f"UPDATE {table} SET record = NULL WHERE session_id = :sid AND record IS NOT NULL "  # noqa: S608
            f"AND {key} NOT IN (SELECT {key} FROM {table} WHERE session_id = :sid "
            "AND record IS NOT NULL ORDER BY seen_at DESC, seq DESC LIMIT :keep)"
        )
        self._newest = (
            f"SELECT record FROM {table} WHERE session_id = :sid AND record IS NOT NULL "  # noqa: S608
            "ORDER BY seen_at DESC, seq DESC LIMIT :keep"
        )
        self._count = f"SELECT COUNT(*) AS n FROM {table} WHERE session_id = :sid"  # noqa: S608

    def record(self, session_id: str, record_id: str, payload: dict[str, Any], now: float) -> bool:
        """Store a record; False when its id was already seen (a redelivery)."""
        inserted = (
            self._sql.run(
                self._insert,
                {"sid": session_id, "rid": record_id, "record": json.dumps(payload), "now": now},
            )
            == 1
        )
        if inserted:
            self._sql.run(self._trim, {"sid": session_id, "keep": self._keep})
        return inserted

    def newest(self, session_id: str) -> list[dict[str, Any]]:
        """The newest records that still have a payload, newest first."""
        rows = self._sql.rows(self._newest, {"sid": session_id, "keep": self._keep})
        return [json.loads(r["record"]) for r in rows]

    def seen_count(self, session_id: str) -> int:
        """How many distinct ids the session has seen, payload or not."""
        row = self._sql.one(self._count, {"sid": session_id})
        return int(row["n"]) if row is not None else 0
