"""Operator tokens (only SHA-256 digests of them are stored) and per-tenant settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from understudy._store._sql import Executor


@dataclass(frozen=True)
class OperatorToken:
    token_id: str
    name: str
    created_at: float
    revoked_at: float | None


class SqlOperators:
    """`understudy._store._ports.OperatorRepository` in portable SQL."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    def add_token(self, *, digest: str, token_id: str, name: str, now: float) -> None:
        """Store a token. Raises `ConflictError` when its digest or id exists already."""
        self._sql.run(
            "INSERT INTO operator_tokens (digest, token_id, name, created_at) "
            "VALUES (:digest, :token_id, :name, :now)",
            {"digest": digest, "token_id": token_id, "name": name, "now": now},
        )

    def token_by_digest(self, digest: str) -> OperatorToken | None:
        row = self._sql.one(
            "SELECT * FROM operator_tokens WHERE digest = :digest", {"digest": digest}
        )
        return _token(row) if row is not None else None

    def any_active(self) -> bool:
        """Whether at least one unrevoked operator token exists (else the operator API is off)."""
        found = self._sql.one(
            "SELECT 1 AS one FROM operator_tokens WHERE revoked_at IS NULL LIMIT 1"
        )
        return found is not None

    def revoke_token(self, token_id: str, now: float) -> bool:
        changed = self._sql.run(
            "UPDATE operator_tokens SET revoked_at = :now "
            "WHERE token_id = :token_id AND revoked_at IS NULL",
            {"now": now, "token_id": token_id},
        )
        return changed == 1

    def tokens(self) -> list[OperatorToken]:
        rows = self._sql.rows("SELECT * FROM operator_tokens ORDER BY created_at, token_id")
        return [_token(r) for r in rows]

    def unattended_flag(self, tenant: str) -> bool:
        row = self._sql.one(
            "SELECT unattended_enabled FROM tenant_settings WHERE tenant = :tenant",
            {"tenant": tenant},
        )
        return row is not None and bool(row["unattended_enabled"])

    def set_unattended_flag(self, tenant: str, enabled: bool, now: float) -> None:
        self._sql.run(
            "INSERT INTO tenant_settings (tenant, unattended_enabled, updated_at) "
            "VALUES (:tenant, :enabled, :now) ON CONFLICT (tenant) DO UPDATE SET "
            "unattended_enabled = excluded.unattended_enabled, updated_at = excluded.updated_at",
            {"tenant": tenant, "enabled": int(enabled), "now": now},
        )


def _token(row: dict[str, Any]) -> OperatorToken:
    return OperatorToken(row["token_id"], row["name"], row["created_at"], row["revoked_at"])
