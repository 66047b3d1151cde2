"""Single-use ticket ids."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from understudy._store import Database


def test_a_jti_is_consumed_once(db: Database) -> None:
    assert db.storage.repos.tickets.consume("j1", expires_at=60.0, now=0.0) is True
    assert db.storage.repos.tickets.consume("j1", expires_at=60.0, now=1.0) is False
    assert db.storage.repos.tickets.consume("j2", expires_at=60.0, now=1.0) is True


def test_a_replay_is_refused_until_well_after_expiry(db: Database) -> None:
    assert db.storage.repos.tickets.consume("j1", expires_at=60.0, now=0.0)
    # Still remembered a minute past its expiry, when the ticket itself is refused anyway.
    assert db.storage.repos.tickets.consume("j1", expires_at=60.0, now=119.0) is False


def test_expired_jtis_are_forgotten(db: Database) -> None:
    assert db.storage.repos.tickets.consume("old", expires_at=60.0, now=0.0)
    assert db.storage.repos.tickets.consume("new", expires_at=200.0, now=121.0)
    rows = db.query("SELECT jti FROM ticket_jtis ORDER BY jti")
    assert [r["jti"] for r in rows] == ["new"]
