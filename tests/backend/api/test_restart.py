"""A backend restart in the middle of provisioning and of closing: state comes back from SQLite,
timers are re-armed at their original deadlines (or fire at once when they passed while the process
was down), and capacity stays reserved until the close is settled.

Each test stops a backend, moves the manual clock while nothing runs, then starts another backend
on the same data directory (same database and master key) and the same clock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.backend.conftest import idem, start_backend, stop_backend, unattended
from tests.support.simdevice import Behaviour
from understudy._clock import ManualClock
from understudy.generated import models as m
from understudy.generated.protocol import DEVICE_OFFLINE_AFTER_S

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from tests.backend.conftest import Backend
    from tests.support.simdevice import SimulatedDevice


@dataclass
class Service:
    """One data directory, one clock and one consumer client across backend restarts."""

    tmp_path: Path
    clock: ManualClock
    http: httpx.AsyncClient
    backend: Backend | None = None
    key: str = ""

    async def start(self) -> Backend:
        backend = self.backend = await start_backend(self.tmp_path, clock=self.clock)
        self.key = self.key or backend.api_key()  # stored in SQLite: valid after restarts
        self.http.base_url = httpx.URL(backend.url)
        self.http.headers["Authorization"] = f"Bearer {self.key}"
        await backend.until(
            lambda: _nothing_overdue(backend), "the deadlines that passed while down have fired"
        )
        return backend

    async def stop(self) -> None:
        assert self.backend is not None
        backend, self.backend = self.backend, None
        await stop_backend(backend)

    async def reconnect(self, device: SimulatedDevice) -> None:
        """The extension reconnects to the restarted backend (same credential and browser)."""
        assert self.backend is not None
        device.base_url = self.backend.url
        self.backend.devices.append(device)
        await device.connect()
        # The hello turn re-sends what the device missed; a heartbeat answered after it proves
        # the backend has handled the hello.
        acks = len(device.frames_of(m.DeviceServerHeartbeatAck))
        await device.heartbeat()
        await device.wait_for(lambda: len(device.frames_of(m.DeviceServerHeartbeatAck)) > acks)

    async def status(self, session_id: str) -> tuple[int, dict[str, Any]]:
        response = await self.http.get(f"/v1/sessions/{session_id}")
        body: dict[str, Any] = response.json()
        return response.status_code, body

    async def used_capacity(self) -> int:
        devices = (await self.http.get("/v1/devices")).json()["devices"]
        used: int = devices[0]["usedCapacity"]
        return used


def _nothing_overdue(backend: Backend) -> bool:
    """No session or device deadline of any tenant is due: every timer that was has fired."""
    repos, now = backend.services.repos, backend.clock.now()
    for tenant in repos.api_keys.tenants():
        due = repos.sessions.next_deadline(tenant, offline_after_s=DEVICE_OFFLINE_AFTER_S)
        if due is not None and due <= now:
            return False
    return True


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async with httpx.AsyncClient(timeout=10) as http:
        running = Service(tmp_path, ManualClock(), http)
        try:
            yield running
        finally:
            if running.backend is not None:
                await running.stop()


async def create_pending(service: Service) -> str:
    """A create the silent device leaves in provisioning: 202 after the 5 s wait."""
    assert service.backend is not None
    devices = service.backend.devices
    sent = sum(len(d.frames_of(m.DeviceServerProvision)) for d in devices)
    pending = asyncio.ensure_future(
        service.http.post("/v1/sessions", json=unattended(), headers=idem())
    )
    # The provision frame leaves before the create starts its 5 s wait on the clock.
    await service.backend.until(
        lambda: sum(len(d.frames_of(m.DeviceServerProvision)) for d in devices) > sent,
        "a device got the provision",
    )
    await service.clock.advance(5)
    response = await pending
    assert response.status_code == 202, response.text
    session_id: str = response.json()["sessionId"]
    return session_id


async def create_and_delete(service: Service, device: SimulatedDevice) -> str:
    assert service.backend is not None
    created = await service.http.post("/v1/sessions", json=unattended(), headers=idem())
    assert created.status_code == 201, created.text
    session_id: str = created.json()["sessionId"]
    backend = service.backend
    await backend.until(lambda: backend.session_status(session_id) == "connected", "connected")
    deleting = await service.http.delete(f"/v1/sessions/{session_id}")
    assert deleting.json()["status"] == "closing"
    await device.wait_for(lambda: device.frames_of(m.DeviceServerClose))
    return session_id


async def test_provisioning_deadline_that_passed_while_down_fires_at_start_up(
    service: Service,
) -> None:
    created_at = service.clock.now()
    first = await service.start()
    device = await first.device(behaviour=Behaviour(provision="silent"))
    session_id = await create_pending(service)
    assert await service.used_capacity() == 1
    await service.stop()

    await service.clock.advance(40)  # the 30 s deadline passes while no process runs
    await service.start()

    code, tomb = await service.status(session_id)
    assert (code, tomb["status"], tomb["reason"]) == (410, "lost", "provisioning_failed")
    assert service.clock.now() == created_at + 45
    # The device may have made the tab: its capacity stays reserved until the close settles.
    assert await service.used_capacity() == 1
    await service.reconnect(device)
    closes = device.frames_of(m.DeviceServerClose)
    assert [str(c.session_id) for c in closes] == [session_id]
    assert await service.used_capacity() == 0


async def test_provisioning_deadline_is_re_armed_at_30s_after_creation(service: Service) -> None:
    first = await service.start()
    device = await first.device(behaviour=Behaviour(provision="silent"))
    session_id = await create_pending(service)  # now: creation + 5 s
    await service.stop()

    await service.clock.advance(10)  # down for 10 s; restart at creation + 15 s
    second = await service.start()

    code, body = await service.status(session_id)
    assert (code, body["status"]) == (200, "provisioning")
    assert await service.used_capacity() == 1
    await service.reconnect(device)
    provisions = device.frames_of(m.DeviceServerProvision)
    assert len(provisions) == 2  # reconciliation re-sent the provision of the same lease
    assert provisions[0].lease_id == provisions[1].lease_id

    created_at = service.clock.now() - 15
    await service.clock.advance(14.9)  # creation + 29.9 s
    assert (await service.status(session_id))[1]["status"] == "provisioning"
    await service.clock.advance(0.1)  # creation + 30 s: the deadline set before the restart
    await second.until(lambda: second.session_status(session_id) == "lost", "lost")
    code, tomb = await service.status(session_id)
    assert (code, tomb["status"], tomb["reason"]) == (410, "lost", "provisioning_failed")
    # Lost at 30 s, in the turn after the last step: not at 29.9 s.
    assert datetime.fromisoformat(tomb["endedAt"]).timestamp() == created_at + 30
    # The device acknowledged the close of whatever it may have made: capacity is free again.
    await device.wait_for(lambda: device.frames_of(m.DeviceServerClose))
    repos = second.services.repos
    await second.until(
        lambda: not repos.sessions.holding_capacity("acme", "laptop-1"), "capacity released"
    )
    assert await service.used_capacity() == 0


async def test_closing_session_settles_on_the_resent_close_after_a_restart(
    service: Service,
) -> None:
    first = await service.start()
    device = await first.device(behaviour=Behaviour(close="silent"))
    session_id = await create_and_delete(service, device)
    await service.stop()

    await service.clock.advance(30)  # well inside the 90 s device-loss deadline
    await service.start()

    code, body = await service.status(session_id)
    assert (code, body["status"]) == (200, "closing")
    assert await service.used_capacity() == 1
    device.behaviour.close = "ack"
    await service.reconnect(device)
    closes = await device.wait_for(
        lambda: (
            len(device.frames_of(m.DeviceServerClose)) == 2
            and device.frames_of(m.DeviceServerClose)
        )
    )
    backend = service.backend
    assert backend is not None
    await backend.until(lambda: backend.session_status(session_id) == "closed", "closed")
    assert len(closes) == 2
    assert (closes[1].lease_id, closes[1].lease_epoch) == (
        closes[0].lease_id,
        closes[0].lease_epoch,
    )
    code, tomb = await service.status(session_id)
    assert (code, tomb["status"], tomb["reason"]) == (410, "closed", "deleted")
    assert await service.used_capacity() == 0


async def test_closing_session_is_released_at_start_up_once_the_loss_deadline_passed(
    service: Service,
) -> None:
    first = await service.start()
    device = await first.device(behaviour=Behaviour(close="silent"))
    session_id = await create_and_delete(service, device)
    await service.stop()

    await service.clock.advance(89)
    await service.start()
    assert (await service.status(session_id))[1]["status"] == "closing"
    assert await service.used_capacity() == 1
    await service.stop()

    await service.clock.advance(1)  # 90 s after the delete, while no process runs
    await service.start()
    code, tomb = await service.status(session_id)
    assert (code, tomb["status"], tomb["reason"]) == (410, "closed", "deleted")
    assert await service.used_capacity() == 0
