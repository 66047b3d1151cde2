"""`WebhookStore`: endpoints, the outbox of events, deliveries and their attempts, in SQLite.

The outbox is written by two store hooks (`Store.run_ended_hooks`, `Store.session_ended_hooks`)
inside the transaction that ends the run or session: the event exists exactly when the state
change does, once per (type, subject), with one delivery per endpoint of the customer that was
subscribed to the type at that moment. The worker (`_worker.py`) reads due deliveries and
records each attempt here; nothing is kept in memory, so a restart resumes every pending one.

Delivery lifecycle: `pending` → `delivered` | `failed` (retries exhausted, or the endpoint
answered 410) | `cancelled` (the endpoint was deleted or disabled before it was delivered).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from synthetic_users._store import NotFound, Page, rfc3339
from synthetic_users._store._store import MAX_PAGE, _decode_cursor, _encode_cursor, new_id
from synthetic_users._webhooks._sign import new_secret

if TYPE_CHECKING:
    import sqlite3

    from synthetic_users._store import RunRecord, SessionRecord, Store

EVENT_TYPES: Final = ("run.completed", "session.completed")
Outcome = Literal["delivered", "retry", "disable"]


class WebhookNotFound(NotFound):
    """No such webhook endpoint for this customer (or it was deleted)."""


@dataclass(frozen=True)
class WebhookRecord:
    webhook_id: str
    customer_id: str
    url: str
    events: list[str]
    status: str  # active | disabled
    disabled_reason: str | None
    created_at: float

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> WebhookRecord:
        return cls(
            webhook_id=row["webhook_id"],
            customer_id=row["customer_id"],
            url=row["url"],
            events=json.loads(row["events"]),
            status=row["status"],
            disabled_reason=row["disabled_reason"],
            created_at=row["created_at"],
        )


@dataclass(frozen=True)
class AttemptRecord:
    attempt: int
    attempted_at: float
    status_code: int | None
    error: str | None
    duration_ms: float
    next_retry_at: float | None


@dataclass(frozen=True)
class DeliveryRecord:
    delivery_id: str
    event_id: str
    event_type: str
    subject_id: str
    status: str
    next_attempt_at: float | None
    created_at: float
    ended_at: float | None
    attempts: list[AttemptRecord]


@dataclass(frozen=True)
class DueDelivery:
    """What the worker needs to send one attempt."""

    delivery_id: str
    event_id: str
    webhook_id: str
    url: str
    secret: str
    body: bytes
    attempts: int  # made so far


class WebhookStore:
    """Webhook rows over the service's `Store` (same database, same transactions)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._db = store.db

    def install(self) -> None:
        """Write the outbox from the store's end-of-run and end-of-session transactions."""
        if self.on_run_ended not in self._store.run_ended_hooks:
            self._store.run_ended_hooks.append(self.on_run_ended)
            self._store.session_ended_hooks.append(self.on_session_ended)

    # -- endpoints --------------------------------------------------------------------------

    def create(self, customer_id: str, url: str, events: list[str]) -> tuple[WebhookRecord, str]:
        """A new endpoint and its signing secret (returned only here; kept to sign)."""
        webhook_id, secret, now = new_id("whk"), new_secret(), self._store.clock()
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO customers (customer_id, created_at) VALUES (?, ?)",
                (customer_id, now),
            )
            conn.execute(
                "INSERT INTO webhooks (webhook_id, customer_id, url, events, secret, status, "
                "created_at) VALUES (?, ?, ?, ?, ?, 'active', ?)",
                (webhook_id, customer_id, url, json.dumps(sorted(set(events))), secret, now),
            )
        return self.get(customer_id, webhook_id), secret

    def get(self, customer_id: str, webhook_id: str) -> WebhookRecord:
        """Raises: WebhookNotFound."""
        row = self._db.one(
            "SELECT * FROM webhooks WHERE webhook_id = ? AND customer_id = ? "
            "AND deleted_at IS NULL",
            (webhook_id, customer_id),
        )
        if row is None:
            raise WebhookNotFound(webhook_id)
        return WebhookRecord.from_row(row)

    def list_webhooks(
        self, customer_id: str, *, limit: int = 20, cursor: str | None = None
    ) -> Page:
        """The customer's endpoints, newest first.

        Raises:
            BadCursor: `cursor` was not written by this store.
        """
        sql, params = _after(
            "SELECT * FROM webhooks WHERE customer_id = ? AND deleted_at IS NULL",
            (customer_id,),
            "webhook_id",
            cursor,
        )
        rows = self._db.query(sql, (*params, _limit(limit) + 1))
        return _paged(rows, limit, "webhook_id", WebhookRecord.from_row)

    def delete(self, customer_id: str, webhook_id: str) -> None:
        """Forget an endpoint: it gets nothing more; its pending deliveries are cancelled.

        Raises: WebhookNotFound.
        """
        with self._db.transaction() as conn:
            self.get(customer_id, webhook_id)
            now = self._store.clock()
            conn.execute(
                # The secret goes with the endpoint: nothing is ever signed with it again.
                "UPDATE webhooks SET deleted_at = ?, secret = '' WHERE webhook_id = ?",
                (now, webhook_id),
            )
            self._cancel_pending(conn, webhook_id, now)

    # -- the outbox ---------------------------------------------------------------------------

    def on_run_ended(self, run: RunRecord) -> None:
        data = {
            "run_id": run.run_id,
            "status": run.status.value,
            "ended_at": rfc3339(run.ended_at or self._store.clock()),
            "links": _run_links(run.run_id),
        }
        self._emit(run.customer_id, "run.completed", run.run_id, run.ended_at, data)

    def on_session_ended(self, session: SessionRecord) -> None:
        run = self._store.get_run(session.run_id)
        data = {
            "run_id": session.run_id,
            "session_id": session.session_id,
            "status": session.status.value,
            "generation": session.generation,
            "turns": session.turn,
            "ended_at": rfc3339(session.ended_at or self._store.clock()),
            "links": _session_links(session.run_id, session.session_id),
        }
        self._emit(run.customer_id, "session.completed", session.session_id, session.ended_at, data)

    def _emit(
        self, customer_id: str, kind: str, subject: str, at: float | None, data: dict[str, Any]
    ) -> None:
        now = self._store.clock()
        body = {"type": kind, "timestamp": rfc3339(at or now), "data": data}
        event_id = new_id("msg")
        with self._db.transaction() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO webhook_events (event_id, customer_id, type, subject_id, "
                "payload, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (event_id, customer_id, kind, subject, _canonical(body), now),
            )
            if cursor.rowcount == 0:
                return  # already in the outbox: one event per (type, subject)
            endpoints = conn.execute(
                "SELECT webhook_id, events FROM webhooks WHERE customer_id = ? "
                "AND status = 'active' AND deleted_at IS NULL",
                (customer_id,),
            ).fetchall()
            conn.executemany(
                "INSERT INTO webhook_deliveries (delivery_id, event_id, webhook_id, status, "
                "next_attempt_at, created_at) VALUES (?, ?, ?, 'pending', ?, ?)",
                [
                    (new_id("dlv"), event_id, row["webhook_id"], now, now)
                    for row in endpoints
                    if kind in json.loads(row["events"])
                ],
            )

    # -- the worker's side ----------------------------------------------------------------------

    def due(self, now: float, limit: int = 20) -> list[DueDelivery]:
        """Pending deliveries whose next attempt is due, the most overdue first."""
        rows = self._db.query(
            "SELECT d.delivery_id, d.event_id, d.attempts, w.webhook_id, w.url, w.secret, "
            "e.payload FROM webhook_deliveries d JOIN webhooks w USING (webhook_id) "
            "JOIN webhook_events e USING (event_id) WHERE d.status = 'pending' "
            "AND d.next_attempt_at <= ? AND w.status = 'active' AND w.deleted_at IS NULL "
            "ORDER BY d.next_attempt_at, d.delivery_id LIMIT ?",
            (now, limit),
        )
        return [
            DueDelivery(
                delivery_id=row["delivery_id"],
                event_id=row["event_id"],
                webhook_id=row["webhook_id"],
                url=row["url"],
                secret=row["secret"],
                body=row["payload"].encode(),
                attempts=row["attempts"],
            )
            for row in rows
        ]

    def next_due_at(self) -> float | None:
        """When the earliest pending delivery is due (None: nothing pending)."""
        row = self._db.one(
            "SELECT MIN(d.next_attempt_at) AS at FROM webhook_deliveries d "
            "JOIN webhooks w USING (webhook_id) WHERE d.status = 'pending' "
            "AND w.status = 'active' AND w.deleted_at IS NULL"
        )
        return None if row is None or row["at"] is None else float(row["at"])

    def record_attempt(
        self,
        delivery: DueDelivery,
        *,
        attempted_at: float,
        duration_ms: float,
        status_code: int | None,
        error: str | None,
        outcome: Outcome,
        next_retry_at: float | None,
    ) -> None:
        """Record one attempt and move the delivery on.

        `retry` with `next_retry_at=None` means the retries are spent: the delivery `failed`.
        `disable` (a 410) disables the endpoint and cancels its other pending deliveries.
        """
        attempt = delivery.attempts + 1
        with self._db.transaction() as conn:
            if outcome != "retry":
                next_retry_at = None
            conn.execute(
                "INSERT OR IGNORE INTO webhook_attempts (delivery_id, attempt, attempted_at, "
                "status_code, error, duration_ms, next_retry_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    delivery.delivery_id,
                    attempt,
                    attempted_at,
                    status_code,
                    error,
                    duration_ms,
                    next_retry_at,
                ),
            )
            status = {"delivered": "delivered", "disable": "failed"}.get(
                outcome, "pending" if next_retry_at is not None else "failed"
            )
            now = self._store.clock()
            # Only a delivery still pending moves: one cancelled meanwhile stays cancelled.
            conn.execute(
                "UPDATE webhook_deliveries SET attempts = ?, status = ?, next_attempt_at = ?, "
                "ended_at = CASE WHEN ? = 'pending' THEN NULL ELSE ? END "
                "WHERE delivery_id = ? AND status = 'pending'",
                (attempt, status, next_retry_at, status, now, delivery.delivery_id),
            )
            if outcome == "disable":
                conn.execute(
                    "UPDATE webhooks SET status = 'disabled', disabled_reason = ? "
                    "WHERE webhook_id = ?",
                    ("the endpoint answered 410 Gone", delivery.webhook_id),
                )
                self._cancel_pending(conn, delivery.webhook_id, now)

    def deliveries(
        self, customer_id: str, webhook_id: str, *, limit: int = 20, cursor: str | None = None
    ) -> Page:
        """The endpoint's deliveries, newest first, each with its attempts.

        Raises:
            WebhookNotFound: no such endpoint for this customer.
            BadCursor: `cursor` was not written by this store.
        """
        self.get(customer_id, webhook_id)
        sql, params = _after(
            "SELECT d.*, e.type, e.subject_id FROM webhook_deliveries d "
            "JOIN webhook_events e USING (event_id) WHERE d.webhook_id = ?",
            (webhook_id,),
            "delivery_id",
            cursor,
            table="d.",
        )
        rows = self._db.query(sql, (*params, _limit(limit) + 1))
        ids = [row["delivery_id"] for row in rows]
        attempts: dict[str, list[AttemptRecord]] = {i: [] for i in ids}
        if ids:
            marks = ",".join("?" * len(ids))
            for row in self._db.query(
                f"SELECT * FROM webhook_attempts WHERE delivery_id IN ({marks}) "  # noqa: S608
                "ORDER BY delivery_id, attempt",
                tuple(ids),
            ):
                attempts[row["delivery_id"]].append(
                    AttemptRecord(
                        attempt=row["attempt"],
                        attempted_at=row["attempted_at"],
                        status_code=row["status_code"],
                        error=row["error"],
                        duration_ms=row["duration_ms"],
                        next_retry_at=row["next_retry_at"],
                    )
                )

        def convert(row: sqlite3.Row) -> DeliveryRecord:
            return DeliveryRecord(
                delivery_id=row["delivery_id"],
                event_id=row["event_id"],
                event_type=row["type"],
                subject_id=row["subject_id"],
                status=row["status"],
                next_attempt_at=row["next_attempt_at"],
                created_at=row["created_at"],
                ended_at=row["ended_at"],
                attempts=attempts[row["delivery_id"]],
            )

        return _paged(rows, limit, "delivery_id", convert)

    def _cancel_pending(self, conn: sqlite3.Connection, webhook_id: str, now: float) -> None:
        conn.execute(
            "UPDATE webhook_deliveries SET status = 'cancelled', next_attempt_at = NULL, "
            "ended_at = ? WHERE webhook_id = ? AND status = 'pending'",
            (now, webhook_id),
        )


