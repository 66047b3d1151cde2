"""Enrolled devices: connection, liveness, revocation and the capacity they offer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.backend.unit.store.conftest import add_device, add_session

if TYPE_CHECKING:
    from understudy._store import Database


def _connect(db: Database, device_id: str, now: float = 1.0) -> int | None:
    return db.storage.repos.devices.connected(
        "acme",
        device_id,
        now=now,
        browser_epoch="epoch-1",
        protocol_versions=[1, 2],
        capabilities=["safe_write_v2"],
        local_policy={"mode": "any"},
    )


def test_each_hello_raises_the_connection_epoch_and_records_what_the_device_said(
    db: Database,
) -> None:
    add_device(db)
    assert [_connect(db, "laptop-1"), _connect(db, "laptop-1")] == [1, 2]
    device = db.storage.repos.devices.get("acme", "laptop-1")
    assert device is not None
    assert (device.online, device.connection_epoch, device.browser_epoch) == (True, 2, "epoch-1")
    assert device.protocol_versions == [1, 2]
    assert device.local_policy == {"mode": "any"}


def test_a_revoked_device_is_offline_and_left_out_of_the_tenant_devices(db: Database) -> None:
    add_device(db, "laptop-1")
    add_device(db, "laptop-2")
    _connect(db, "laptop-1")
    assert db.storage.repos.devices.revoke("acme", "laptop-1", now=5.0) is True
    assert db.storage.repos.devices.revoke("acme", "laptop-1", now=6.0) is False  # once
    assert [d.device_id for d in db.storage.repos.devices.of_tenant("acme")] == ["laptop-2"]
    everyone = db.storage.repos.devices.of_tenant("acme", include_revoked=True)
    assert [(d.device_id, d.online, d.revoked_at) for d in everyone] == [
        ("laptop-1", False, 5.0),
        ("laptop-2", False, None),
    ]


def test_online_capacity_counts_online_devices_and_the_tabs_their_sessions_hold(
    db: Database,
) -> None:
    for name in ("laptop-1", "laptop-2", "laptop-3"):
        add_device(db, name)
        _connect(db, name)
    db.storage.repos.devices.offline("acme", "laptop-3")
    add_session(db, device_id="laptop-1", capacity_held=1)
    add_session(db, device_id="laptop-1", capacity_held=1)
    add_session(db, device_id="laptop-2", capacity_held=0)
    add_session(db, device_id="laptop-3", capacity_held=1)  # its device is offline
    assert db.storage.repos.devices.online_capacity() == (2, 2)


def test_seen_brings_a_device_online_and_assignment_is_recorded(db: Database) -> None:
    add_device(db)
    db.storage.repos.devices.seen("acme", "laptop-1", now=9.0)
    db.storage.repos.devices.assigned("acme", "laptop-1", now=10.0)
    device = db.storage.repos.devices.get("acme", "laptop-1")
    assert device is not None
    assert (device.online, device.last_seen_at, device.last_assigned_at) == (True, 9.0, 10.0)


def test_a_rotated_credential_finds_the_device_and_the_old_one_does_not(db: Database) -> None:
    db.storage.repos.devices.add(tenant="acme", device_id="laptop-1", digest="old", now=0.0)
    assert db.storage.repos.devices.rotate_credential("acme", "laptop-1", "new") is True
    assert db.storage.repos.devices.by_digest("old") is None
    found = db.storage.repos.devices.by_digest("new")
    assert found is not None and found.device_id == "laptop-1"
    assert db.storage.repos.devices.rotate_credential("acme", "nobody", "x") is False
