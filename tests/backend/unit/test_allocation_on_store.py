"""The allocation policy on a real store: which enrolled device gets a new unattended session.

Driven through `TenantCoordinator._allocate` on a real store, without sockets: devices are
rows as their hellos left them, sessions are rows holding capacity, both written at the clock's
now as the coordinator writes them, so the tenant's timer has nothing to do while a test runs.
Every test also fails if anything logged an error or a log handler failed meanwhile: a timer turn
that fails in the background leaves no other trace.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from understudy._bootstrap import build_services
from understudy._clock import ManualClock
from understudy._config import load_settings
from understudy._policy import HARD_TTL_S, IDLE_TTL_S
from understudy._problems import ProblemError
from understudy._store import migrate
from understudy._store.sessions import NewSession
from understudy.generated.protocol import DEVICE_TAB_CAPACITY

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from understudy._services import Services
    from understudy.coordinator import TenantCoordinator

A = ["https://a.example"]
B = ["https://b.example"]
CAPABLE = ["safe_write_v2", "unattended_v1"]


class _Errors(logging.Handler):
    """Keeps every error record, and every record a handler failed to write."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []
        self.unwritten: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logged_errors(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Errors]:
    """Fails the test if the service or the event loop logged an error while it ran."""
    errors = _Errors()
    # A handler whose stream is gone prints "--- Logging error ---" instead of raising.
    monkeypatch.setattr(logging.Handler, "handleError", lambda _, r: errors.unwritten.append(r))
    loggers = [logging.getLogger(name) for name in ("understudy", "asyncio")]
    for logger in loggers:
        logger.addHandler(errors)
    try:
        yield errors
    finally:
        for logger in loggers:
            logger.removeHandler(errors)
    assert not errors.records, [record.getMessage() for record in errors.records]
    assert not errors.unwritten, [record.getMessage() for record in errors.unwritten]


@pytest.fixture
async def services(tmp_path: Path, logged_errors: _Errors) -> AsyncIterator[Services]:
    settings = load_settings({"UNDERSTUDY_DATA_DIR": str(tmp_path / "data")})
    running = build_services(settings, ManualClock())
    migrate(running.db, now=0.0)  # the schema only: no actor starts, no timer is armed
    try:
        yield running
    finally:
        await running.stop()  # disarms the timers the tests' turns armed


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
    now = s.clock.now()  # a hello at another time would be a heartbeat gap the timer acts on
    with s.db.transaction():
        s.db.storage.repos.devices.add(
            tenant="acme", device_id=device_id, digest=uuid.uuid4().hex, now=now
        )
        s.db.storage.repos.devices.connected(
            "acme",
            device_id,
            now=now,
            browser_epoch="epoch",
            protocol_versions=list(versions),
            capabilities=capabilities,
            local_policy=policy or {"mode": "any"},
        )
        s.db.storage.repos.devices.assigned("acme", device_id, now=now + assigned_at)
        if not online:
            s.db.storage.repos.devices.offline("acme", device_id)


def _holding(s: Services, device_id: str, origins: list[str], profile: str | None = None) -> None:
    """A connected session on the device, as provisioning leaves it: with its lease."""
    now = s.clock.now()
    with s.storage.transaction() as tx:
        tx.sessions.insert(
            NewSession(
                session_id=str(uuid.uuid4()),
                tenant="acme",
                actor="agent",
                mode="unattended",
                status="connected",
                device_id=device_id,
                lease_id=str(uuid.uuid4()),
                lease_epoch=1,
                allowed_origins=origins,
                profile_hash=profile,
                created_at=now,
                expires_at=now + HARD_TTL_S,
                idle_expires_at=now + IDLE_TTL_S,
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