def _run_links(run_id: str) -> dict[str, str]:
    base = f"/runs/{run_id}"
    return {
        "self": base,
        "report_json": f"{base}/report.json",
        "report_html": f"{base}/report.html",
    }


def _session_links(run_id: str, session_id: str) -> dict[str, str]:
    base = f"/runs/{run_id}/sessions/{session_id}"
    return {
        "self": base,
        "report_json": f"{base}/report.json",
        "report_html": f"{base}/report.html",
    }


def _limit(limit: int) -> int:
    return max(1, min(limit, MAX_PAGE))


def _after(
    sql: str, params: tuple[Any, ...], id_column: str, cursor: str | None, table: str = ""
) -> tuple[str, tuple[Any, ...]]:
    """Newest first, after `cursor` (keyset pagination on created_at, id)."""
    if cursor is not None:
        created_at, last_id = _decode_cursor(cursor)
        sql += f" AND ({table}created_at < ? OR ({table}created_at = ? AND {table}{id_column} < ?))"
        params = (*params, created_at, created_at, last_id)
    return sql + f" ORDER BY {table}created_at DESC, {table}{id_column} DESC LIMIT ?", params


def _paged(rows: list[sqlite3.Row], limit: int, id_column: str, convert: Any) -> Page:
    limit = _limit(limit)
    more = len(rows) > limit
    rows = rows[:limit]
    cursor = _encode_cursor(rows[-1]["created_at"], rows[-1][id_column]) if more else None
    return Page([convert(row) for row in rows], cursor)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
