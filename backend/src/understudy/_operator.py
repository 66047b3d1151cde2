"""What `understudy status` and `understudy sessions …` show an operator, as JSON-ready dicts.

Read straight from the database (the CLI is another process than the service), with the field
names of the HTTP API where one exists, so a script can use either. Never the profile-state key
or its hash; never a credential or its digest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from understudy._clock import iso
from understudy._lifecycle import SessionState
from understudy.generated.protocol import DEVICE_TAB_CAPACITY

if TYPE_CHECKING:
    from understudy._store._ports import Repositories
    from understudy._store.credentials import Device
    from understudy._store.sessions import SessionRow


def _at(ts: float | None) -> str | None:
    return iso(ts) if ts is not None else None


def age(seconds: float) -> str:
    """A short human duration: `45s`, `12m05s`, `3h02m`, `2d04h`."""
    whole = max(0, int(seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def device_state(device: Device) -> str:
    if device.revoked_at is not None:
        return "revoked"
    return "online" if device.online else "offline"


def device_view(repos: Repositories, device: Device, now: float) -> dict[str, Any]:
    used = len(repos.sessions.holding_capacity(device.tenant, device.device_id))
    free = DEVICE_TAB_CAPACITY - used if device.online and device.revoked_at is None else 0
    return {
        "tenant": device.tenant,
        "deviceId": device.device_id,
        "state": device_state(device),
        "capacity": DEVICE_TAB_CAPACITY,
        "usedCapacity": used,
        "freeCapacity": max(0, free),
        "lastSeenAt": _at(device.last_seen_at),
        "lastSeenAgo": age(now - device.last_seen_at) if device.last_seen_at else None,
        "protocolVersions": device.protocol_versions,
    }


def session_summary(row: SessionRow, now: float) -> dict[str, Any]:
    return {
        "sessionId": row.session_id,
        "tenant": row.tenant,
        "mode": row.mode,
        "status": row.status,
        "deviceId": row.device_id,
        "createdAt": _at(row.created_at),
        "age": age(now - row.created_at),
        "writesBlocked": row.writes_blocked_reason is not None,
    }


def session_detail(row: SessionRow, now: float) -> dict[str, Any]:
    return {
        **session_summary(row, now),
        "actor": row.actor,
        "leaseEpoch": row.lease_epoch,
        "allowedOrigins": row.allowed_origins,
        "expiresAt": _at(row.expires_at),
        "idleExpiresAt": _at(row.idle_expires_at),
        "lastCommandAt": _at(row.last_command_at),
        "commandCount": row.command_count,
        "writesBlockedReason": row.writes_blocked_reason,
        "writesBlockedCommandId": row.writes_blocked_command,
        "capacityHeld": row.capacity_held,
        "endedAt": _at(row.ended_at),
        "endReason": row.end_reason,
    }


def status(
    repos: Repositories, now: float, *, service: str | None, schema_version: int
) -> dict[str, Any]:
    """The whole picture: service, tenants, devices and the sessions not yet finished."""
    return {
        "service": {"running": service is not None, "holder": service},
        "schemaVersion": schema_version,
        "tenants": repos.api_keys.tenants(),
        "devices": [device_view(repos, d, now) for d in repos.devices.all()],
        "sessions": [session_summary(r, now) for r in repos.sessions.listing()],
    }


def table(rows: list[list[str]]) -> str:
    """Columns padded to their widest cell; empty string for no rows."""
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


SESSION_COLUMNS = ["SESSION", "TENANT", "MODE", "STATE", "AGE", "DEVICE", "WRITES"]


def session_line(summary: dict[str, Any]) -> list[str]:
    return [
        summary["sessionId"],
        summary["tenant"],
        summary["mode"],
        summary["status"],
        summary["age"],
        summary["deviceId"] or "-",
        "blocked" if summary["writesBlocked"] else "ok",
    ]


def render_status(view: dict[str, Any]) -> str:
    service = view["service"]
    running = f"running ({service['holder']})" if service["running"] else "not running"
    lines = [
        f"service: {running}",
        f"schema:  version {view['schemaVersion']}",
        f"tenants: {', '.join(view['tenants']) or '(none)'}",
        "",
        f"devices ({len(view['devices'])}):",
    ]
    devices = [
        [
            d["tenant"],
            d["deviceId"],
            d["state"],
            f"{d['freeCapacity']}/{d['capacity']} free",
            f"seen {d['lastSeenAgo']} ago" if d["lastSeenAgo"] else "never seen",
        ]
        for d in view["devices"]
    ]
    lines += ["  " + line for line in table(devices).splitlines()]
    live = view["sessions"]
    lines += ["", f"sessions not finished ({len(live)}):"]
    if live:
        lines += [
            "  " + line for line in table([SESSION_COLUMNS, *map(session_line, live)]).splitlines()
        ]
    return "\n".join(lines)


def is_finished(row: SessionRow) -> bool:
    return SessionState(row.status).terminal
