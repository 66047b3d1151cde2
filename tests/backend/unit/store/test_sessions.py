"""Session rows: capacity holders, deadlines to watch, listings and counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from tests.backend.unit.store.conftest import add_device, add_session

if TYPE_CHECKING:
    from understudy._store import Database


def test_an_inserted_session_reads_back_with_its_origins(db: Database) -> None:
    sid = add_session(db, allowed_origins=["https://a.example", "https://b.example"])
    row = db.storage.repos.sessions.require(sid)
    assert (row.tenant, row.status, row.capacity_held) == ("acme", "connected", False)
    assert row.allowed_origins == ["https://a.example", "https://b.example"]
    with pytest.raises(LookupError):
        db.storage.repos.sessions.require("missing")


def test_capacity_is_held_by_the_device_sessions_that_reserve_it(db: Database) -> None:
    first = add_session(db, device_id="laptop-1", capacity_held=1, created_at=1.0)
    second = add_session(db, device_id="laptop-1", capacity_held=1, created_at=2.0)
    add_session(db, device_id="laptop-1", capacity_held=0, status="closed")
    add_session(db, device_id="laptop-2", capacity_held=1)
    add_session(db, tenant="globex", device_id="laptop-1", capacity_held=1)
    holding = db.storage.repos.sessions.holding_capacity("acme", "laptop-1")
    assert [r.session_id for r in holding] == [first, second]


def test_unsettled_sessions_are_the_unfinished_and_the_terminal_still_holding_a_tab(
    db: Database,
) -> None:
    live = add_session(db)
    held = add_session(db, status="closed", capacity_held=1)
    add_session(db, status="closed")
    add_session(db, status="expired")
    add_session(db, tenant="globex")
    assert {r.session_id for r in db.storage.repos.sessions.unsettled("acme")} == {live, held}
    assert sorted(db.storage.repos.sessions.tenants_with_unsettled()) == ["acme", "globex"]


def test_the_next_deadline_is_the_earliest_of_every_kind(db: Database) -> None:
    assert db.storage.repos.sessions.next_deadline("acme", offline_after_s=75) is None
    add_session(db, expires_at=500.0, idle_expires_at=400.0)
    assert db.storage.repos.sessions.next_deadline("acme", offline_after_s=75) == 400.0
    add_session(db, status="provisioning", provision_deadline=300.0)
    assert db.storage.repos.sessions.next_deadline("acme", offline_after_s=75) == 300.0
    add_session(db, status="closed", capacity_held=1, grace_deadline=200.0)
    assert db.storage.repos.sessions.next_deadline("acme", offline_after_s=75) == 200.0
    add_device(db, "laptop-1")
    db.storage.repos.devices.seen("acme", "laptop-1", now=100.0)
    assert db.storage.repos.sessions.next_deadline("acme", offline_after_s=75) == 175.0
    # Another tenant's deadlines are not this tenant's.
    add_session(db, tenant="globex", expires_at=1.0, idle_expires_at=1.0)
    assert db.storage.repos.sessions.next_deadline("acme", offline_after_s=75) == 175.0


def test_a_terminal_session_has_no_expiry_deadline(db: Database) -> None:
    add_session(db, status="closed", expires_at=1.0, idle_expires_at=1.0)
    assert db.storage.repos.sessions.next_deadline("acme", offline_after_s=75) is None


def test_listing_shows_unfinished_sessions_or_every_one_oldest_first(db: Database) -> None:
    old = add_session(db, created_at=1.0)
    ended = add_session(db, created_at=2.0, status="expired")
    other = add_session(db, created_at=3.0, tenant="globex")
    assert [r.session_id for r in db.storage.repos.sessions.listing()] == [old, other]
    assert [r.session_id for r in db.storage.repos.sessions.listing(ended=True)] == [
        old,
        ended,
        other,
    ]
    assert [r.session_id for r in db.storage.repos.sessions.listing(tenant="globex")] == [other]


def test_counts_by_status_leave_out_terminal_sessions(db: Database) -> None:
    add_session(db)
    add_session(db)
    add_session(db, status="recovering")
    add_session(db, status="lost")
    assert db.storage.repos.sessions.counts_by_status() == {"connected": 2, "recovering": 1}


def test_a_session_is_found_by_its_lease_and_its_idempotency_key(db: Database) -> None:
    sid = add_session(db, lease_id="lease-1", idempotency_key="k1")
    assert db.storage.repos.sessions.by_lease("lease-1").session_id == sid  # type: ignore[union-attr]
    assert db.storage.repos.sessions.by_idempotency_key("acme", "k1").session_id == sid  # type: ignore[union-attr]
    assert db.storage.repos.sessions.by_idempotency_key("globex", "k1") is None
    assert db.storage.repos.sessions.by_lease("lease-2") is None
