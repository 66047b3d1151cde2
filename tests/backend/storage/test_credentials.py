"""API keys, tenants and devices."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from understudy._store import ConflictError

if TYPE_CHECKING:
    from understudy._store._ports import Storage


def test_api_key_is_found_by_digest_and_revoked_once(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.api_keys.add(digest="h1", key_id="k1", tenant="acme", actor="bot", now=5.0)
    with storage.read() as r:
        key = r.api_keys.by_digest("h1")
        assert key is not None
        assert (key.key_id, key.tenant, key.actor, key.created_at, key.revoked_at) == (
            "k1",
            "acme",
            "bot",
            5.0,
            None,
        )
        assert r.api_keys.by_digest("nope") is None
    with storage.transaction() as tx:
        assert tx.api_keys.revoke("k1", 9.0) is True
        assert tx.api_keys.revoke("k1", 10.0) is False, "already revoked"
        assert tx.api_keys.revoke("missing", 10.0) is False
    with storage.read() as r:
        revoked = r.api_keys.by_digest("h1")
        assert revoked is not None and revoked.revoked_at == 9.0


@pytest.mark.parametrize(("digest", "key_id"), [("h1", "other"), ("other", "k1")])
def test_api_key_digest_and_id_are_unique(storage: Storage, digest: str, key_id: str) -> None:
    with storage.transaction() as tx:
        tx.api_keys.add(digest="h1", key_id="k1", tenant="acme", actor="bot", now=1.0)
    with pytest.raises(ConflictError), storage.transaction() as tx:
        tx.api_keys.add(digest=digest, key_id=key_id, tenant="beta", actor="x", now=2.0)
    with storage.read() as r:
        assert [k.key_id for k in r.api_keys.all()] == ["k1"]


def test_api_keys_list_in_tenant_actor_creation_order(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.api_keys.add(digest="a", key_id="k3", tenant="beta", actor="a", now=1.0)
        tx.api_keys.add(digest="b", key_id="k2", tenant="acme", actor="z", now=1.0)
        tx.api_keys.add(digest="c", key_id="k1", tenant="acme", actor="a", now=2.0)
        tx.api_keys.add(digest="d", key_id="k0", tenant="acme", actor="a", now=1.0)
    with storage.read() as r:
        assert [k.key_id for k in r.api_keys.all()] == ["k0", "k1", "k2", "k3"]


def test_tenants_are_those_with_a_key_or_a_device_sorted_once(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.api_keys.add(digest="a", key_id="k1", tenant="zeta", actor="a", now=1.0)
        tx.api_keys.add(digest="b", key_id="k2", tenant="acme", actor="a", now=1.0)
        tx.devices.add(tenant="acme", device_id="d1", digest="dd1", now=1.0)
        tx.devices.add(tenant="mid", device_id="d1", digest="dd2", now=1.0)
    with storage.read() as r:
        assert r.api_keys.tenants() == ["acme", "mid", "zeta"]


def test_enrolled_device_starts_offline_with_empty_state(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.devices.add(tenant="acme", device_id="d1", digest="dd1", now=3.0)
    with storage.read() as r:
        device = r.devices.get("acme", "d1")
        assert device is not None
        assert device.enrolled_at == 3.0
        assert (device.online, device.revoked_at, device.last_seen_at) == (False, None, None)
        assert (device.connection_epoch, device.last_assigned_at) == (0, 0)
        assert (device.protocol_versions, device.capabilities, device.local_policy) == (
            [],
            [],
            None,
        )
        assert r.devices.by_digest("dd1") == device
        assert r.devices.get("beta", "d1") is None


@pytest.mark.parametrize(
    ("tenant", "device_id", "digest"), [("acme", "d1", "x"), ("b", "d2", "dd1")]
)
def test_device_id_and_credential_digest_are_unique(
    storage: Storage, tenant: str, device_id: str, digest: str
) -> None:
    with storage.transaction() as tx:
        tx.devices.add(tenant="acme", device_id="d1", digest="dd1", now=1.0)
    with pytest.raises(ConflictError), storage.transaction() as tx:
        tx.devices.add(tenant=tenant, device_id=device_id, digest=digest, now=2.0)


def test_ensure_device_creates_then_rekeys_without_a_conflict(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.devices.ensure(tenant="acme", device_id="d1", digest="one", now=1.0)
        tx.devices.ensure(tenant="acme", device_id="d1", digest="two", now=5.0)
    with storage.read() as r:
        device = r.devices.by_digest("two")
        assert device is not None and device.enrolled_at == 1.0
        assert r.devices.by_digest("one") is None


def test_rotating_a_credential_works_only_for_an_unrevoked_device(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.devices.add(tenant="acme", device_id="d1", digest="one", now=1.0)
        assert tx.devices.rotate_credential("acme", "d1", "two") is True
        assert tx.devices.rotate_credential("acme", "missing", "three") is False
        assert tx.devices.revoke("acme", "d1", 2.0) is True
        assert tx.devices.rotate_credential("acme", "d1", "four") is False
    with storage.read() as r:
        assert r.devices.by_digest("two") is not None


def test_hello_increments_the_connection_epoch_and_records_what_the_device_said(
    storage: Storage,
) -> None:
    with storage.transaction() as tx:
        tx.devices.add(tenant="acme", device_id="d1", digest="dd1", now=1.0)
        hello = {
            "browser_epoch": "be1",
            "protocol_versions": [1, 2],
            "capabilities": ["tabs"],
            "local_policy": {"allow": True},
        }
        assert tx.devices.connected("acme", "d1", now=10.0, **hello) == 1  # type: ignore[arg-type]
        assert tx.devices.connected("acme", "d1", now=11.0, **hello) == 2  # type: ignore[arg-type]
        assert tx.devices.connected("acme", "nope", now=11.0, **hello) is None  # type: ignore[arg-type]
    with storage.read() as r:
        device = r.devices.get("acme", "d1")
        assert device is not None
        assert (device.online, device.last_seen_at, device.browser_epoch) == (True, 11.0, "be1")
        assert device.protocol_versions == [1, 2]
        assert device.capabilities == ["tabs"]
        assert device.local_policy == {"allow": True}


def test_seen_offline_assigned_and_revoke_change_only_their_columns(storage: Storage) -> None:
    with storage.transaction() as tx:
        tx.devices.add(tenant="acme", device_id="d1", digest="dd1", now=1.0)
        tx.devices.seen("acme", "d1", 20.0)
        tx.devices.assigned("acme", "d1", 21.0)
    with storage.read() as r:
        device = r.devices.get("acme", "d1")
        assert device is not None
        assert (device.online, device.last_seen_at, device.last_assigned_at) == (True, 20.0, 21.0)
    with storage.transaction() as tx:
        tx.devices.offline("acme", "d1")
    with storage.read() as r:
        device = r.devices.get("acme", "d1")
        assert device is not None and not device.online and device.last_seen_at == 20.0
    with storage.transaction() as tx:
        tx.devices.seen("acme", "d1", 30.0)
        assert tx.devices.revoke("acme", "d1", 31.0) is True
        assert tx.devices.revoke("acme", "d1", 32.0) is False
    with storage.read() as r:
        device = r.devices.get("acme", "d1")
        assert device is not None and device.revoked_at == 31.0 and not device.online


def test_tenant_devices_exclude_revoked_unless_asked_and_sort_by_id(storage: Storage) -> None:
    with storage.transaction() as tx:
        for device_id, digest in (("d2", "x2"), ("d1", "x1"), ("d3", "x3")):
            tx.devices.add(tenant="acme", device_id=device_id, digest=digest, now=1.0)
        tx.devices.add(tenant="beta", device_id="d0", digest="x0", now=1.0)
        tx.devices.revoke("acme", "d3", 2.0)
    with storage.read() as r:
        assert [d.device_id for d in r.devices.of_tenant("acme")] == ["d1", "d2"]
        every = r.devices.of_tenant("acme", include_revoked=True)
        assert [d.device_id for d in every] == ["d1", "d2", "d3"]
        assert [(d.tenant, d.device_id) for d in r.devices.all()] == [
            ("acme", "d1"),
            ("acme", "d2"),
            ("acme", "d3"),
            ("beta", "d0"),
        ]
