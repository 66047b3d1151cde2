"""Single-use ticket ids: the target actor consumes a JTI atomically, once."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from understudy._store._sql import Executor

# JTIs are kept a minute past their expiry, so clock skew cannot revive one.
FORGET_AFTER_S = 60


class SqlTickets:
    """`understudy._store._ports.TicketRepository` in portable SQL."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    def consume(self, jti: str, expires_at: float, now: float) -> bool:
        """True the first time `jti` is seen; False on any replay. Forgets expired JTIs."""
        self._sql.run(
            "DELETE FROM ticket_jtis WHERE expires_at < :horizon", {"horizon": now - FORGET_AFTER_S}
        )
        fresh = self._sql.one(
            "INSERT INTO ticket_jtis (jti, expires_at) VALUES (:jti, :expires) "
            "ON CONFLICT (jti) DO NOTHING RETURNING jti",
            {"jti": jti, "expires": expires_at},
        )
        return fresh is not None
