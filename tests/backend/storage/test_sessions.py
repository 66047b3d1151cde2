"""Sessions: creation, lookups, every named change, deadlines and listings."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from understudy._store import ConflictError

from .conftest import new_session

if TYPE_CHECKING:
    from understudy._store._ports import Storage


def test_inserted_session_reads_back_with_defaults(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session(idempotency_key="idem", fingerprint="f"))
    with storage.read() as r:
        row = r.sessions.require("s1")
    assert row.allowed_origins == ["https://example.com"]
    assert row.capacity_held is True
    assert (row.end_intent, row.tab_id, row.browser_epoch, row.ended_at) == (None, None, None, None)
    assert (row.command_count, row.last_command_at, row.grace_deadline) == (0, None, None)
    assert (row.idempotency_key, row.fingerprint, row.provision_deadline) == ("idem", "f", 130.0)


def test_require_raises_lookup_error_and_get_returns_none_for_a_missing_session(
    storage: Storage,
) -> None:
    with storage.read() as r:
        assert r.sessions.get("nope") is None
        with pytest.raises(LookupError):
            r.sessions.require("nope")


def test_session_id_is_unique(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s1"))
    with pytest.raises(ConflictError), storage.transaction() as tx:
        tx.sessions.insert(new_session("s1", tenant="beta"))


def test_idempotency_key_is_unique_per_tenant_only_when_set(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s1", idempotency_key="k"))
        tx.sessions.insert(new_session("s2", idempotency_key="k", tenant="beta"))
        tx.sessions.insert(new_session("s3"))
        tx.sessions.insert(new_session("s4"))  # two without a key do not conflict
    with pytest.raises(ConflictError), storage.transaction() as tx:
        tx.sessions.insert(new_session("s5", idempotency_key="k"))
    with storage.read() as r:
        found = r.sessions.by_idempotency_key("acme", "k")
        assert found is not None and found.session_id == "s1"
        assert r.sessions.by_idempotency_key("acme", "other") is None
        assert r.sessions.get("s5") is None


def test_conflict_rolls_back_the_whole_transaction(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s1"))
    with pytest.raises(ConflictError), storage.transaction() as tx:
        tx.sessions.insert(new_session("s2"))
        tx.sessions.insert(new_session("s1"))
    with storage.read() as r:
        assert r.sessions.get("s2") is None


def test_lookup_by_lease(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s1"))
    with storage.read() as r:
        row = r.sessions.by_lease("lease-s1")
        assert row is not None and row.session_id == "s1"
        assert r.sessions.by_lease("lease-none") is None


def test_changes_to_a_missing_session_return_none(storage: Storage) -> None:
    with storage.transaction() as tx:
        assert tx.sessions.release_capacity("nope") is None
        assert tx.sessions.record_command("nope", now=1.0, idle_ttl_s=5.0) is None


def test_record_command_counts_and_caps_idle_expiry_at_the_hard_expiry(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session(expires_at=1000.0, idle_expires_at=400.0))
        first = tx.sessions.record_command("s1", now=300.0, idle_ttl_s=300.0)
        assert first is not None
        assert (first.command_count, first.last_command_at, first.idle_expires_at) == (
            1,
            300.0,
            600.0,
        )
        second = tx.sessions.record_command("s1", now=900.0, idle_ttl_s=300.0)
        assert second is not None
        assert (second.command_count, second.idle_expires_at) == (2, 1000.0)
    with storage.read() as r:
        assert r.sessions.require("s1") == second


def test_provisioned_records_the_tab_and_clears_deadlines(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session())
        tx.sessions.start_grace("s1", grace_deadline=150.0)
        row = tx.sessions.provisioned("s1", status="connected", tab_id=7, browser_epoch="be1")
    assert row is not None
    assert (row.status, row.tab_id, row.browser_epoch) == ("connected", 7, "be1")
    assert (row.provision_deadline, row.grace_deadline) == (None, None)


def test_provisioned_without_a_tab_id_stores_none(storage: Storage) -> None:
    # An acknowledgement may omit the tab id; the row says so rather than refusing the turn.
    with storage.transaction() as tx:
        tx.sessions.insert(new_session())
        row = tx.sessions.provisioned("s1", status="connected", tab_id=None, browser_epoch="be2")
    assert row is not None
    assert (row.status, row.tab_id, row.browser_epoch) == ("connected", None, "be2")


def test_mark_connected_clears_only_the_grace_deadline(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session(status="recovering"))
        tx.sessions.start_grace("s1", grace_deadline=150.0)
        row = tx.sessions.mark_connected("s1", status="connected")
    assert row is not None
    assert (row.status, row.grace_deadline, row.provision_deadline) == ("connected", None, 130.0)


def test_attached_takes_the_lease_and_holds_capacity(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(
            new_session(
                mode="attended",
                status="awaiting_attach",
                device_id=None,
                lease_id=None,
                lease_epoch=0,
                provision_deadline=None,
                capacity_held=False,
            )
        )
        row = tx.sessions.attached(
            "s1",
            status="connected",
            device_id="d9",
            lease_id="L9",
            lease_epoch=1,
            tab_id=3,
            browser_epoch="be",
        )
    assert row is not None
    assert (row.device_id, row.lease_id, row.lease_epoch, row.tab_id) == ("d9", "L9", 1, 3)
    assert (row.status, row.browser_epoch, row.capacity_held) == ("connected", "be", True)


def test_rebind_epoch_blocks_writes_and_moves_only_when_a_status_is_given(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session(status="connected"))
        moved = tx.sessions.rebind_epoch(
            "s1",
            lease_epoch=2,
            browser_epoch="be2",
            writes_blocked_reason="browser_epoch_changed",
            grace_deadline=160.0,
            status="recovering",
        )
        assert moved is not None
        assert (moved.status, moved.lease_epoch, moved.browser_epoch) == ("recovering", 2, "be2")
        assert (moved.writes_blocked_reason, moved.grace_deadline) == (
            "browser_epoch_changed",
            160.0,
        )
        kept = tx.sessions.rebind_epoch(
            "s1",
            lease_epoch=3,
            browser_epoch="be3",
            writes_blocked_reason="browser_epoch_changed",
            grace_deadline=160.0,
        )
    assert kept is not None and (kept.status, kept.lease_epoch) == ("recovering", 3)


def test_start_grace_sets_the_deadline_with_or_without_a_move(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session(status="connected"))
        only = tx.sessions.start_grace("s1", grace_deadline=170.0)
        assert only is not None and (only.status, only.grace_deadline) == ("connected", 170.0)
        moved = tx.sessions.start_grace("s1", grace_deadline=180.0, status="recovering")
    assert moved is not None and (moved.status, moved.grace_deadline) == ("recovering", 180.0)


def test_block_writes_names_the_reason_and_command(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session(status="connected"))
        row = tx.sessions.block_writes("s1", reason="unknown_outcome", command_id="c7")
    assert row is not None
    assert (row.writes_blocked_reason, row.writes_blocked_command) == ("unknown_outcome", "c7")


def test_close_then_finish_releases_capacity_and_clears_the_deadline(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session(status="connected"))
        closing = tx.sessions.begin_close(
            "s1", status="closing", end_intent="closed", end_reason="deleted", grace_deadline=190.0
        )
        assert closing is not None
        assert (closing.status, closing.end_intent, closing.end_reason) == (
            "closing",
            "closed",
            "deleted",
        )
        assert (closing.grace_deadline, closing.provision_deadline) == (190.0, None)
        assert closing.capacity_held is True
        done = tx.sessions.finish("s1", status="closed", ended_at=195.0)
    assert done is not None
    assert (done.status, done.ended_at, done.capacity_held, done.grace_deadline) == (
        "closed",
        195.0,
        False,
        None,
    )
    assert done.end_reason == "deleted"


def test_expire_records_the_end(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session(status="connected", capacity_held=False))
        row = tx.sessions.expire("s1", status="expired", ended_at=1000.0, reason="hard_ttl")
    assert row is not None
    assert (row.status, row.ended_at, row.end_reason) == ("expired", 1000.0, "hard_ttl")


def test_lose_releases_capacity_or_keeps_it_until_a_deadline(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s1", status="provisioning"))
        tx.sessions.insert(new_session("s2", status="provisioning"))
        released = tx.sessions.lose(
            "s1", status="lost", ended_at=140.0, reason="device_lost", keep_capacity_until=None
        )
        kept = tx.sessions.lose(
            "s2", status="lost", ended_at=140.0, reason="device_lost", keep_capacity_until=200.0
        )
    assert released is not None and kept is not None
    assert (released.capacity_held, released.grace_deadline) == (False, None)
    assert (kept.capacity_held, kept.grace_deadline) == (True, 200.0)
    for row in (released, kept):
        assert (row.status, row.ended_at, row.end_reason, row.provision_deadline) == (
            "lost",
            140.0,
            "device_lost",
            None,
        )


def test_holding_capacity_and_release(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("s2", created_at=50.0))
        tx.sessions.insert(new_session("s1", created_at=60.0))
        tx.sessions.insert(new_session("s3", device_id="d2"))
        tx.sessions.insert(new_session("s4", capacity_held=False))
    with storage.read() as r:
        assert [s.session_id for s in r.sessions.holding_capacity("acme", "d1")] == ["s2", "s1"]
    with storage.transaction() as tx:
        released = tx.sessions.release_capacity("s2")
        assert released is not None and not released.capacity_held
    with storage.read() as r:
        assert [s.session_id for s in r.sessions.holding_capacity("acme", "d1")] == ["s1"]


def test_unsettled_listing_counts_and_tenants(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("live", status="connected", created_at=1.0))
        tx.sessions.insert(new_session("held", status="lost", created_at=2.0))
        tx.sessions.insert(
            new_session("gone", status="closed", created_at=3.0, capacity_held=False)
        )
        tx.sessions.insert(new_session("other", tenant="beta", status="closing", created_at=4.0))
    with storage.read() as r:
        assert {s.session_id for s in r.sessions.unsettled("acme")} == {"live", "held"}
        assert [s.session_id for s in r.sessions.listing()] == ["live", "other"]
        assert [s.session_id for s in r.sessions.listing(ended=True, tenant="acme")] == [
            "live",
            "held",
            "gone",
        ]
        assert [s.session_id for s in r.sessions.listing(tenant="beta")] == ["other"]
        assert r.sessions.counts_by_status() == {"connected": 1, "closing": 1}
        assert r.sessions.tenants_with_unsettled() == ["acme", "beta"]


def test_next_deadline_is_the_earliest_of_every_kind(storage: Storage) -> None:
    with storage.read() as r:
        assert r.sessions.next_deadline("acme", offline_after_s=75.0) is None
    with storage.transaction() as tx:
        tx.sessions.insert(
            new_session("live", status="connected", expires_at=500.0, idle_expires_at=450.0)
        )
    with storage.read() as r:
        assert r.sessions.next_deadline("acme", offline_after_s=75.0) == 450.0
    with storage.transaction() as tx:
        tx.sessions.insert(
            new_session("hard", status="connected", expires_at=420.0, idle_expires_at=430.0)
        )
    with storage.read() as r:
        assert r.sessions.next_deadline("acme", offline_after_s=75.0) == 420.0
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("prov", status="provisioning", provision_deadline=300.0))
    with storage.read() as r:
        assert r.sessions.next_deadline("acme", offline_after_s=75.0) == 300.0
    with storage.transaction() as tx:
        tx.sessions.insert(new_session("lost", status="lost"))
        tx.sessions.start_grace("lost", grace_deadline=250.0)
    with storage.read() as r:
        assert r.sessions.next_deadline("acme", offline_after_s=75.0) == 250.0
    with storage.transaction() as tx:
        tx.devices.add(tenant="acme", device_id="d1", digest="x", now=1.0)
        tx.devices.seen("acme", "d1", 100.0)
        tx.devices.add(tenant="acme", device_id="d2", digest="y", now=1.0)
        tx.devices.seen("acme", "d2", 10.0)
        tx.devices.offline("acme", "d2")  # an offline device has no heartbeat deadline
    with storage.read() as r:
        assert r.sessions.next_deadline("acme", offline_after_s=75.0) == 175.0
        assert r.sessions.next_deadline("beta", offline_after_s=75.0) is None


def test_online_capacity_counts_held_tabs_on_online_devices(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.devices.add(tenant="acme", device_id="d1", digest="x", now=1.0)
        tx.devices.add(tenant="acme", device_id="d2", digest="y", now=1.0)
        tx.devices.seen("acme", "d1", 5.0)
        tx.sessions.insert(new_session("a"))
        tx.sessions.insert(new_session("b"))
        tx.sessions.insert(new_session("c", capacity_held=False))
        tx.sessions.insert(new_session("d", device_id="d2"))
    with storage.read() as r:
        assert r.devices.online_capacity() == (1, 2)
