"""Single-use ticket ids: the target actor consumes a JTI atomically, once."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from understudy._store._db import Database


def consume_jti(db: Database, jti: str, expires_at: float, now: float) -> bool:
    """True the first time `jti` is seen; False on any replay. Forgets JTIs after they expire."""
    db.execute("DELETE FROM ticket_jtis WHERE expires_at < ?", (now - 60,))
    return (
        db.execute(
            "INSERT INTO ticket_jtis (jti, expires_at) VALUES (?, ?) ON CONFLICT (jti) DO NOTHING",
            (jti, expires_at),
        )
        == 1
    )
