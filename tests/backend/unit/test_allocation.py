"""Allocation policy without a database: which device a new unattended session goes to."""

from __future__ import annotations

from typing import Any

from understudy._allocation import allocate
from understudy._problems import ProblemError
from understudy._store.credentials import Device
from understudy._store.sessions import SessionRow

SHOP = "https://shop.example"
BANK = "https://bank.example"


def _device(name: str, *, assigned: float = 0.0, **extra: Any) -> Device:
    values: dict[str, Any] = {
        "tenant": "acme",
        "device_id": name,
        "enrolled_at": 0.0,
        "revoked_at": None,
        "online": True,
        "last_seen_at": 0.0,
        "last_assigned_at": assigned,
        "browser_epoch": "e1",
        "connection_epoch": 1,
        "protocol_versions": [1, 2],
        "capabilities": ["safe_write_v2", "unattended_v1"],
        "local_policy": {"mode": "any"},
    }
    return Device(**(values | extra))


def _lease(device: str, origins: list[str], profile: str = "p-other") -> SessionRow:
    return SessionRow(
        session_id=f"s-{device}-{origins[0]}",
        tenant="acme",
        actor="bot",
        mode="unattended",
        status="connected",
        end_intent=None,
        device_id=device,
        lease_id="l",
        lease_epoch=1,
        browser_epoch="e1",
        tab_id=1,
        allowed_origins=origins,
        profile_hash=profile,
        idempotency_key=None,
        fingerprint=None,
        created_at=0.0,
        expires_at=1.0,
        idle_expires_at=1.0,
        last_command_at=None,
        command_count=0,
        writes_blocked_reason=None,
        writes_blocked_command=None,
        provision_deadline=None,
        grace_deadline=None,
        capacity_held=True,
        ended_at=None,
        end_reason=None,
    )


def _allocate(
    devices: list[Device],
    leases: dict[str, list[SessionRow]] | None = None,
    *,
    device_id: str | None = None,
    origins: list[str] | None = None,
    profile: str = "p-new",
) -> tuple[str | None, list[str]]:
    refusals: list[str] = []
    try:
        chosen = allocate(
            devices,
            lambda d: (leases or {}).get(d, []),
            device_id=device_id,
            origins=origins or [SHOP],
            profile_hash=profile,
            refused=refusals.append,
        )
    except ProblemError as refusal:
        return refusal.code, refusals
    return chosen.device_id, refusals


def test_the_least_loaded_device_wins_and_ties_go_to_the_longest_unassigned() -> None:
    busy = {"a": [_lease("a", [BANK])]}
    assert _allocate([_device("a"), _device("b", assigned=5.0)], busy) == ("b", [])
    fresh = [_device("a", assigned=9.0), _device("b", assigned=5.0)]
    assert _allocate(fresh) == ("b", [])


def test_devices_that_cannot_run_unattended_sessions_are_never_chosen() -> None:
    old = _device("old", protocol_versions=[1])
    attended = _device("attended", capabilities=["safe_write_v2", "attended_v1"])
    offline = _device("offline", online=False)
    assert _allocate([old, attended, offline]) == ("no_device_available", ["no_device"])


def test_a_shared_origin_or_profile_on_the_only_device_is_a_conflict() -> None:
    leases = {"a": [_lease("a", [SHOP], profile="p-1")]}
    assert _allocate([_device("a")], leases) == ("origin_conflict", ["origin_conflict"])
    assert _allocate([_device("a")], leases, origins=[BANK], profile="p-1") == (
        "profile_conflict",
        ["profile_conflict"],
    )


def test_two_tabs_fill_a_device() -> None:
    full = {"a": [_lease("a", ["https://one.example"]), _lease("a", ["https://two.example"])]}
    assert _allocate([_device("a")], full) == ("capacity_exhausted", ["capacity_exhausted"])


def test_a_local_policy_that_refuses_the_origins_is_named_in_the_refusal() -> None:
    strict = _device("a", local_policy={"mode": "allowlist", "origins": [BANK]})
    assert _allocate([strict]) == ("no_device_available", ["local_policy"])
    assert _allocate([strict], device_id="a") == ("origin_conflict", [])
    assert _allocate([strict], device_id="missing") == ("device_not_found", [])
