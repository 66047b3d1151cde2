"""Vaulted secrets for `fill_secret`: envelope encryption, per-tenant data keys.

    master key ─HKDF─▶ KEK ─wraps─▶ tenant data key ─AES-256-GCM─▶ sealed secret (AAD: tenant, name)

Plaintext never touches the database; only `put` receives it and only `reveal` returns it, in
memory. The repository (`SqlVault`, a `VaultRepository`) stores and returns sealed bytes only; the
cryptography stays in the module functions, which take the repository of the caller's
transaction, so they are the same whatever engine holds the bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from understudy import _security

if TYPE_CHECKING:
    from understudy._security import Keys
    from understudy._store._ports import VaultRepository
    from understudy._store._sql import Executor


class SqlVault:
    """`understudy._store._ports.VaultRepository` in portable SQL: wrapped keys, sealed secrets."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    def wrapped_key(self, tenant: str) -> bytes | None:
        row = self._sql.one(
            "SELECT wrapped_key FROM vault_keys WHERE tenant = :tenant", {"tenant": tenant}
        )
        return bytes(row["wrapped_key"]) if row is not None else None

    def wrapped_keys(self) -> list[tuple[str, bytes]]:
        """(tenant, wrapped data key) for every tenant with a key, by tenant."""
        rows = self._sql.rows("SELECT tenant, wrapped_key FROM vault_keys ORDER BY tenant")
        return [(r["tenant"], bytes(r["wrapped_key"])) for r in rows]

    def add_wrapped_key(self, tenant: str, wrapped: bytes, now: float) -> None:
        """Store a tenant's first data key. Raises `ConflictError` when it has one already."""
        self._sql.run(
            "INSERT INTO vault_keys (tenant, wrapped_key, created_at) "
            "VALUES (:tenant, :wrapped, :now)",
            {"tenant": tenant, "wrapped": wrapped, "now": now},
        )

    def replace_wrapped_key(
        self, tenant: str, wrapped: bytes, *, created_at: float | None = None
    ) -> bool:
        """Replace the tenant's wrapped key: a fresh key (`created_at` given) or the same key
        wrapped under a new master key (creation time kept). False when it has none."""
        if created_at is None:
            changed = self._sql.run(
                "UPDATE vault_keys SET wrapped_key = :wrapped WHERE tenant = :tenant",
                {"wrapped": wrapped, "tenant": tenant},
            )
        else:
            changed = self._sql.run(
                "UPDATE vault_keys SET wrapped_key = :wrapped, created_at = :now "
                "WHERE tenant = :tenant",
                {"wrapped": wrapped, "now": created_at, "tenant": tenant},
            )
        return changed == 1

    def put_secret(self, tenant: str, name: str, sealed: bytes, now: float) -> None:
        """Store or replace a sealed secret."""
        self._sql.run(
            "INSERT INTO vault_secrets (tenant, name, sealed, updated_at) "
            "VALUES (:tenant, :name, :sealed, :now) ON CONFLICT (tenant, name) DO UPDATE "
            "SET sealed = excluded.sealed, updated_at = excluded.updated_at",
            {"tenant": tenant, "name": name, "sealed": sealed, "now": now},
        )

    def sealed(self, tenant: str, name: str) -> bytes | None:
        row = self._sql.one(
            "SELECT sealed FROM vault_secrets WHERE tenant = :tenant AND name = :name",
            {"tenant": tenant, "name": name},
        )
        return bytes(row["sealed"]) if row is not None else None

    def sealed_all(self, tenant: str) -> list[tuple[str, bytes]]:
        """(name, sealed) for every secret of `tenant`, by name."""
        rows = self._sql.rows(
            "SELECT name, sealed FROM vault_secrets WHERE tenant = :tenant ORDER BY name",
            {"tenant": tenant},
        )
        return [(r["name"], bytes(r["sealed"])) for r in rows]

    def exists(self, tenant: str, name: str) -> bool:
        row = self._sql.one(
            "SELECT 1 AS one FROM vault_secrets WHERE tenant = :tenant AND name = :name",
            {"tenant": tenant, "name": name},
        )
        return row is not None

    def names(self, tenant: str) -> list[str]:
        rows = self._sql.rows(
            "SELECT name FROM vault_secrets WHERE tenant = :tenant ORDER BY name",
            {"tenant": tenant},
        )
        return [r["name"] for r in rows]

    def delete(self, tenant: str, name: str) -> bool:
        changed = self._sql.run(
            "DELETE FROM vault_secrets WHERE tenant = :tenant AND name = :name",
            {"tenant": tenant, "name": name},
        )
        return changed == 1


def _aad(tenant: str, name: str) -> bytes:
    return f"understudy/v1/secret\x00{tenant}\x00{name}".encode()


def _data_key(
    store: VaultRepository, keys: Keys, tenant: str, now: float, *, create: bool
) -> bytes | None:
    wrapped = store.wrapped_key(tenant)
    if wrapped is not None:
        return _security.unwrap_data_key(keys, tenant, wrapped)
    if not create:
        return None
    dek = _security.new_data_key()
    store.add_wrapped_key(tenant, _security.wrap_data_key(keys, tenant, dek), now)
    return dek


def put(
    store: VaultRepository, keys: Keys, tenant: str, name: str, plaintext: str, now: float
) -> None:
    """Seal `plaintext` under the tenant's data key (made on first use) and store it."""
    dek = _data_key(store, keys, tenant, now, create=True)
    assert dek is not None  # noqa: S101 - created above
    store.put_secret(tenant, name, _security.seal(dek, plaintext.encode(), _aad(tenant, name)), now)


def reveal(store: VaultRepository, keys: Keys, tenant: str, name: str) -> str | None:
    """The plaintext of a stored secret, or None when there is no such secret."""
    sealed = store.sealed(tenant, name)
    if sealed is None:
        return None
    dek = _data_key(store, keys, tenant, 0, create=False)
    if dek is None:
        return None
    return _security.open_sealed(dek, sealed, _aad(tenant, name)).decode()


def rotate_data_key(store: VaultRepository, keys: Keys, tenant: str, now: float) -> int:
    """Re-seal every secret of `tenant` under a fresh data key; returns how many."""
    old = _data_key(store, keys, tenant, now, create=False)
    if old is None:
        return 0
    fresh = _security.new_data_key()
    secrets = store.sealed_all(tenant)
    for name, sealed in secrets:
        aad = _aad(tenant, name)
        store.put_secret(
            tenant, name, _security.seal(fresh, _security.open_sealed(old, sealed, aad), aad), now
        )
    store.replace_wrapped_key(tenant, _security.wrap_data_key(keys, tenant, fresh), created_at=now)
    return len(secrets)


def rewrap_all(store: VaultRepository, old_keys: Keys, new_keys: Keys) -> int:
    """Master-key rotation: unwrap every tenant data key with the old KEK, wrap with the new one."""
    wrapped = store.wrapped_keys()
    for tenant, key in wrapped:
        dek = _security.unwrap_data_key(old_keys, tenant, key)
        store.replace_wrapped_key(tenant, _security.wrap_data_key(new_keys, tenant, dek))
    return len(wrapped)
