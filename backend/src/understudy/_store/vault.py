"""Vaulted secrets for `fill_secret`: envelope encryption, per-tenant data keys.

    master key ─HKDF─▶ KEK ─wraps─▶ tenant data key ─AES-256-GCM─▶ sealed secret (AAD: tenant, name)

Plaintext never touches SQLite; only `put` receives it and only `reveal` returns it, in memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from understudy import _security

if TYPE_CHECKING:
    from understudy._security import Keys
    from understudy._store._db import Database


def _aad(tenant: str, name: str) -> bytes:
    return f"understudy/v1/secret\x00{tenant}\x00{name}".encode()


def _data_key(db: Database, keys: Keys, tenant: str, now: float, *, create: bool) -> bytes | None:
    row = db.one("SELECT wrapped_key FROM vault_keys WHERE tenant = ?", (tenant,))
    if row is not None:
        return _security.unwrap_data_key(keys, tenant, bytes(row["wrapped_key"]))
    if not create:
        return None
    dek = _security.new_data_key()
    db.execute(
        "INSERT INTO vault_keys (tenant, wrapped_key, created_at) VALUES (?, ?, ?)",
        (tenant, _security.wrap_data_key(keys, tenant, dek), now),
    )
    return dek


def put(db: Database, keys: Keys, tenant: str, name: str, plaintext: str, now: float) -> None:
    dek = _data_key(db, keys, tenant, now, create=True)
    assert dek is not None  # noqa: S101 - created above
    sealed = _security.seal(dek, plaintext.encode(), _aad(tenant, name))
    db.execute(
        "INSERT INTO vault_secrets (tenant, name, sealed, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (tenant, name) DO UPDATE SET sealed = excluded.sealed, "
        "updated_at = excluded.updated_at",
        (tenant, name, sealed, now),
    )


def reveal(db: Database, keys: Keys, tenant: str, name: str) -> str | None:
    row = db.one("SELECT sealed FROM vault_secrets WHERE tenant = ? AND name = ?", (tenant, name))
    if row is None:
        return None
    dek = _data_key(db, keys, tenant, 0, create=False)
    if dek is None:
        return None
    return _security.open_sealed(dek, bytes(row["sealed"]), _aad(tenant, name)).decode()


def exists(db: Database, tenant: str, name: str) -> bool:
    row = db.one("SELECT 1 FROM vault_secrets WHERE tenant = ? AND name = ?", (tenant, name))
    return row is not None


def names(db: Database, tenant: str) -> list[str]:
    rows = db.query("SELECT name FROM vault_secrets WHERE tenant = ? ORDER BY name", (tenant,))
    return [r["name"] for r in rows]


def delete(db: Database, tenant: str, name: str) -> bool:
    return (
        db.execute("DELETE FROM vault_secrets WHERE tenant = ? AND name = ?", (tenant, name)) == 1
    )


def rotate_data_key(db: Database, keys: Keys, tenant: str, now: float) -> int:
    """Re-seal every secret of `tenant` under a fresh data key; returns how many."""
    old = _data_key(db, keys, tenant, now, create=False)
    if old is None:
        return 0
    fresh = _security.new_data_key()
    rows = db.query("SELECT name, sealed FROM vault_secrets WHERE tenant = ?", (tenant,))
    for row in rows:
        aad = _aad(tenant, row["name"])
        plaintext = _security.open_sealed(old, bytes(row["sealed"]), aad)
        db.execute(
            "UPDATE vault_secrets SET sealed = ?, updated_at = ? WHERE tenant = ? AND name = ?",
            (_security.seal(fresh, plaintext, aad), now, tenant, row["name"]),
        )
    db.execute(
        "UPDATE vault_keys SET wrapped_key = ?, created_at = ? WHERE tenant = ?",
        (_security.wrap_data_key(keys, tenant, fresh), now, tenant),
    )
    return len(rows)


def rewrap_all(db: Database, old_keys: Keys, new_keys: Keys) -> int:
    """Master-key rotation: unwrap every tenant data key with the old KEK, wrap with the new one."""
    rows = db.query("SELECT tenant, wrapped_key FROM vault_keys")
    for row in rows:
        dek = _security.unwrap_data_key(old_keys, row["tenant"], bytes(row["wrapped_key"]))
        db.execute(
            "UPDATE vault_keys SET wrapped_key = ? WHERE tenant = ?",
            (_security.wrap_data_key(new_keys, row["tenant"], dek), row["tenant"]),
        )
    return len(rows)
