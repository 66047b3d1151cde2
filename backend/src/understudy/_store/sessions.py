"""Sessions, their leases and their tombstones (terminal rows stay for the session lifetime)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from understudy._lifecycle import LIVE

if TYPE_CHECKING:
    from understudy._store._db import Database, Row

# Columns a caller may update; anything else is a programming error.
_MUTABLE = frozenset(
    {
        "status",
        "end_intent",
        "device_id",
        "lease_id",
        "lease_epoch",
        "browser_epoch",
        "tab_id",
        "idle_expires_at",
        "last_command_at",
        "command_count",
        "writes_blocked_reason",
        "writes_blocked_command",
        "provision_deadline",
        "grace_deadline",
        "capacity_held",
        "ended_at",
        "end_reason",
    }
)


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    tenant: str
    actor: str
    mode: str
    status: str
    end_intent: str | None
    device_id: str | None
    lease_id: str | None
    lease_epoch: int
    browser_epoch: str | None
    tab_id: int | None
    allowed_origins: list[str]
    profile_hash: str | None
    idempotency_key: str | None
    fingerprint: str | None
    created_at: float
    expires_at: float
    idle_expires_at: float
    last_command_at: float | None
    command_count: int
    writes_blocked_reason: str | None
    writes_blocked_command: str | None
    provision_deadline: float | None
    grace_deadline: float | None
    capacity_held: bool
    ended_at: float | None
    end_reason: str | None


def insert(db: Database, **values: Any) -> None:
    values = {**values, "allowed_origins": json.dumps(values["allowed_origins"])}
    columns = ", ".join(values)
    marks = ", ".join(f":{k}" for k in values)
    db.execute(f"INSERT INTO sessions ({columns}) VALUES ({marks})", values)  # noqa: S608


def update(db: Database, session_id: str, **values: Any) -> None:
    unknown = set(values) - _MUTABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    assignments = ", ".join(f"{k} = :{k}" for k in values)
    db.execute(
        f"UPDATE sessions SET {assignments} WHERE session_id = :session_id",  # noqa: S608
        {**values, "session_id": session_id},
    )


def get(db: Database, session_id: str) -> SessionRow | None:
    row = db.one("SELECT * FROM sessions WHERE session_id = ?", (session_id,))
    return _row(row) if row is not None else None


def require(db: Database, session_id: str) -> SessionRow:
    """The row of a session known to exist (a missing row is a programming error)."""
    row = get(db, session_id)
    if row is None:
        raise LookupError(f"session {session_id} vanished")
    return row


def by_idempotency_key(db: Database, tenant: str, key: str) -> SessionRow | None:
    row = db.one("SELECT * FROM sessions WHERE tenant = ? AND idempotency_key = ?", (tenant, key))
    return _row(row) if row is not None else None


def holding_capacity(db: Database, tenant: str, device_id: str) -> list[SessionRow]:
    """Sessions that reserve one of the device's tabs (live, or closing until acknowledged)."""
    rows = db.query(
        "SELECT * FROM sessions WHERE tenant = ? AND device_id = ? AND capacity_held = 1 "
        "ORDER BY created_at",
        (tenant, device_id),
    )
    return [_row(r) for r in rows]


def by_lease(db: Database, lease_id: str) -> SessionRow | None:
    row = db.one("SELECT * FROM sessions WHERE lease_id = ?", (lease_id,))
    return _row(row) if row is not None else None


def unsettled(db: Database, tenant: str) -> list[SessionRow]:
    """Sessions with a deadline still to watch: every non-terminal one, and terminal ones still
    holding capacity."""
    rows = db.query(
        "SELECT * FROM sessions WHERE tenant = ? AND (status NOT IN ('closed','expired','lost') "
        "OR capacity_held = 1)",
        (tenant,),
    )
    return [_row(r) for r in rows]


# Only the enum's own values are interpolated; every caller value is a bound parameter.
_LIVE_SQL = ", ".join(f"'{state.value}'" for state in sorted(LIVE))
_NEXT_DEADLINE_SQL = f"""
    SELECT MIN(due) AS due FROM (
        SELECT MIN(expires_at, idle_expires_at) AS due FROM sessions
         WHERE tenant = :tenant AND status IN ({_LIVE_SQL})
        UNION ALL
        SELECT provision_deadline FROM sessions
         WHERE tenant = :tenant AND status = 'provisioning'
        UNION ALL
        SELECT grace_deadline FROM sessions
         WHERE tenant = :tenant AND (status = 'recovering' OR capacity_held = 1)
        UNION ALL
        SELECT last_seen_at + :offline FROM devices
         WHERE tenant = :tenant AND online = 1 AND revoked_at IS NULL
    )
"""  # noqa: S608


def next_deadline(db: Database, tenant: str, *, offline_after_s: float) -> float | None:
    """The tenant's earliest deadline: a live session's hard or idle expiry, a provisioning
    deadline, a grace deadline of a recovering session or of one still holding capacity, or the
    moment an online device's heartbeat is overdue. None when nothing is pending."""
    row = db.one(_NEXT_DEADLINE_SQL, {"tenant": tenant, "offline": offline_after_s})
    due = None if row is None else row["due"]
    return None if due is None else float(due)


def listing(db: Database, *, tenant: str | None = None, ended: bool = False) -> list[SessionRow]:
    """Sessions for the operator CLI, oldest first: the unfinished ones (live or closing), or
    with `ended` the terminal tombstones too; of one tenant or of all."""
    where = ["1 = 1" if ended else "status NOT IN ('closed','expired','lost')"]
    params: dict[str, Any] = {}
    if tenant is not None:
        where.append("tenant = :tenant")
        params["tenant"] = tenant
    rows = db.query(
        f"SELECT * FROM sessions WHERE {' AND '.join(where)} ORDER BY created_at",  # noqa: S608
        params,
    )
    return [_row(r) for r in rows]


def counts_by_status(db: Database) -> dict[str, int]:
    """How many sessions are in each status that is not terminal (for the metrics gauges)."""
    rows = db.query(
        "SELECT status, COUNT(*) AS n FROM sessions "
        "WHERE status NOT IN ('closed','expired','lost') GROUP BY status"
    )
    return {r["status"]: int(r["n"]) for r in rows}


def tenants_with_unsettled(db: Database) -> list[str]:
    rows = db.query(
        "SELECT DISTINCT tenant FROM sessions WHERE status NOT IN ('closed','expired','lost') "
        "OR capacity_held = 1"
    )
    return [r["tenant"] for r in rows]


def _row(row: Row) -> SessionRow:
    data = dict(row)
    data["allowed_origins"] = json.loads(data["allowed_origins"])
    data["capacity_held"] = bool(data["capacity_held"])
    return SessionRow(**data)
