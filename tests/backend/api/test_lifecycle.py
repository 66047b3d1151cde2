"""Expiry, liveness, grace, late acks and attended attach, driven by the manual clock."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

from tests.backend.conftest import Backend, idem, unattended
from tests.support.simdevice import Behaviour, SimulatedDevice
from understudy.generated import models as m


async def _create(backend: Backend, http: Any, **body: Any) -> str:
    response = await http.post("/v1/sessions", json=unattended(**body), headers=idem())
    assert response.status_code == 201, response.text
    session_id: str = response.json()["sessionId"]
    # The session socket is open before the clock moves past its ticket.
    await backend.until(lambda: backend.session_status(session_id) == "connected", "connected")
    return session_id


async def _create_pending(backend: Backend, http: Any, device: SimulatedDevice) -> Any:
    """A create that will not connect in time: the 5 s wait passes on the manual clock."""
    pending = asyncio.ensure_future(http.post("/v1/sessions", json=unattended(), headers=idem()))
    # The provision frame leaves before the create starts its 5 s wait on the clock.
    await device.wait_for(lambda: device.frames_of(m.DeviceServerProvision))
    await backend.clock.advance(5)
    return await pending


async def _command(http: Any, session_id: str) -> None:
    """Admit a command the way a consumer does: a read, answered through the session socket."""
    body = {"commandId": str(uuid.uuid4()), "command": {"name": "get_tabs"}}
    response = await http.post(f"/v1/sessions/{session_id}/commands", json=body)
    assert response.status_code == 200, response.text


def _ended_at(tomb: dict[str, Any]) -> float:
    return datetime.fromisoformat(tomb["endedAt"]).timestamp()


async def _tomb(http: Any, session_id: str) -> dict[str, Any]:
    response = await http.get(f"/v1/sessions/{session_id}")
    assert response.status_code == 410, response.text
    body: dict[str, Any] = response.json()
    return body


async def _heartbeats(backend: Backend, device: SimulatedDevice, seconds: float) -> None:
    """Advance time in 22 s steps with a heartbeat at each, as the extension does."""
    while seconds > 0:
        step = min(22.0, seconds)
        await backend.clock.advance(step)
        await _heartbeat(device)
        seconds -= step


async def _heartbeat(device: SimulatedDevice) -> None:
    """Send a heartbeat and wait for its ack: the backend has recorded it."""
    acks = len(device.frames_of(m.DeviceServerHeartbeatAck))
    await device.heartbeat()
    await device.wait_for(lambda: len(device.frames_of(m.DeviceServerHeartbeatAck)) > acks)


async def _keep_alive(backend: Backend, seconds: float, device: str = "laptop-1") -> None:
    """Long stretches: record a heartbeat every 70 s straight in storage (the socket path of
    heartbeats is covered by the 75 s test); hours pass in milliseconds."""
    services = backend.services
    while seconds > 0:
        step = min(70.0, seconds)
        await backend.clock.advance(step)
        with services.storage.transaction() as tx:
            tx.devices.seen("acme", device, services.clock.now())
        seconds -= step


async def test_hard_expiry_is_24h_even_with_activity(backend: Backend) -> None:
    device = await backend.device()
    async with backend.client(backend.api_key()) as http:
        session_id = await _create(backend, http)
        created = backend.clock.now()
        body = (await http.get(f"/v1/sessions/{session_id}")).json()
        assert body["expiresAt"] != body["idleExpiresAt"]
        for _ in range(13):  # keep it from idling: a command every 110 minutes
            await _command(http, session_id)
            await _keep_alive(backend, 110 * 60)
        assert (await http.get(f"/v1/sessions/{session_id}")).status_code == 200
        await _keep_alive(backend, 10 * 60)  # 24 h 10 min
        await backend.until(lambda: backend.session_status(session_id) == "expired", "expired")
        tomb = await _tomb(http, session_id)
        assert tomb | {"endedAt": None} == {
            "sessionId": session_id,
            "status": "expired",
            "reason": "hard_expiry",
            "endedAt": None,
        }
        # It ended at the first 70 s step past 24 h: not at the check above, nor before.
        assert created + 24 * 3600 <= _ended_at(tomb) < created + 24 * 3600 + 70
        assert session_id in {str(f.session_id) for f in device.frames_of(m.DeviceServerClose)}


async def test_idle_expiry_is_2h_after_the_last_admitted_command(backend: Backend) -> None:
    await backend.device()
    async with backend.client(backend.api_key()) as http:
        session_id = await _create(backend, http)
        await _keep_alive(backend, 60 * 60)
        await _command(http, session_id)
        last_command = backend.clock.now()
        await _keep_alive(backend, 110 * 60)  # 2 h 50 min after creation: still alive
        assert (await http.get(f"/v1/sessions/{session_id}")).status_code == 200
        await _keep_alive(backend, 11 * 60)
        await backend.until(lambda: backend.session_status(session_id) == "expired", "expired")
        tomb = await _tomb(http, session_id)
        assert (tomb["status"], tomb["reason"]) == ("expired", "idle_expiry")
        # It ended at the first 70 s step past 2 h idle: not at the check above, nor before.
        assert last_command + 2 * 3600 <= _ended_at(tomb) < last_command + 2 * 3600 + 70
        # Capacity was held until the extension acknowledged the fenced close.
        devices = (await http.get("/v1/devices")).json()["devices"]
        assert devices[0]["usedCapacity"] == 0


async def test_heartbeat_gap_marks_the_device_offline_at_75s(backend: Backend) -> None:
    device = await backend.device()
    async with backend.client(backend.api_key()) as http:
        session_id = await _create(backend, http)
        await _heartbeats(backend, device, 44)
        last_heartbeat = backend.clock.now()
        await backend.clock.advance(74)  # 74 s without a heartbeat
        assert (await http.get("/v1/devices")).json()["devices"][0]["online"] is True
        await backend.clock.advance(1)
        await backend.until(
            lambda: backend.session_status(session_id) == "recovering", "the session recovers"
        )
        listed = (await http.get("/v1/devices")).json()["devices"][0]
        assert listed["online"] is False
        # The device went offline at 75 s, in the turn after the last step: not at 74 s.
        offline = [e for e in backend.services.telemetry.events if e["event"] == "device.offline"]
        assert [datetime.fromisoformat(str(e["ts"])).timestamp() for e in offline] == [
            last_heartbeat + 75
        ]
        # 90 s of liveness and recovery grace from the last heartbeat, then the lease is lost.
        await backend.clock.advance(15)
        await backend.until(lambda: backend.session_status(session_id) == "lost", "lost")
        tomb = await _tomb(http, session_id)
        assert (tomb["status"], tomb["reason"]) == ("lost", "device_lost")
        assert (await http.get("/v1/devices")).json()["devices"][0]["usedCapacity"] == 0


async def test_device_back_within_grace_recovers_the_session(backend: Backend) -> None:
    device = await backend.device()
    async with backend.client(backend.api_key()) as http:
        session_id = await _create(backend, http)
        await device.disconnect()
        await backend.clock.advance(80)
        await backend.until(lambda: backend.session_status(session_id) == "recovering", "gone")
        assert (await http.get(f"/v1/sessions/{session_id}")).json()["status"] == "recovering"
        await device.connect()  # same browser epoch: the extension still holds the lease
        await backend.until(lambda: backend.session_status(session_id) == "connected", "back")
        assert (await http.get(f"/v1/sessions/{session_id}")).json()["status"] == "connected"


async def test_provisioning_deadline_loses_the_session_and_keeps_capacity_until_settled(
    backend: Backend,
) -> None:
    device = await backend.device(behaviour=Behaviour(provision="silent", close="silent"))
    async with backend.client(backend.api_key()) as http:
        response = await _create_pending(backend, http, device)
        session_id = response.json()["sessionId"]
        assert response.status_code == 202
        await _heartbeats(backend, device, 25)
        await backend.until(lambda: backend.session_status(session_id) == "lost", "lost")
        tomb = await _tomb(http, session_id)
        assert (tomb["status"], tomb["reason"]) == ("lost", "provisioning_failed")
        assert (await http.get("/v1/devices")).json()["devices"][0]["usedCapacity"] == 1
        await _heartbeats(backend, device, 90)
        repos = backend.services.repos
        await backend.until(
            lambda: not repos.sessions.holding_capacity("acme", "laptop-1"), "capacity released"
        )
        assert (await http.get("/v1/devices")).json()["devices"][0]["usedCapacity"] == 0


async def test_a_late_provision_ack_gets_a_close(backend: Backend) -> None:
    device = await backend.device(behaviour=Behaviour(provision="silent"))
    async with backend.client(backend.api_key()) as http:
        response = await _create_pending(backend, http, device)
        session_id = response.json()["sessionId"]
        await http.delete(f"/v1/sessions/{session_id}")
        provision = device.frames_of(m.DeviceServerProvision)[0]
        device.behaviour.provision = "ack"
        await device._provision(provision)  # the tab appears after the session was deleted
        await device.wait_for(
            lambda: [
                c for c in device.frames_of(m.DeviceServerClose) if c.lease_id == provision.lease_id
            ]
        )
        assert (await http.get(f"/v1/sessions/{session_id}")).status_code == 410


async def test_refused_provisioning_is_reported(backend: Backend) -> None:
    await backend.device(behaviour=Behaviour(provision="refuse"))
    async with backend.client(backend.api_key()) as http:
        response = await http.post("/v1/sessions", json=unattended(), headers=idem())
    assert response.status_code == 503
    assert response.json()["code"] == "no_device_available"


async def test_attended_attach_binds_one_tab_and_delete_detaches(backend: Backend) -> None:
    device = await backend.device()
    async with backend.client(backend.api_key()) as http:
        session_id = (await http.post("/v1/sessions")).json()["sessionId"]
        result = await device.attach(session_id, tab_id=42)
        assert result.outcome == "attached"
        body = (await http.get(f"/v1/sessions/{session_id}")).json()
        assert (body["status"], body["deviceId"]) == ("connected", "laptop-1")
        again = await device.attach(session_id, tab_id=43)
        assert again.outcome == "refused"
        assert again.error is not None and again.error.code == "not_awaiting_attach"
        assert (await http.delete(f"/v1/sessions/{session_id}")).status_code == 202
        await device.wait_for(lambda: device.closed_leases)
        await backend.until(lambda: backend.session_status(session_id) == "closed", "closed")
        assert (await _tomb(http, session_id))["status"] == "closed"


async def test_attach_from_another_tenant_is_refused(backend: Backend) -> None:
    device = await backend.device(tenant="globex", device="other")
    async with backend.client(backend.api_key()) as http:
        session_id = (await http.post("/v1/sessions")).json()["sessionId"]
    result = await device.attach(session_id)
    assert result.outcome == "refused"
    assert result.error is not None and result.error.code == "session_not_found"


async def test_a_session_closing_when_its_browser_died_ends_at_the_new_browsers_hello(
    backend: Backend,
) -> None:
    # The new browser never answers the close (it holds no such lease): its hello alone proves
    # the tab is gone, so capacity and origins are free for the next session at once.
    device = await backend.device(behaviour=Behaviour(close="silent"))
    async with backend.client(backend.api_key()) as http:
        session_id = await _create(backend, http)
        await device.disconnect()  # the browser is killed
        deleted = await http.delete(f"/v1/sessions/{session_id}")
        assert deleted.status_code == 202, deleted.text
        assert deleted.json()["status"] == "closing"
        await device.restart_browser()
        await backend.until(lambda: backend.session_status(session_id) == "closed", "closed")
        assert not device.closed_leases  # ended by the hello, not by an acknowledgement
        # The same origins on the same device are admitted right away.
        await _create(backend, http)
        assert (await http.get(f"/v1/sessions/{session_id}")).status_code == 410


async def test_a_session_closing_through_an_extension_restart_still_waits_for_its_ack(
    backend: Backend,
) -> None:
    # The same browser may still hold the tab: the close is repeated, and only the ack ends it.
    device = await backend.device(behaviour=Behaviour(close="silent"))
    async with backend.client(backend.api_key()) as http:
        session_id = await _create(backend, http)
        await device.disconnect()
        assert (await http.delete(f"/v1/sessions/{session_id}")).status_code == 202
        device.leases.clear()  # even if it reports no lease, it is the same browser
        await device.connect()
        await device.wait_for(lambda: device.frames_of(m.DeviceServerClose))
        assert backend.session_status(session_id) == "closing"


async def test_browser_restart_recreates_blank_tabs_and_blocks_writes(backend: Backend) -> None:
    device = await backend.device()
    async with backend.client(backend.api_key()) as http:
        session_id = await _create(backend, http)
        old_tab = next(iter(device.leases.values())).tab_id
        await device.restart_browser()
        await device.wait_for(lambda: device.leases)
        await backend.until(lambda: backend.session_status(session_id) == "connected", "back")
        lease = next(iter(device.leases.values()))
        assert lease.tab_id != old_tab
        assert lease.lease_epoch == 2
        body = (await http.get(f"/v1/sessions/{session_id}")).json()
        assert body["status"] == "connected"
        assert (body["writesBlocked"], body["writesBlockedReason"]) == (
            True,
            "browser_epoch_changed",
        )
        # The prior epoch's session ticket no longer opens a socket (authority was demoted).
        await device.wait_for(lambda: lease.session_frames)
        assert isinstance(lease.session_frames[0], m.SessionServerHelloAck)
        assert lease.session_frames[0].writes_blocked is True
