"""Exact per-minute quota counters (fixed one-minute windows) and lifetime counters."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from understudy._store._db import Database

WINDOW_S = 60


def take(db: Database, scope: str, subject: str, limit: int, now: float) -> float | None:
    """Count one use; None when within `limit`, else seconds until the window resets.

    A refused use is not counted, so a caller that waits gets its slot.
    """
    window = int(now // WINDOW_S) * WINDOW_S
    db.execute(
        "DELETE FROM quota_counters WHERE scope = ? AND subject = ? AND window_start < ?",
        (scope, subject, window),
    )
    row = db.one(
        "SELECT count FROM quota_counters WHERE scope = ? AND subject = ? AND window_start = ?",
        (scope, subject, window),
    )
    used = int(row["count"]) if row is not None else 0
    if used >= limit:
        return float(max(1, math.ceil(window + WINDOW_S - now)))
    db.execute(
        "INSERT INTO quota_counters (scope, subject, window_start, count) VALUES (?, ?, ?, 1) "
        "ON CONFLICT (scope, subject, window_start) DO UPDATE SET count = count + 1",
        (scope, subject, window),
    )
    return None
