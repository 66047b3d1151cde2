"""The single-transaction fsync rate of a disk, measured the way the backend commits.

Method: a fresh SQLite database in the given directory (the benchmark's data directory, so the
same disk as the server's), ``journal_mode=WAL`` and ``synchronous=FULL`` as the backend opens it;
a loop of small transactions (``BEGIN IMMEDIATE``; one ``INSERT`` of a 64-byte row; ``COMMIT``),
each of which must reach the disk before the next begins. Warm-up: 50 transactions. Sample: as
many as fit in the given time. The rate is what one writer that waits for every commit can reach;
the issue's target is that the service's durable writes/s at 100+ sessions reach it, which needs
several actors' commits batched into one fsync.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import TYPE_CHECKING, Any

from bench._proc import filesystem_of

if TYPE_CHECKING:
    from pathlib import Path

WARM_UP = 50


def measure(directory: Path, seconds: float) -> dict[str, Any]:
    """Commit small transactions for ``seconds``; returns transactions/s and what was measured."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"fsync-probe-{uuid.uuid4().hex[:8]}.db"
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute("CREATE TABLE probe (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        row = "x" * 64

        def commit_one() -> None:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO probe (value) VALUES (?)", (row,))
            connection.execute("COMMIT")

        for _ in range(WARM_UP):
            commit_one()
        count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            commit_one()
            count += 1
        elapsed = time.perf_counter() - started
    finally:
        connection.close()
        for suffix in ("", "-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
    return {
        "transactions": count,
        "seconds": round(elapsed, 3),
        "transactions_per_s": count / elapsed,
        "filesystem": filesystem_of(directory),
    }
