"""`CredentialRows`: the SQL of stored credentials and customer data keys.

Only sealed bytes pass through here: encryption and decryption live in
`synthetic_users._safety._credentials`, which is the only caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from synthetic_users._store._errors import NotFound

if TYPE_CHECKING:
    from synthetic_users._store._db import Database, Row


class CredentialNotFound(NotFound):
    """No such credential for this customer."""


@dataclass(frozen=True)
class CredentialRecord:
    """A stored credential without its password (which only `sealed_password` returns)."""

    credential_id: str
    customer_id: str
    name: str
    username: str
    origin: str | None
    created_at: float

    @classmethod
    def from_row(cls, row: Row) -> CredentialRecord:
        return cls(
            row["credential_id"],
            row["customer_id"],
            row["name"],
            row["username"],
            row["origin"],
            row["created_at"],
        )


_COLUMNS = "credential_id, customer_id, name, username, origin, created_at"


class CredentialRows:
    """The `credentials` and `customer_keys` tables (migration 2)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def wrapped_key(self, customer_id: str) -> bytes | None:
        row = self._db.one(
            "SELECT wrapped_key FROM customer_keys WHERE customer_id = ?", (customer_id,)
        )
        return None if row is None else bytes(row["wrapped_key"])

    def add_wrapped_key(self, customer_id: str, wrapped: bytes, now: float) -> bytes:
        """Keep `wrapped` as the customer's key unless another writer won; the key kept."""
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO customers (customer_id, created_at) VALUES (?, ?)",
                (customer_id, now),
            )
            conn.execute(
                "INSERT OR IGNORE INTO customer_keys (customer_id, wrapped_key, created_at) "
                "VALUES (?, ?, ?)",
                (customer_id, wrapped, now),
            )
        kept = self.wrapped_key(customer_id)
        assert kept is not None  # noqa: S101 - inserted above, never deleted
        return kept

    def insert(self, record: CredentialRecord, sealed_password: bytes) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                f"INSERT INTO credentials ({_COLUMNS}, sealed_password) "  # noqa: S608
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    record.credential_id,
                    record.customer_id,
                    record.name,
                    record.username,
                    record.origin,
                    record.created_at,
                    sealed_password,
                ),
            )

    def get(self, customer_id: str, credential_id: str) -> CredentialRecord:
        """Raises `CredentialNotFound`."""
        row = self._db.one(
            f"SELECT {_COLUMNS} FROM credentials "  # noqa: S608
            "WHERE credential_id = ? AND customer_id = ?",
            (credential_id, customer_id),
        )
        if row is None:
            raise CredentialNotFound(credential_id)
        return CredentialRecord.from_row(row)

    def sealed_password(self, customer_id: str, credential_id: str) -> bytes:
        """Raises `CredentialNotFound`."""
        row = self._db.one(
            "SELECT sealed_password FROM credentials WHERE credential_id = ? AND customer_id = ?",
            (credential_id, customer_id),
        )
        if row is None:
            raise CredentialNotFound(credential_id)
        return bytes(row["sealed_password"])

    def page(self, customer_id: str, limit: int, after: tuple[float, str] | None) -> list[Any]:
        """Up to `limit` + 1 credentials, newest first, after the (created_at, id) `after`."""
        sql = f"SELECT {_COLUMNS} FROM credentials WHERE customer_id = ?"  # noqa: S608
        params: tuple[Any, ...] = (customer_id,)
        if after is not None:
            sql += " AND (created_at < ? OR (created_at = ? AND credential_id < ?))"
            params = (*params, after[0], after[0], after[1])
        sql += " ORDER BY created_at DESC, credential_id DESC LIMIT ?"
        return [CredentialRecord.from_row(row) for row in self._db.query(sql, (*params, limit + 1))]

    def delete(self, customer_id: str, credential_id: str) -> None:
        """Raises `CredentialNotFound`."""
        changed = self._db.execute(
            "DELETE FROM credentials WHERE credential_id = ? AND customer_id = ?",
            (credential_id, customer_id),
        )
        if not changed:
            raise CredentialNotFound(credential_id)
