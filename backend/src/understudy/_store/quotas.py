"""Exact per-minute quota counters (fixed one-minute windows) and lifetime counters."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from understudy._store._sql import Executor

WINDOW_S = 60

# One statement decides and counts: a new window starts at 1; an existing one goes up only while
# under the limit. No row returned means refused (SQLite and PostgreSQL both return nothing for a
# DO UPDATE whose WHERE fails). Two writers cannot both take the last slot, because the engine
# checks the condition against the row as the other writer left it (SQLite by serialising
# writers, PostgreSQL by locking the conflicting row before it evaluates WHERE). A count of 1 is
# a window's first use: only then can an older window of the subject still be stored, so only
# then is it deleted (once a minute per subject, not on every use).
_TAKE = (
    "INSERT INTO quota_counters (scope, subject, window_start, count) "
    "VALUES (:scope, :subject, :window, 1) "
    "ON CONFLICT (scope, subject, window_start) DO UPDATE "
    "SET count = quota_counters.count + 1 WHERE quota_counters.count < :limit "
    "RETURNING count"
)


class SqlQuotas:
    """`understudy._store._ports.QuotaRepository` in portable SQL."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    def take(self, scope: str, subject: str, limit: int, now: float) -> float | None:
        """Count one use; None when within `limit`, else seconds until the window resets.

        A refused use is not counted, so a caller that waits gets its slot.
        """
        window = int(now // WINDOW_S) * WINDOW_S
        retry = float(max(1, math.ceil(window + WINDOW_S - now)))
        if limit <= 0:
            return retry
        taken = self._sql.one(
            _TAKE, {"scope": scope, "subject": subject, "window": window, "limit": limit}
        )
        if taken is None:
            return retry
        if taken["count"] == 1:
            self._sql.run(
                "DELETE FROM quota_counters WHERE scope = :scope AND subject = :subject "
                "AND window_start < :window",
                {"scope": scope, "subject": subject, "window": window},
            )
        return None

    def take_all(self, uses: list[tuple[str, str, int]], now: float) -> list[float | None]:
        """`take` for each (scope, subject, limit) of `uses`, in one statement: per use, None
        when within its limit, else the seconds until the window resets.

        The uses that fit are counted even when another is refused: a caller that refuses on
        any rolls its transaction back (an admission turn does), which uncounts them.
        """
        window = int(now // WINDOW_S) * WINDOW_S
        retry = float(max(1, math.ceil(window + WINDOW_S - now)))
        if len({scope for scope, _, _ in uses}) != len(uses):
            raise ValueError("take_all counts each scope once per call")
        asked = [(scope, subject, limit) for scope, subject, limit in uses if limit > 0]
        if not asked:
            return [retry] * len(uses)
        params: dict[str, object] = {"window": window}
        rows, limits = [], []
        for i, (scope, subject, limit) in enumerate(asked):
            rows.append(f"(:scope{i}, :subject{i}, :window, 1)")
            limits.append(f"WHEN :scope{i} THEN :limit{i}")
            params |= {f"scope{i}": scope, f"subject{i}": subject, f"limit{i}": limit}
        # Each scope appears once per call, so the scope names the row's limit.
        taken = self._sql.rows(
            "INSERT INTO quota_counters (scope, subject, window_start, count) "  # noqa: S608
            f"VALUES {', '.join(rows)} "
            "ON CONFLICT (scope, subject, window_start) DO UPDATE "
            "SET count = quota_counters.count + 1 WHERE quota_counters.count < "
            f"CASE quota_counters.scope {' '.join(limits)} END "
            "RETURNING scope, subject, count",
            params,
        )
        counts = {(row["scope"], row["subject"]): row["count"] for row in taken}
        for (scope, subject), count in counts.items():
            if count == 1:  # a window's first use: older windows of the subject may remain
                self._sql.run(
                    "DELETE FROM quota_counters WHERE scope = :scope AND subject = :subject "
                    "AND window_start < :window",
                    {"scope": scope, "subject": subject, "window": window},
                )
        return [
            None if limit > 0 and (scope, subject) in counts else retry
            for scope, subject, limit in uses
        ]

    def used(self, scope: str, subject: str, now: float) -> int:
        """Uses counted in the window that holds `now`."""
        window = int(now // WINDOW_S) * WINDOW_S
        row = self._sql.one(
            "SELECT count FROM quota_counters WHERE scope = :scope AND subject = :subject "
            "AND window_start = :window",
            {"scope": scope, "subject": subject, "window": window},
        )
        return int(row["count"]) if row is not None else 0
