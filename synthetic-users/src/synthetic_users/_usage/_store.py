"""`UsageStore`: one UsageEvent per persona session, and the Stripe meter events owed for it.

A usage event is written by a store hook (`Store.session_ended_hooks`) inside the transaction
that ends the session, once: its id is derived from the session id (`use_` and the first 32 hex
digits of its SHA-256), so writing it again is a no-op and every reader sees one stable id.

Measured from the session's persisted turns:
- `browser_seconds`: for each browser generation, from its first turn's start to its last
  turn's end, summed (the time between a crash and the next generation is not browser time);
  the session's wall time when it has no turns.
- `turns`, `input_tokens`, `output_tokens`: counted and summed over the turns' `usage`.

Stripe postings (`stripe_meter_events`) are the durable "posted" flag: one row per (usage event,
meter), `pending` → `posted` | `failed`; the biller (`_stripe.py`) retries a pending row until
Stripe answers, and never posts a `posted` one again.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from synthetic_users._webhooks._store import _after, _limit, _paged

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Mapping

    from synthetic_users._store import Page, SessionRecord, Store

DIMENSIONS: Final = ("browser_minutes", "turns", "input_tokens", "output_tokens", "model_tokens")


def usage_id(session_id: str) -> str:
    """The stable id of a session's usage event."""
    return "use_" + hashlib.sha256(session_id.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class UsageRecord:
    usage_id: str
    customer_id: str
    run_id: str
    session_id: str
    browser_seconds: float
    turns: int
    input_tokens: int
    output_tokens: int
    created_at: float
    posted: bool  # every Stripe meter event of it was posted

    @property
    def browser_minutes(self) -> float:
        return self.browser_seconds / 60.0

    def quantity(self, dimension: str) -> int:
        """A whole-number quantity for a meter (browser minutes are rounded up)."""
        if dimension == "browser_minutes":
            return math.ceil(self.browser_seconds / 60.0)
        if dimension == "model_tokens":
            return self.input_tokens + self.output_tokens
        value: int = getattr(self, dimension)
        return value

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> UsageRecord:
        return cls(
            usage_id=row["usage_id"],
            customer_id=row["customer_id"],
            run_id=row["run_id"],
            session_id=row["session_id"],
            browser_seconds=row["browser_seconds"],
            turns=row["turns"],
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            created_at=row["created_at"],
            posted=bool(row["posted"]),
        )


@dataclass(frozen=True)
class Totals:
    sessions: int
    browser_seconds: float
    turns: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class MeterPosting:
    """One Stripe meter event owed: what the biller sends."""

    identifier: str
    usage_id: str
    event_name: str
    value: int
    stripe_customer_id: str
    timestamp: int
    attempts: int


_SELECT: Final = (
    "SELECT u.*, NOT EXISTS (SELECT 1 FROM stripe_meter_events m WHERE m.usage_id = u.usage_id "
    "AND m.status != 'posted') AND EXISTS (SELECT 1 FROM stripe_meter_events m "
    "WHERE m.usage_id = u.usage_id) AS posted FROM usage_events u WHERE u.customer_id = ?"
)


class UsageStore:
    """Usage rows over the service's `Store` (same database, same transactions)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._db = store.db

    def install(self) -> None:
        """Write a usage event from the store's end-of-session transaction."""
        if self.record_session not in self._store.session_ended_hooks:
            self._store.session_ended_hooks.append(self.record_session)

    def record_session(self, session: SessionRecord) -> bool:
        """Write the session's usage event (once); False when it already exists."""
        turns = self._store.turns(session.session_id)
        spans: dict[int, tuple[float, float]] = {}
        tokens_in = tokens_out = 0
        for turn in turns:
            start, end = _seconds(turn["started_at"]), _seconds(turn["ended_at"])
            low, high = spans.get(turn["generation"], (start, end))
            spans[turn["generation"]] = (min(low, start), max(high, end))
            usage = turn.get("usage") or {}
            tokens_in += int(usage.get("input_tokens", 0))
            tokens_out += int(usage.get("output_tokens", 0))
        if spans:
            browser = sum(high - low for low, high in spans.values())
        elif session.started_at is not None and session.ended_at is not None:
            browser = session.ended_at - session.started_at
        else:
            browser = 0.0
        run = self._store.get_run(session.run_id)
        with self._db.transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO usage_events (usage_id, customer_id, run_id, session_id, "
                "browser_seconds, turns, input_tokens, output_tokens, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    usage_id(session.session_id),
                    run.customer_id,
                    run.run_id,
                    session.session_id,
                    max(0.0, browser),
                    len(turns),
                    tokens_in,
                    tokens_out,
                    session.ended_at or self._store.clock(),
                ),
            )
        return cursor.rowcount > 0

    def list_usage(
        self,
        customer_id: str,
        *,
        run_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> Page:
        """The customer's usage events, newest first (`since` inclusive, `until` exclusive).

        Raises:
            BadCursor: `cursor` was not written by this store.
        """
        sql, params = _filtered(_SELECT, customer_id, run_id, since, until)
        sql, params = _after(sql, params, "usage_id", cursor, table="u.")
        rows = self._db.query(sql, (*params, _limit(limit) + 1))
        return _paged(rows, limit, "usage_id", UsageRecord.from_row)

    def totals(
        self,
        customer_id: str,
        *,
        run_id: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> Totals:
        """Sums over every usage event the filters select (not only one page)."""
        sql, params = _filtered(
            "SELECT COUNT(*) AS n, COALESCE(SUM(browser_seconds), 0) AS b, "
            "COALESCE(SUM(turns), 0) AS t, COALESCE(SUM(input_tokens), 0) AS i, "
            "COALESCE(SUM(output_tokens), 0) AS o FROM usage_events u WHERE u.customer_id = ?",
            customer_id,
            run_id,
            since,
            until,
        )
        row = self._db.one(sql, params)
        if row is None:  # an aggregate always answers one row
            return Totals(0, 0.0, 0, 0, 0)
        return Totals(row["n"], float(row["b"]), row["t"], row["i"], row["o"])

    # -- billing ------------------------------------------------------------------------------

    def set_stripe_customer(self, customer_id: str, stripe_customer_id: str) -> None:
        """Bill `customer_id`'s usage to this Stripe customer (`cus_…`) from now on."""
        now = self._store.clock()
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO customers (customer_id, created_at) VALUES (?, ?)",
                (customer_id, now),
            )
            conn.execute(
                "INSERT INTO billing_customers (customer_id, stripe_customer_id, updated_at) "
                "VALUES (?, ?, ?) ON CONFLICT (customer_id) DO UPDATE SET "
                "stripe_customer_id = excluded.stripe_customer_id, "
                "updated_at = excluded.updated_at",
                (customer_id, stripe_customer_id, now),
            )

    def stripe_customer(self, customer_id: str) -> str | None:
        row = self._db.one(
            "SELECT stripe_customer_id FROM billing_customers WHERE customer_id = ?",
            (customer_id,),
        )
        return None if row is None else str(row["stripe_customer_id"])

    def enqueue_postings(self, meters: Mapping[str, str]) -> int:
        """Owe one meter event per (usage event, meter) not owed yet; how many were added.

        `meters` maps a dimension (`DIMENSIONS`) to the Stripe meter's `event_name`. Only
        usage of customers with a Stripe customer id is owed; zero quantities are not posted.
        """
        rows = self._db.query(
            "SELECT u.*, 0 AS posted FROM usage_events u JOIN billing_customers b "
            "USING (customer_id) WHERE NOT EXISTS (SELECT 1 FROM stripe_meter_events m "
            "WHERE m.usage_id = u.usage_id) "
            "ORDER BY u.created_at, u.usage_id"
        )
        added = 0
        now = self._store.clock()
        with self._db.transaction() as conn:
            for row in rows:
                record = UsageRecord.from_row(row)
                for dimension, event_name in meters.items():
                    value = record.quantity(dimension)
                    if value <= 0:
                        continue
                    cursor = conn.execute(
                        "INSERT OR IGNORE INTO stripe_meter_events (identifier, usage_id, "
                        "event_name, value, status, next_attempt_at) "
                        "VALUES (?, ?, ?, ?, 'pending', ?)",
                        (
                            meter_identifier(record.usage_id, dimension),
                            record.usage_id,
                            event_name,
                            value,
                            now,
                        ),
                    )
                    added += cursor.rowcount
        return added

    def due_postings(self, now: float, limit: int = 50) -> list[MeterPosting]:
        rows = self._db.query(
            "SELECT m.*, b.stripe_customer_id, u.created_at AS used_at "
            "FROM stripe_meter_events m JOIN usage_events u USING (usage_id) "
            "JOIN billing_customers b ON b.customer_id = u.customer_id "
            "WHERE m.status = 'pending' AND m.next_attempt_at <= ? "
            "ORDER BY m.next_attempt_at, m.identifier LIMIT ?",
            (now, limit),
        )
        return [
            MeterPosting(
                identifier=row["identifier"],
                usage_id=row["usage_id"],
                event_name=row["event_name"],
                value=row["value"],
                stripe_customer_id=row["stripe_customer_id"],
                timestamp=int(row["used_at"]),
                attempts=row["attempts"],
            )
            for row in rows
        ]

    def next_posting_at(self) -> float | None:
        row = self._db.one(
            "SELECT MIN(next_attempt_at) AS at FROM stripe_meter_events WHERE status = 'pending'"
        )
        return None if row is None or row["at"] is None else float(row["at"])

    def posting_done(
        self, identifier: str, *, posted: bool, error: str | None, retry_at: float | None
    ) -> None:
        """Record an answer: posted, retry at `retry_at`, or (neither) failed for good."""
        status = "posted" if posted else ("pending" if retry_at is not None else "failed")
        self._db.execute(
            "UPDATE stripe_meter_events SET status = ?, attempts = attempts + 1, "
            "next_attempt_at = COALESCE(?, next_attempt_at), last_error = ?, "
            "posted_at = CASE WHEN ? THEN ? ELSE posted_at END "
            "WHERE identifier = ? AND status = 'pending'",
            (status, retry_at, error, posted, self._store.clock(), identifier),
        )

    def postings(self, usage: str) -> list[dict[str, Any]]:
        """The meter events of one usage event, as rows (for tests and operators)."""
        return [
            dict(row)
            for row in self._db.query(
                "SELECT * FROM stripe_meter_events WHERE usage_id = ? ORDER BY identifier",
                (usage,),
            )
        ]


def meter_identifier(usage: str, dimension: str) -> str:
    """The meter event's `identifier` and `Idempotency-Key`: the usage event id, per meter.

    Stripe allows one value per meter event, and an idempotency key must not be reused with
    other parameters, so each meter of a usage event gets the usage event id and its dimension.
    """
    return f"{usage}-{dimension}"


def _filtered(
    sql: str, customer_id: str, run_id: str | None, since: float | None, until: float | None
) -> tuple[str, tuple[Any, ...]]:
    params: tuple[Any, ...] = (customer_id,)
    if run_id is not None:
        sql, params = sql + " AND u.run_id = ?", (*params, run_id)
    if since is not None:
        sql, params = sql + " AND u.created_at >= ?", (*params, since)
    if until is not None:
        sql, params = sql + " AND u.created_at < ?", (*params, until)
    return sql, params


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
