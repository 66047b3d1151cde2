"""Retention: a run and everything it wrote are deleted some days after it ended.

Each customer keeps runs for `retention_days` after they end: the service's setting
(`SYNTHETIC_USERS_RETENTION_DAYS`, 30 by default) unless the customer has its own
(`synthetic-users customers set-retention`, kept in `customer_settings`). `RetentionSweeper`,
started and stopped by the service, looks every few minutes for runs that ended before their
customer's cutoff, and for each one:

1. deletes its artifacts (reports, transcripts, screenshots: `ArtifactStore.delete_prefix`);
2. in one transaction, deletes its turns, reactions, inbox messages, usage events (with their
   Stripe postings), persona sessions and the run itself, and writes its tombstone
   (`expired_runs`: run id, customer, when it ended, when it expired).

Artifacts go first: a crash between the two steps leaves a run without its files, which the next
sweep finishes, rather than files no row points to any more. Only runs that ended (completed,
failed or cancelled) with no session still queued or running are swept: a cancelled run whose
browsers are still closing waits for the next sweep, and so does a run whose usage is still
being posted to Stripe (billing must not lose it; posted usage lives on in Stripe). Webhook
events stay with their delivery history. The API answers `410 run_expired` for a run with a
tombstone, and for its sessions and artifacts.

An expired run's `Idempotency-Key` is forgotten with it: the same key creates a new run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from synthetic_users._artifacts import run_prefix

if TYPE_CHECKING:
    from collections.abc import Callable

    from synthetic_users._artifacts import ArtifactStore
    from synthetic_users._store import Store

log = logging.getLogger("synthetic_users.retention")

DAY_S: Final = 86_400.0
DEFAULT_DAYS: Final = 30
BATCH: Final = 100  # runs per transaction; a sweep repeats until none is left


@dataclass(frozen=True)
class ExpiredRun:
    """The tombstone of a deleted run."""

    run_id: str
    customer_id: str
    ended_at: float | None
    expired_at: float


def set_retention(store: Store, customer_id: str, days: int | None) -> None:
    """Keep `customer_id`'s runs `days` after they end (None: the service's default)."""
    if days is not None and not 1 <= days <= 3650:
        raise ValueError("retention must be between 1 and 3650 days")
    now = store.clock()
    with store.db.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO customers (customer_id, created_at) VALUES (?, ?)",
            (customer_id, now),
        )
        conn.execute(
            "INSERT INTO customer_settings (customer_id, retention_days, updated_at) "
            "VALUES (?, ?, ?) ON CONFLICT (customer_id) DO UPDATE SET "
            "retention_days = excluded.retention_days, updated_at = excluded.updated_at",
            (customer_id, days, now),
        )


def retention_days(store: Store, customer_id: str) -> int | None:
    """The customer's own retention in days, or None when it uses the service's default."""
    row = store.db.one(
        "SELECT retention_days FROM customer_settings WHERE customer_id = ?", (customer_id,)
    )
    return None if row is None or row["retention_days"] is None else int(row["retention_days"])


def expired(store: Store, run_id: str, customer_id: str) -> ExpiredRun | None:
    """The tombstone of `customer_id`'s run `run_id`, when it expired."""
    row = store.db.one(
        "SELECT * FROM expired_runs WHERE run_id = ? AND customer_id = ?", (run_id, customer_id)
    )
    if row is None:
        return None
    return ExpiredRun(row["run_id"], row["customer_id"], row["ended_at"], row["expired_at"])


class RetentionSweeper:
    """Deletes expired runs now (`sweep`) and every `interval_s` once started.

    Args:
        store: The service's store; its clock decides what "now" is.
        artifacts: Where the runs' files are.
        default_days: Retention of customers without their own setting.
        interval_s: Seconds between sweeps.
        clock: Unix seconds; the store's clock by default (tests pass their own).
    """

    def __init__(
        self,
        store: Store,
        artifacts: ArtifactStore,
        *,
        default_days: int = DEFAULT_DAYS,
        interval_s: float = 3600.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._store = store
        self._artifacts = artifacts
        self._default_days = default_days
        self._interval_s = interval_s
        self._clock = clock or store.clock
        self._task: asyncio.Task[None] | None = None

    def due(self, *, limit: int = BATCH) -> list[tuple[str, str]]:
        """`(run_id, customer_id)` of runs past their customer's retention, oldest first."""
        rows = self._store.db.query(
            "SELECT r.run_id, r.customer_id FROM runs r "
            "LEFT JOIN customer_settings c ON c.customer_id = r.customer_id "
            "WHERE r.status IN ('completed', 'failed', 'cancelled') AND r.ended_at IS NOT NULL "
            "AND r.ended_at < ? - COALESCE(c.retention_days, ?) * ? "
            "AND NOT EXISTS (SELECT 1 FROM persona_sessions s WHERE s.run_id = r.run_id "
            "AND s.status IN ('queued', 'running')) "
            # Usage still being posted to Stripe waits: it is what the customer is billed for.
            "AND NOT EXISTS (SELECT 1 FROM usage_events u JOIN stripe_meter_events m "
            "ON m.usage_id = u.usage_id WHERE u.run_id = r.run_id AND m.status = 'pending') "
            "ORDER BY r.ended_at LIMIT ?",
            (self._clock(), self._default_days, DAY_S, limit),
        )
        return [(row["run_id"], row["customer_id"]) for row in rows]

    def sweep(self) -> list[str]:
        """Delete every run past its retention now; the ids deleted."""
        swept: list[str] = []
        while batch := self.due():
            for run_id, customer_id in batch:
                self._artifacts.delete_prefix(run_prefix(customer_id, run_id))
                self._expire(run_id)
                swept.append(run_id)
        if swept:
            log.info("retention: deleted %d expired run(s)", len(swept))
        return swept

    def _expire(self, run_id: str) -> None:
        with self._store.db.transaction() as conn:
            row = conn.execute(
                "SELECT customer_id, ended_at FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                return
            sessions = "SELECT session_id FROM persona_sessions WHERE run_id = ?"
            conn.execute(f"DELETE FROM turns WHERE session_id IN ({sessions})", (run_id,))  # noqa: S608
            conn.execute(f"DELETE FROM inbox_messages WHERE session_id IN ({sessions})", (run_id,))  # noqa: S608
            conn.execute(
                "DELETE FROM stripe_meter_events WHERE usage_id IN "
                "(SELECT usage_id FROM usage_events WHERE run_id = ?)",
                (run_id,),
            )
            conn.execute("DELETE FROM usage_events WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM reactions WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM persona_sessions WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            conn.execute(
                "INSERT OR REPLACE INTO expired_runs (run_id, customer_id, ended_at, expired_at) "
                "VALUES (?, ?, ?, ?)",
                (run_id, row["customer_id"], row["ended_at"], self._clock()),
            )

    async def start(self) -> None:
        """Sweep now, then every `interval_s`, until `stop`."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._every(), name="retention")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _every(self) -> None:
        while True:
            try:
                self.sweep()
            except Exception:
                # A failed sweep (a full disk, a locked file) is retried at the next interval.
                log.exception("retention sweep failed")
            await asyncio.sleep(self._interval_s)
