"""Consumer API keys and enrolled devices: only SHA-256 digests of their tokens are stored."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from understudy._store._db import Database, Row


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    tenant: str
    actor: str
    created_at: float
    revoked_at: float | None


@dataclass(frozen=True)
class Device:
    tenant: str
    device_id: str
    enrolled_at: float
    revoked_at: float | None
    online: bool
    last_seen_at: float | None
    last_assigned_at: float
    browser_epoch: str | None
    connection_epoch: int
    protocol_versions: list[int]
    capabilities: list[str]
    local_policy: dict[str, Any] | None


def add_api_key(
    db: Database, *, digest: str, key_id: str, tenant: str, actor: str, now: float
) -> None:
    db.execute(
        "INSERT INTO api_keys (digest, key_id, tenant, actor, created_at) VALUES (?, ?, ?, ?, ?)",
        (digest, key_id, tenant, actor, now),
    )


def api_key_by_digest(db: Database, digest: str) -> ApiKey | None:
    row = db.one("SELECT * FROM api_keys WHERE digest = ?", (digest,))
    return _key(row) if row is not None else None


def revoke_api_key(db: Database, key_id: str, now: float) -> bool:
    return (
        db.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
            (now, key_id),
        )
        == 1
    )


def list_api_keys(db: Database) -> list[ApiKey]:
    return [_key(r) for r in db.query("SELECT * FROM api_keys ORDER BY tenant, actor, created_at")]


def _key(row: Row) -> ApiKey:
    return ApiKey(row["key_id"], row["tenant"], row["actor"], row["created_at"], row["revoked_at"])


def add_device(db: Database, *, tenant: str, device_id: str, digest: str, now: float) -> None:
    db.execute(
        "INSERT INTO devices (tenant, device_id, credential_digest, enrolled_at) "
        "VALUES (?, ?, ?, ?)",
        (tenant, device_id, digest, now),
    )


def ensure_device(db: Database, *, tenant: str, device_id: str, digest: str, now: float) -> None:
    """Record a device known from the `DEVICE_TOKENS` mapping (idempotent)."""
    db.execute(
        "INSERT INTO devices (tenant, device_id, credential_digest, enrolled_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (tenant, device_id) "
        "DO UPDATE SET credential_digest = excluded.credential_digest",
        (tenant, device_id, digest, now),
    )


def rotate_device_credential(db: Database, tenant: str, device_id: str, digest: str) -> bool:
    """Give an enrolled, unrevoked device a new credential digest; False when there is none."""
    return (
        db.execute(
            "UPDATE devices SET credential_digest = ? WHERE tenant = ? AND device_id = ? "
            "AND revoked_at IS NULL",
            (digest, tenant, device_id),
        )
        == 1
    )


def tenant_devices_all(db: Database, tenant: str) -> list[Device]:
    """Every device ever enrolled in `tenant`, revoked ones included, ordered by id."""
    rows = db.query("SELECT * FROM devices WHERE tenant = ? ORDER BY device_id", (tenant,))
    return [_device(r) for r in rows]


def device_by_digest(db: Database, digest: str) -> Device | None:
    row = db.one("SELECT * FROM devices WHERE credential_digest = ?", (digest,))
    return _device(row) if row is not None else None


def get_device(db: Database, tenant: str, device_id: str) -> Device | None:
    row = db.one("SELECT * FROM devices WHERE tenant = ? AND device_id = ?", (tenant, device_id))
    return _device(row) if row is not None else None


def tenant_devices(db: Database, tenant: str) -> list[Device]:
    rows = db.query(
        "SELECT * FROM devices WHERE tenant = ? AND revoked_at IS NULL ORDER BY device_id",
        (tenant,),
    )
    return [_device(r) for r in rows]


def all_devices(db: Database) -> list[Device]:
    return [_device(r) for r in db.query("SELECT * FROM devices ORDER BY tenant, device_id")]


def tenants(db: Database) -> list[str]:
    rows = db.query("SELECT tenant FROM api_keys UNION SELECT tenant FROM devices ORDER BY tenant")
    return [r["tenant"] for r in rows]


def online_capacity(db: Database) -> tuple[int, int]:
    """(online devices, tabs their sessions hold), across tenants, for the metrics gauges."""
    online = db.one("SELECT COUNT(*) AS n FROM devices WHERE online = 1 AND revoked_at IS NULL")
    held = db.one(
        "SELECT COUNT(*) AS n FROM sessions s JOIN devices d "
        "ON s.tenant = d.tenant AND s.device_id = d.device_id "
        "WHERE s.capacity_held = 1 AND d.online = 1 AND d.revoked_at IS NULL"
    )
    return (int(online["n"]) if online else 0, int(held["n"]) if held else 0)


def revoke_device(db: Database, tenant: str, device_id: str, now: float) -> bool:
    return (
        db.execute(
            "UPDATE devices SET revoked_at = ?, online = 0 WHERE tenant = ? AND device_id = ? "
            "AND revoked_at IS NULL",
            (now, tenant, device_id),
        )
        == 1
    )


def device_connected(
    db: Database,
    tenant: str,
    device_id: str,
    *,
    now: float,
    browser_epoch: str,
    protocol_versions: list[int],
    capabilities: list[str],
    local_policy: dict[str, Any],
) -> int:
    """Record a hello; returns the new connection epoch."""
    db.execute(
        "UPDATE devices SET online = 1, last_seen_at = ?, browser_epoch = ?, "
        "connection_epoch = connection_epoch + 1, protocol_versions = ?, capabilities = ?, "
        "local_policy = ? WHERE tenant = ? AND device_id = ?",
        (
            now,
            browser_epoch,
            json.dumps(protocol_versions),
            json.dumps(capabilities),
            json.dumps(local_policy),
            tenant,
            device_id,
        ),
    )
    row = db.one(
        "SELECT connection_epoch FROM devices WHERE tenant = ? AND device_id = ?",
        (tenant, device_id),
    )
    return int(row["connection_epoch"]) if row is not None else 0


def device_seen(db: Database, tenant: str, device_id: str, now: float) -> None:
    db.execute(
        "UPDATE devices SET last_seen_at = ?, online = 1 WHERE tenant = ? AND device_id = ?",
        (now, tenant, device_id),
    )


def device_offline(db: Database, tenant: str, device_id: str) -> None:
    db.execute(
        "UPDATE devices SET online = 0 WHERE tenant = ? AND device_id = ?", (tenant, device_id)
    )


def device_assigned(db: Database, tenant: str, device_id: str, now: float) -> None:
    db.execute(
        "UPDATE devices SET last_assigned_at = ? WHERE tenant = ? AND device_id = ?",
        (now, tenant, device_id),
    )


def _device(row: Row) -> Device:
    policy = row["local_policy"]
    return Device(
        tenant=row["tenant"],
        device_id=row["device_id"],
        enrolled_at=row["enrolled_at"],
        revoked_at=row["revoked_at"],
        online=bool(row["online"]),
        last_seen_at=row["last_seen_at"],
        last_assigned_at=row["last_assigned_at"],
        browser_epoch=row["browser_epoch"],
        connection_epoch=row["connection_epoch"],
        protocol_versions=json.loads(row["protocol_versions"]),
        capabilities=json.loads(row["capabilities"]),
        local_policy=json.loads(policy) if policy else None,
    )
