"""Sessions, their leases and their tombstones (terminal rows stay for the session lifetime)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final

from understudy._lifecycle import LIVE, TERMINAL, SessionState
from understudy._store._sql import RowBuilder

if TYPE_CHECKING:
    from understudy._store._sql import Executor


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


@dataclass(frozen=True)
class NewSession:
    """A session row as created; the columns it leaves out start empty (or zero)."""

    session_id: str
    tenant: str
    actor: str
    mode: str
    status: str
    allowed_origins: list[str]
    created_at: float
    expires_at: float
    idle_expires_at: float
    device_id: str | None = None
    lease_id: str | None = None
    lease_epoch: int = 0
    profile_hash: str | None = None
    idempotency_key: str | None = None
    fingerprint: str | None = None
    provision_deadline: float | None = None
    capacity_held: bool = False


# Only the enum's own values are interpolated; every caller value is a bound parameter.
_LIVE_SQL = ", ".join(f"'{state.value}'" for state in sorted(LIVE))
_TERMINAL_SQL = ", ".join(f"'{state.value}'" for state in sorted(TERMINAL))
_PROVISIONING = SessionState.PROVISIONING.value
_RECOVERING = SessionState.RECOVERING.value


class SqlSessions:
    """`understudy._store._ports.SessionRepository` in portable SQL.

    Every change names what it changes and returns the row as it is afterwards (`RETURNING`),
    or None when there is no such session.
    """

    def __init__(self, sql: Executor) -> None:
        self._sql = sql
        # A live session is due at the earlier of its hard and idle expiry.
        self._next_deadline = _next_deadline_sql(sql.dialect.least("expires_at", "idle_expires_at"))
        self._idle = sql.dialect.least("expires_at", ":idle_expires_at")

    # -- reads ---------------------------------------------------------------------------------

    def get(self, session_id: str) -> SessionRow | None:
        row = self._sql.one("SELECT * FROM sessions WHERE session_id = :sid", {"sid": session_id})
        return _row(row) if row is not None else None

    def require(self, session_id: str) -> SessionRow:
        row = self.get(session_id)
        if row is None:
            raise LookupError(f"session {session_id} vanished")
        return row

    def by_idempotency_key(self, tenant: str, key: str) -> SessionRow | None:
        row = self._sql.one(
            "SELECT * FROM sessions WHERE tenant = :tenant AND idempotency_key = :key",
            {"tenant": tenant, "key": key},
        )
        return _row(row) if row is not None else None

    def by_lease(self, lease_id: str) -> SessionRow | None:
        row = self._sql.one("SELECT * FROM sessions WHERE lease_id = :lease", {"lease": lease_id})
        return _row(row) if row is not None else None

    def holding_capacity(self, tenant: str, device_id: str) -> list[SessionRow]:
        rows = self._sql.rows(
            "SELECT * FROM sessions WHERE tenant = :tenant AND device_id = :device "
            "AND capacity_held = 1 ORDER BY created_at, session_id",
            {"tenant": tenant, "device": device_id},
        )
        return [_row(r) for r in rows]

    def unsettled(self, tenant: str) -> list[SessionRow]:
        rows = self._sql.rows(
            f"SELECT * FROM sessions WHERE tenant = :tenant AND (status NOT IN ({_TERMINAL_SQL}) "  # noqa: S608
            "OR capacity_held = 1) ORDER BY created_at, session_id",
            {"tenant": tenant},
        )
        return [_row(r) for r in rows]

    def next_deadline(self, tenant: str, *, offline_after_s: float) -> float | None:
        row = self._sql.one(self._next_deadline, {"tenant": tenant, "offline": offline_after_s})
        due = None if row is None else row["due"]
        return None if due is None else float(due)

    def listing(self, *, tenant: str | None = None, ended: bool = False) -> list[SessionRow]:
        where = [] if ended else [f"status NOT IN ({_TERMINAL_SQL})"]
        params: dict[str, Any] = {}
        if tenant is not None:
            where.append("tenant = :tenant")
            params["tenant"] = tenant
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._sql.rows(
            f"SELECT * FROM sessions{clause} ORDER BY created_at, session_id",  # noqa: S608
            params,
        )
        return [_row(r) for r in rows]

    def counts_by_status(self) -> dict[str, int]:
        rows = self._sql.rows(
            f"SELECT status, COUNT(*) AS n FROM sessions WHERE status NOT IN ({_TERMINAL_SQL}) "  # noqa: S608
            "GROUP BY status"
        )
        return {r["status"]: int(r["n"]) for r in rows}

    def tenants_with_unsettled(self) -> list[str]:
        rows = self._sql.rows(
            f"SELECT DISTINCT tenant FROM sessions WHERE status NOT IN ({_TERMINAL_SQL}) "  # noqa: S608
            "OR capacity_held = 1 ORDER BY tenant"
        )
        return [r["tenant"] for r in rows]

    # -- writes --------------------------------------------------------------------------------

    def insert(self, new: NewSession) -> None:
        """Create a session. Raises `ConflictError` on a taken id or idempotency key."""
        values = asdict(new)
        values["allowed_origins"] = json.dumps(new.allowed_origins)
        values["capacity_held"] = int(new.capacity_held)
        columns = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        self._sql.run(f"INSERT INTO sessions ({columns}) VALUES ({marks})", values)  # noqa: S608

    def _change(self, session_id: str, assignments: str, **params: Any) -> SessionRow | None:
        row = self._sql.one(
            f"UPDATE sessions SET {assignments} WHERE session_id = :sid RETURNING *",  # noqa: S608
            {**params, "sid": session_id},
        )
        return _row(row) if row is not None else None

    def record_command(
        self, session_id: str, *, now: float, idle_ttl_s: float
    ) -> SessionRow | None:
        """A command was admitted: count it and push the idle expiry (never past the hard one)."""
        return self._change(
            session_id,
            f"last_command_at = :now, idle_expires_at = {self._idle}, "
            "command_count = command_count + 1",
            now=now,
            idle_expires_at=now + idle_ttl_s,
        )

    def mark_connected(self, session_id: str, *, status: str) -> SessionRow | None:
        """The device holds the session's tab again: the grace period ends."""
        return self._change(session_id, "status = :status, grace_deadline = NULL", status=status)

    def provisioned(
        self, session_id: str, *, status: str, tab_id: int | None, browser_epoch: str
    ) -> SessionRow | None:
        """The device opened the tab: record it, drop the provisioning and grace deadlines."""
        return self._change(
            session_id,
            "status = :status, tab_id = :tab, browser_epoch = :epoch, "
            "provision_deadline = NULL, grace_deadline = NULL",
            status=status,
            tab=tab_id,
            epoch=browser_epoch,
        )

    def attached(
        self,
        session_id: str,
        *,
        status: str,
        device_id: str,
        lease_id: str,
        lease_epoch: int,
        tab_id: int,
        browser_epoch: str,
    ) -> SessionRow | None:
        """A person attached a tab: the session holds that device's capacity from now on."""
        return self._change(
            session_id,
            "status = :status, device_id = :device, lease_id = :lease, lease_epoch = :lease_epoch, "
            "tab_id = :tab, browser_epoch = :epoch, capacity_held = 1",
            status=status,
            device=device_id,
            lease=lease_id,
            lease_epoch=lease_epoch,
            tab=tab_id,
            epoch=browser_epoch,
        )

    def rebind_epoch(
        self,
        session_id: str,
        *,
        lease_epoch: int,
        browser_epoch: str,
        writes_blocked_reason: str,
        grace_deadline: float,
        status: str | None = None,
    ) -> SessionRow | None:
        """The browser restarted under the lease: a new lease epoch, writes blocked, a grace
        deadline; `status` when the session also moves (connected → recovering)."""
        status_sql = "status = :status, " if status is not None else ""
        return self._change(
            session_id,
            f"{status_sql}lease_epoch = :lease_epoch, browser_epoch = :epoch, "
            "writes_blocked_reason = :reason, grace_deadline = :grace",
            status=status,
            lease_epoch=lease_epoch,
            epoch=browser_epoch,
            reason=writes_blocked_reason,
            grace=grace_deadline,
        )

    def start_grace(
        self, session_id: str, *, grace_deadline: float, status: str | None = None
    ) -> SessionRow | None:
        """Set the grace deadline (device gone quiet); `status` when the session moves too."""
        if status is None:
            return self._change(session_id, "grace_deadline = :grace", grace=grace_deadline)
        return self._change(
            session_id,
            "status = :status, grace_deadline = :grace",
            status=status,
            grace=grace_deadline,
        )

    def release_capacity(self, session_id: str) -> SessionRow | None:
        """The device's tab is gone: the session no longer holds one of its slots."""
        return self._change(session_id, "capacity_held = 0")

    def block_writes(self, session_id: str, *, reason: str, command_id: str) -> SessionRow | None:
        """Refuse further writes until the caller inspects (`reason`, caused by `command_id`)."""
        return self._change(
            session_id,
            "writes_blocked_reason = :reason, writes_blocked_command = :command",
            reason=reason,
            command=command_id,
        )

    def begin_close(
        self,
        session_id: str,
        *,
        status: str,
        end_intent: str,
        end_reason: str,
        grace_deadline: float,
    ) -> SessionRow | None:
        """Closing starts: the intended end, its reason, a deadline for the device's ack."""
        return self._change(
            session_id,
            "status = :status, end_intent = :intent, end_reason = :reason, "
            "grace_deadline = :grace, provision_deadline = NULL",
            status=status,
            intent=end_intent,
            reason=end_reason,
            grace=grace_deadline,
        )

    def finish(self, session_id: str, *, status: str, ended_at: float) -> SessionRow | None:
        """The close is settled: terminal status, capacity released, no deadline left."""
        return self._change(
            session_id,
            "status = :status, ended_at = :ended, capacity_held = 0, grace_deadline = NULL",
            status=status,
            ended=ended_at,
        )

    def expire(
        self, session_id: str, *, status: str, ended_at: float, reason: str
    ) -> SessionRow | None:
        """A session that held no tab reached its expiry."""
        return self._change(
            session_id,
            "status = :status, ended_at = :ended, end_reason = :reason",
            status=status,
            ended=ended_at,
            reason=reason,
        )

    def lose(
        self,
        session_id: str,
        *,
        status: str,
        ended_at: float,
        reason: str,
        keep_capacity_until: float | None,
    ) -> SessionRow | None:
        """The session is lost. With `keep_capacity_until` its tab may still exist: the capacity
        it holds stays held until then (the grace deadline); without, it is released."""
        if keep_capacity_until is None:
            keep = "capacity_held = 0, grace_deadline = NULL"
        else:
            keep = "grace_deadline = :grace"
        return self._change(
            session_id,
            f"status = :status, ended_at = :ended, end_reason = :reason, "
            f"provision_deadline = NULL, {keep}",
            status=status,
            ended=ended_at,
            reason=reason,
            grace=keep_capacity_until,
        )


def _next_deadline_sql(live_due: str) -> str:
    return f"""
    SELECT MIN(due) AS due FROM (
        SELECT {live_due} AS due FROM sessions
         WHERE tenant = :tenant AND status IN ({_LIVE_SQL})
        UNION ALL
        SELECT provision_deadline FROM sessions
         WHERE tenant = :tenant AND status = '{_PROVISIONING}'
        UNION ALL
        SELECT grace_deadline FROM sessions
         WHERE tenant = :tenant AND (status = '{_RECOVERING}' OR capacity_held = 1)
        UNION ALL
        SELECT last_seen_at + :offline FROM devices
         WHERE tenant = :tenant AND online = 1 AND revoked_at IS NULL
    ) AS deadlines
"""  # noqa: S608


_build: Final = RowBuilder(SessionRow)


def _row(data: dict[str, Any]) -> SessionRow:
    # The executor's dict is fresh for each row, so it is decoded in place.
    data["allowed_origins"] = json.loads(data["allowed_origins"])
    data["capacity_held"] = bool(data["capacity_held"])
    return _build(data)
