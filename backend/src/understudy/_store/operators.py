"""Operator tokens (only SHA-256 digests of them are stored) and per-tenant settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from understudy._store._db import Database, Row


@dataclass(frozen=True)
class OperatorToken:
    token_id: str
    name: str
    created_at: float
    revoked_at: float | None


def add_token(db: Database, *, digest: str, token_id: str, name: str, now: float) -> None:
    db.execute(
        "INSERT INTO operator_tokens (digest, token_id, name, created_at) VALUES (?, ?, ?, ?)",
        (digest, token_id, name, now),
    )


def token_by_digest(db: Database, digest: str) -> OperatorToken | None:
    row = db.one("SELECT * FROM operator_tokens WHERE digest = ?", (digest,))
    return _token(row) if row is not None else None


def any_active(db: Database) -> bool:
    """Whether at least one unrevoked operator token exists (else the operator API is off)."""
    return (
        db.one("SELECT 1 AS one FROM operator_tokens WHERE revoked_at IS NULL LIMIT 1") is not None
    )


def revoke_token(db: Database, token_id: str, now: float) -> bool:
    return (
        db.execute(
            "UPDATE operator_tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL",
            (now, token_id),
        )
        == 1
    )


def list_tokens(db: Database) -> list[OperatorToken]:
    return [_token(r) for r in db.query("SELECT * FROM operator_tokens ORDER BY created_at")]


def _token(row: Row) -> OperatorToken:
    return OperatorToken(row["token_id"], row["name"], row["created_at"], row["revoked_at"])


def unattended_flag(db: Database, tenant: str) -> bool:
    row = db.one("SELECT unattended_enabled FROM tenant_settings WHERE tenant = ?", (tenant,))
    return row is not None and bool(row["unattended_enabled"])


def set_unattended_flag(db: Database, tenant: str, enabled: bool, now: float) -> None:
    db.execute(
        "INSERT INTO tenant_settings (tenant, unattended_enabled, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (tenant) DO UPDATE SET unattended_enabled = excluded.unattended_enabled, "
        "updated_at = excluded.updated_at",
        (tenant, int(enabled), now),
    )
