"""The allocation policy on a real store: which enrolled device gets a new unattended session.

Driven through `TenantCoordinator._allocate` on a real store, without sockets: devices are
rows as their hellos left them, sessions are rows holding capacity.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

from understudy._bootstrap import build_services
from understudy._clock import ManualClock
from understudy._config import load_settings
from understudy._problems import ProblemError
from understudy._store import migrate
from understudy._store.sessions import NewSession
from understudy.generated.protocol import DEVICE_TAB_CAPACITY

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from understudy._services import Services
    from understudy.coordinator import TenantCoordinator

A = ["https://a.example"]
B = ["https://b.example"]
CAPABLE = ["safe_write_v2", "unattended_v1"]


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    settings = load_settings({"UNDERSTUDY_DATA_DIR": str(tmp_path / "data")})
    running = build_services(settings, ManualClock())
    migrate(running.db, now=0.0)  # the schema only: no actor starts, no timer is armed
    try:
        yield running
    finally:
        await running.stop()


def _device(
    s: Services,
    device_id: str,
    *,
    policy: dict[str, Any] | None = None,
    versions: tuple[int, ...] = (1, 2),
    capabilities: list[str] = CAPABLE,
    assigned_at: float = 0.0,
    online: bool = True,
) -> None:
    with s.db.transaction():
        s.db.storage.repos.devices.add(
            tenant="acme", device_id=device_id, digest=uuid.uuid4().hex, now=0.0
        )
        s.db.storage.repos.devices.connected(
            "acme",
            device_id,
            now=0.0,
            browser_epoch="epoch",
            protocol_versions=list(versions),
            capabilities=capabilities,
            local_policy=policy or {"mode": "any"},
        )
        s.db.storage.repos.devices.assigned("acme", device_id, now=assigned_at)
        if not online:
            s.db.storage.repos.devices.offline("acme", device_id)


def _holding(s: Services, device_id: str, origins: list[str], profile: str | None = None) -> None:
    with s.storage.transaction() as tx:
        tx.sessions.insert(
            NewSession(
                session_id=str(uuid.uuid4()),
                tenant="acme",
                actor="agent",
                mode="unattended",
                status="connected",
                device_id=device_id,
                allowed_origins=origins,
                profile_hash=profile,
                created_at=0.0,
                expires_at=86_400.0,
                idle_expires_at=7_200.0,
                capacity_held=True,
            )
        )


async def _allocate(
    s: Services, origins: list[str], profile: str = "p-new", device: str | None = None
) -> str:
    coordinator: TenantCoordinator = s.coordinator("acme")
    # In one of the coordinator's turns, as a create runs it (a refusal reports telemetry).
    return await coordinator._turns.run(
        lambda out, now: coordinator._allocate(device, origins, profile).device_id
    )


async def _refusal(s: Services, origins: list[str], **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(ProblemError) as caught:
        await _allocate(s, origins, **kwargs)
    return caught.value.status, caught.value.code


async def test_the_least_loaded_device_is_chosen(services: Services) -> None:
    _device(services, "laptop-1")
    _device(services, "laptop-2")
    _holding(services, "laptop-1", B)
    assert await _allocate(services, A) == "laptop-2"


async def test_among_equally_loaded_devices_the_least_recently_assigned_wins(
    services: Services,
) -> None:
    _device(services, "laptop-1", assigned_at=20.0)
    _device(services, "laptop-2", assigned_at=10.0)
    assert await _allocate(services, A) == "laptop-2"


async def test_a_tie_in_load_and_assignment_goes_to_the_first_device_id(services: Services) -> None:
    _device(services, "laptop-2")
    _device(services, "laptop-1")
    assert await _allocate(services, A) == "laptop-1"


async def test_offline_old_protocol_and_incapable_devices_are_no_candidates(
    services: Services,
) -> None:
    _device(services, "offline", online=False)
    _device(services, "v1-only", versions=(1,))
    _device(services, "attended-only", capabilities=["safe_write_v2", "attended_v1"])
    assert await _refusal(services, A) == (503, "no_device_available")
    _device(services, "laptop-9")
    assert await _allocate(services, A) == "laptop-9"


async def test_a_device_whose_local_policy_refuses_the_origins_is_skipped(
    services: Services,
) -> None:
    _device(services, "strict", policy={"mode": "allowlist", "origins": B})
    assert await _refusal(services, A) == (503, "no_device_available")
    _device(services, "open", policy={"mode": "allowlist", "origins": [*A, *B]})
    assert await _allocate(services, A) == "open"


async def test_a_named_device_whose_policy_refuses_is_an_origin_conflict(
    services: Services,
) -> None:
    _device(services, "strict", policy={"mode": "allowlist", "origins": B})
    assert await _refusal(services, A, device="strict") == (409, "origin_conflict")
    assert await _refusal(services, A, device="nobody") == (404, "device_not_found")


async def test_a_full_device_is_skipped_and_all_full_is_capacity_exhausted(
    services: Services,
) -> None:
    _device(services, "laptop-1")
    for i in range(DEVICE_TAB_CAPACITY):
        _holding(services, "laptop-1", [f"https://held{i}.example"])
    assert await _refusal(services, A) == (429, "capacity_exhausted")
    _device(services, "laptop-2")
    assert await _allocate(services, A) == "laptop-2"


async def test_sessions_sharing_a_device_need_disjoint_origins_and_other_profiles(
    services: Services,
) -> None:
    _device(services, "laptop-1")
    _holding(services, "laptop-1", A, profile="p-1")
    assert await _refusal(services, A) == (409, "origin_conflict")
    assert await _refusal(services, B, profile="p-1") == (409, "profile_conflict")
    assert await _allocate(services, B, profile="p-2") == "laptop-1"


async def test_a_conflict_on_one_device_moves_the_session_to_another(services: Services) -> None:
    _device(services, "laptop-1")
    _device(services, "laptop-2", assigned_at=50.0)
    _holding(services, "laptop-1", A)
    _holding(services, "laptop-2", B)
    # laptop-1 would win on assignment time, but its session already holds A.
    assert await _allocate(services, A) == "laptop-2"


async def test_full_devices_are_capacity_exhausted_though_their_origins_overlap(
    services: Services,
) -> None:
    _device(services, "laptop-1")
    _device(services, "laptop-2")
    for _ in range(DEVICE_TAB_CAPACITY):
        _holding(services, "laptop-1", [f"https://{uuid.uuid4().hex}.example"])
    _holding(services, "laptop-2", A)
    _holding(services, "laptop-2", B)
    # Capacity, not the overlap with a full device's session, is what a retry waits for.
    assert await _refusal(services, A) == (429, "capacity_exhausted")
