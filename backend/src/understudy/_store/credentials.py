"""Consumer API keys and enrolled devices: only SHA-256 digests of their tokens are stored."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from understudy._store._sql import Executor


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


class SqlApiKeys:
    """`understudy._store._ports.ApiKeyRepository` (tenants and their keys) in portable SQL."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    def add(self, *, digest: str, key_id: str, tenant: str, actor: str, now: float) -> None:
        """Store a key. Raises `ConflictError` when its digest or id exists already."""
        self._sql.run(
            "INSERT INTO api_keys (digest, key_id, tenant, actor, created_at) "
            "VALUES (:digest, :key_id, :tenant, :actor, :now)",
            {"digest": digest, "key_id": key_id, "tenant": tenant, "actor": actor, "now": now},
        )

    def by_digest(self, digest: str) -> ApiKey | None:
        row = self._sql.one("SELECT * FROM api_keys WHERE digest = :digest", {"digest": digest})
        return _key(row) if row is not None else None

    def revoke(self, key_id: str, now: float) -> bool:
        """Revoke an active key; False when there is none by that id (or it is revoked)."""
        changed = self._sql.run(
            "UPDATE api_keys SET revoked_at = :now WHERE key_id = :key_id AND revoked_at IS NULL",
            {"now": now, "key_id": key_id},
        )
        return changed == 1

    def all(self) -> list[ApiKey]:
        rows = self._sql.rows("SELECT * FROM api_keys ORDER BY tenant, actor, created_at, key_id")
        return [_key(r) for r in rows]

    def tenants(self) -> list[str]:
        """Every tenant that has a key or a device, sorted."""
        rows = self._sql.rows(
            "SELECT tenant FROM api_keys UNION SELECT tenant FROM devices ORDER BY tenant"
        )
        return [r["tenant"] for r in rows]


class SqlDevices:
    """`understudy._store._ports.DeviceRepository` in portable SQL."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    def add(self, *, tenant: str, device_id: str, digest: str, now: float) -> None:
        """Enroll a device. Raises `ConflictError` on a taken id or credential digest."""
        self._sql.run(
            "INSERT INTO devices (tenant, device_id, credential_digest, enrolled_at) "
            "VALUES (:tenant, :device, :digest, :now)",
            {"tenant": tenant, "device": device_id, "digest": digest, "now": now},
        )

    def ensure(self, *, tenant: str, device_id: str, digest: str, now: float) -> None:
        """Record a device known from the `DEVICE_TOKENS` mapping (idempotent)."""
        self._sql.run(
            "INSERT INTO devices (tenant, device_id, credential_digest, enrolled_at) "
            "VALUES (:tenant, :device, :digest, :now) ON CONFLICT (tenant, device_id) "
            "DO UPDATE SET credential_digest = excluded.credential_digest",
            {"tenant": tenant, "device": device_id, "digest": digest, "now": now},
        )

    def rotate_credential(self, tenant: str, device_id: str, digest: str) -> bool:
        """Give an enrolled, unrevoked device a new credential digest; False when there is none."""
        changed = self._sql.run(
            "UPDATE devices SET credential_digest = :digest WHERE tenant = :tenant "
            "AND device_id = :device AND revoked_at IS NULL",
            {"digest": digest, "tenant": tenant, "device": device_id},
        )
        return changed == 1

    def get(self, tenant: str, device_id: str) -> Device | None:
        row = self._sql.one(
            "SELECT * FROM devices WHERE tenant = :tenant AND device_id = :device",
            {"tenant": tenant, "device": device_id},
        )
        return _device(row) if row is not None else None

    def by_digest(self, digest: str) -> Device | None:
        row = self._sql.one(
            "SELECT * FROM devices WHERE credential_digest = :digest", {"digest": digest}
        )
        return _device(row) if row is not None else None

    def of_tenant(self, tenant: str, *, include_revoked: bool = False) -> list[Device]:
        """The tenant's devices ordered by id: unrevoked ones, or every one ever enrolled."""
        active = "" if include_revoked else " AND revoked_at IS NULL"
        rows = self._sql.rows(
            f"SELECT * FROM devices WHERE tenant = :tenant{active} ORDER BY device_id",  # noqa: S608
            {"tenant": tenant},
        )
        return [_device(r) for r in rows]

    def all(self) -> list[Device]:
        return [
            _device(r) for r in self._sql.rows("SELECT * FROM devices ORDER BY tenant, device_id")
        ]

    def online_capacity(self) -> tuple[int, int]:
        """(online devices, tabs their sessions hold), across tenants, for the metrics gauges."""
        online = self._sql.one(
            "SELECT COUNT(*) AS n FROM devices WHERE online = 1 AND revoked_at IS NULL"
        )
        held = self._sql.one(
            "SELECT COUNT(*) AS n FROM sessions s JOIN devices d "
            "ON s.tenant = d.tenant AND s.device_id = d.device_id "
            "WHERE s.capacity_held = 1 AND d.online = 1 AND d.revoked_at IS NULL"
        )
        return (int(online["n"]) if online else 0, int(held["n"]) if held else 0)

    def revoke(self, tenant: str, device_id: str, now: float) -> bool:
        """Revoke an unrevoked device (it goes offline too); False when there is none."""
        changed = self._sql.run(
            "UPDATE devices SET revoked_at = :now, online = 0 WHERE tenant = :tenant "
            "AND device_id = :device AND revoked_at IS NULL",
            {"now": now, "tenant": tenant, "device": device_id},
        )
        return changed == 1

    def connected(
        self,
        tenant: str,
        device_id: str,
        *,
        now: float,
        browser_epoch: str,
        protocol_versions: list[int],
        capabilities: list[str],
        local_policy: dict[str, Any],
    ) -> int | None:
        """Record a hello; returns the new connection epoch (None for an unknown device)."""
        row = self._sql.one(
            "UPDATE devices SET online = 1, last_seen_at = :now, browser_epoch = :epoch, "
            "connection_epoch = connection_epoch + 1, protocol_versions = :versions, "
            "capabilities = :capabilities, local_policy = :policy "
            "WHERE tenant = :tenant AND device_id = :device RETURNING connection_epoch",
            {
                "now": now,
                "epoch": browser_epoch,
                "versions": json.dumps(protocol_versions),
                "capabilities": json.dumps(capabilities),
                "policy": json.dumps(local_policy),
                "tenant": tenant,
                "device": device_id,
            },
        )
        return int(row["connection_epoch"]) if row is not None else None

    def seen(self, tenant: str, device_id: str, now: float) -> None:
        """A heartbeat: the device is online and was seen at `now`."""
        self._sql.run(
            "UPDATE devices SET last_seen_at = :now, online = 1 "
            "WHERE tenant = :tenant AND device_id = :device",
            {"now": now, "tenant": tenant, "device": device_id},
        )

    def offline(self, tenant: str, device_id: str) -> None:
        self._sql.run(
            "UPDATE devices SET online = 0 WHERE tenant = :tenant AND device_id = :device",
            {"tenant": tenant, "device": device_id},
        )

    def assigned(self, tenant: str, device_id: str, now: float) -> None:
        """A session was placed on the device (allocation prefers the least recently used)."""
        self._sql.run(
            "UPDATE devices SET last_assigned_at = :now "
            "WHERE tenant = :tenant AND device_id = :device",
            {"now": now, "tenant": tenant, "device": device_id},
        )


def _key(row: dict[str, Any]) -> ApiKey:
    return ApiKey(row["key_id"], row["tenant"], row["actor"], row["created_at"], row["revoked_at"])


def _device(row: dict[str, Any]) -> Device:
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
